"""The fork server rehearses, before it forks, the work every agent process does that is the same in
all of them (an event loop, IPC connections exchanging a turn's records, the id helpers), so that
the bytecode CPython 3.11 specializes after a function's first calls and the interpreter's method
cache are already written in pages the children share instead of in each child's private copies.

"Specialized" is read from the code object: ``_co_code_adaptive`` (CPython 3.11) differs from
``co_code`` once the interpreter has quickened the function.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import goondan
import kit

PROBE = """
import asyncio, json, os, signal, threading
from goondan.executors.process import _forkserver, _ipc
import asyncio.base_events as base_events

def specialized(fn):
    code = fn.__code__
    return code._co_code_adaptive != code.co_code

probes = {
    "loop_init": base_events.BaseEventLoop.__init__,
    "run_once": base_events.BaseEventLoop._run_once,
    "channel_send": _ipc.MessageChannel.send,
    "frame_received": _ipc._FrameProtocol.data_received,
    "frame_delivered": _ipc.FrameChannel._deliver,
    "dispatch": _ipc.Dispatcher.dispatch,
}
before = {name: specialized(fn) for name, fn in probes.items()}
fds = sorted(os.listdir("/proc/self/fd"))
tasks = len(os.listdir("/proc/self/task"))
_forkserver.rehearse()
print(json.dumps({
    "before": before,
    "after": {name: specialized(fn) for name, fn in probes.items()},
    "fds_left": sorted(set(os.listdir("/proc/self/fd")) - set(fds)),
    "threads_added": len(os.listdir("/proc/self/task")) - tasks,
    "loop_left": asyncio.get_event_loop_policy()._local._loop is not None,
    "wakeup_fd": signal.set_wakeup_fd(-1),
}))
"""


def probe() -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_rehearsal_specializes_the_event_loop_and_ipc_code_every_agent_process_runs() -> None:
    result = probe()
    assert not any(result["before"].values()), result  # a fresh interpreter has run none of it
    assert all(result["after"].values()), result


def test_rehearsal_leaves_no_thread_event_loop_descriptor_or_wakeup_fd_behind_for_the_fork() -> None:
    # what the fork server forks after it must still be a single-threaded process with no loop
    result = probe()
    assert result["threads_added"] == 0
    assert result["fds_left"] == []
    assert result["loop_left"] is False
    assert result["wakeup_fd"] == -1


def test_rehearsal_starts_from_an_empty_method_cache_so_a_child_drops_no_reference_to_a_server_name() -> None:
    from goondan.executors.process._forkserver import rehearse

    name = sys.intern("".join(["goondan_rehearsal_", "probe_attribute"]))

    class Probe:
        pass

    unheld = sys.getrefcount(name)
    getattr(Probe, name, None)  # a lookup that misses: the interpreter's method cache keeps the name
    assert sys.getrefcount(name) > unheld
    rehearse(1)
    assert sys.getrefcount(name) == unheld


MODEL = """
import asyncio.base_events
import json
import os
import threading


def generate(request):
    # an agent process makes one event loop: eight made before the fork specialized this code
    code = asyncio.base_events.BaseEventLoop.__init__.__code__
    return {"text": json.dumps({"pid": os.getpid(), "specialized": code._co_code_adaptive != code.co_code,
                                "threads": threading.active_count()})}
"""

THREAD_MODEL = (
    """
import threading
import time

TICKER = threading.Thread(target=lambda: time.sleep(3600), daemon=True, name="ticker")
TICKER.start()
"""
    + MODEL
)


async def one_turn(root: Path, state_root: Path) -> tuple[dict[str, Any], int]:
    async with goondan.Runtime(root, state_root=state_root, executor="process") as rt:
        result = await rt.request("hi", agent="a", instance_key="k")
        orch: Any = rt.orchestrator
        answer: dict[str, Any] = json.loads(str(result.text))
        return answer, int(orch.handles[("a", "k")].pid)


def bundle(root: Path, code: str) -> Path:
    return kit.write_bundle(
        root,
        kit.package_doc(),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        files={"model.py": code},
    )


def test_an_agent_process_is_forked_with_the_rehearsed_code_already_specialized(
    tmp_path: Path, state_root: Path
) -> None:
    answer, pid = kit.run(one_turn(bundle(tmp_path / "b", MODEL), state_root))
    assert answer["pid"] == pid
    assert answer["specialized"] is True


def test_the_fork_server_that_replaced_a_thread_starting_preload_still_rehearses(
    tmp_path: Path, state_root: Path
) -> None:
    # the re-exec fallback (a bundle module started a thread at import) keeps the thread in the
    # agent process and still forks it from a rehearsed server
    answer, pid = kit.run(one_turn(bundle(tmp_path / "b", THREAD_MODEL), state_root))
    assert answer["pid"] == pid
    assert answer["threads"] == 2
    assert answer["specialized"] is True


PDEATHSIG = """
import ctypes, signal
from goondan.executors.process._forkserver import set_parent_death_signal

set_parent_death_signal(signal.SIGKILL)  # the fork server, when it starts


def no_libc_lookup(*args, **kwargs):
    raise AssertionError("ctypes.CDLL called again")


ctypes.CDLL = no_libc_lookup
set_parent_death_signal(signal.SIGTERM)  # an agent process forked from it
got = ctypes.c_int()
libc = ctypes.PyDLL(None)  # a subclass: the original CDLL, to read the signal back
libc.prctl(2, ctypes.byref(got), 0, 0, 0)  # PR_GET_PDEATHSIG
print(got.value)
"""


def test_an_agent_process_sets_its_parent_death_signal_with_the_prctl_its_fork_server_looked_up() -> None:
    out = subprocess.run([sys.executable, "-c", PDEATHSIG], capture_output=True, text=True, timeout=60, check=True)
    assert int(out.stdout.strip()) == 15  # SIGTERM: set without loading libc through ctypes.CDLL again


PLATFORM = """
import importlib, json, sys
from pathlib import Path
from types import SimpleNamespace
from goondan.executors.process._forkserver import _preload_model

provider = sys.argv[1]
spec = SimpleNamespace(provider=provider, model="m", options={}, endpoint="http://127.0.0.1:9/v1")
_preload_model(SimpleNamespace(spec=spec, root=Path(".")))
base = importlib.import_module(provider + "._base_client")
print(json.dumps(base.platform_headers.cache_info().currsize))
"""


def test_the_fork_server_works_out_the_sdk_platform_headers_a_childs_first_request_needs() -> None:
    # a Stainless-generated SDK works them out at a client's first request, in a worker thread
    # (reading the interpreter's binary and /etc/os-release): done before the fork, children share it
    for provider in ("openai", "anthropic"):
        out = subprocess.run(
            [sys.executable, "-c", PLATFORM, provider], capture_output=True, text=True, timeout=60, check=True
        )
        assert json.loads(out.stdout.strip().splitlines()[-1]) == 1, provider
