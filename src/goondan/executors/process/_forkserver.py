"""The pre-warmed fork server: one process per runtime, started with ``sys.executable``, that has
already imported goondan, pydantic and the model/tool machinery and loaded the bundle, and that
``fork()``s a new agent process on request. A new instance therefore skips the interpreter start and
every import: its first turn starts within milliseconds.

Why a separate process instead of forking the host: the host runs an asyncio loop and maybe threads
(forking those is unsafe), holds hundreds of sockets, and may be any application embedding goondan.
The fork server is single-threaded and has no event loop, so ``fork()`` is clean.

Control channel (``SOCK_SEQPACKET``, one datagram = one record of ``_ipc``, where the messages
and the reason this channel is not a byte stream are documented): host → server ``init`` then
``spawn`` with the child's socket and output pipe as SCM_RIGHTS; server → host ``ready`` /
``start_error``, ``spawned``, ``exited``. The server reaps its children; when the host goes away
(end of stream, or the parent-death signal) it SIGKILLs every child and exits, and every child gets
SIGKILL when the server dies, so a killed host never leaves agent processes writing to instance
files.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import select
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from ._ipc import (
    ORCHESTRATOR,
    Dispatcher,
    Init,
    IpcError,
    Ready,
    Record,
    Spawn,
    Spawned,
    StartError,
    decode,
    decode_record,
    encode_packet,
)
from ._ipc import Exited as ExitedMsg
from ._ipc import log as ipc_log

PR_SET_PDEATHSIG = 1
FORKSERVER = "forkserver"


_prctl: list[Any] = []  # libc's prctl, looked up once: by the fork server, before its children


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Linux: get ``sig`` when the parent dies. Elsewhere a no-op (end of stream still works).

    The function is looked up once per process tree: the fork server does it when it starts, so an
    agent process calls it without loading libc through ``ctypes`` again (which made new objects and
    wrote to the server's shared ``CDLL`` pages in every child)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        if not _prctl:
            _prctl.append(ctypes.CDLL(None, use_errno=True).prctl)
        _prctl[0](PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except Exception:
        pass


def _packet(ctl: socket.socket, record: Record) -> None:
    with contextlib.suppress(OSError):
        ctl.send(encode_packet(record.message(FORKSERVER, ORCHESTRATOR)))


def _warm(init: Init, preload: bool = True) -> Any:
    """Import what every agent process needs and load the bundle once (and, with ``preload``, what
    its agents import when they start: see :func:`_preload`)."""
    import goondan.engine._instance
    import goondan.extensions
    import goondan.models
    import goondan.tools  # noqa: F401
    from goondan.bundle import load_bundle_for_requests
    from goondan.engine._swarm import SwarmContext
    from goondan.executors.process import _agent_process  # noqa: F401

    # Agent processes start no connector, so the Connections' config and secrets are neither
    # required nor resolved here (a `gdn run --input` of a bundle with an unset webhook secret ran
    # inline but failed in the default process mode, and agents never need connector secrets).
    bundle = load_bundle_for_requests(init.bundle, env=init.env, state_root=Path(init.state_root))
    ctx = SwarmContext(
        bundle,
        swarm=init.swarm,
        state_root=Path(init.state_root),
        persist=init.persist,
        store=init.store,
    )
    if preload:
        _preload(ctx)
    return ctx


def _preload_model(model: Any) -> None:
    """Construct the model's adapter (which imports the provider's module and SDK) and, for a network
    provider, make one SDK client in a throwaway event loop, touch the parts of it a call goes
    through (``client_paths``, made lazily by the SDK) and close it: what the client imports then
    (its HTTP stack, TLS support, the API resources) comes with the fork. The child still makes its own
    client in its own loop at its first call; nothing is connected here (the key is a placeholder)."""
    import asyncio
    import operator

    from goondan._json import copy_json
    from goondan.models import create_model_adapter

    spec: Any = model.spec
    if spec.provider == "local":  # its adapter locates the weights file: left to the child, as before
        return
    adapter: Any = create_model_adapter(
        spec.provider,
        model=spec.model,
        options=copy_json(spec.options),
        root=model.root,
        api_key="preload",
        endpoint=spec.endpoint,
    )
    make, close = getattr(adapter, "_make_client", None), getattr(adapter, "_close_client", None)
    if make is None or close is None:
        return

    async def client() -> None:
        made = make()
        try:
            for path in getattr(adapter, "client_paths", ()):
                operator.attrgetter(path)(made)
        finally:
            await close(made)

    asyncio.run(client())
    _preload_platform_headers(getattr(adapter, "_sdk", None))


def _preload_platform_headers(sdk: Any) -> None:
    """Work out, once here, the platform headers a Stainless-generated SDK (``openai``,
    ``anthropic``) sends with every request: it does so at a client's first request, in a worker
    thread, from ``platform.platform()`` (which reads the interpreter's binary for its libc
    version) and ``/etc/os-release``. Done here, the ``platform`` module's caches and the SDK's
    ``platform_headers`` cache come with the fork, and each child's first request finds them.
    Measured (30 idle openai-provider agents, one turn each): about 0.45 MiB less private memory
    per agent process. Nothing here is user code or network; an SDK without these functions is
    left alone."""
    base = getattr(sdk, "_base_client", None)
    version = getattr(sdk, "__version__", None)
    get_platform = getattr(base, "get_platform", None)
    headers = getattr(base, "platform_headers", None)
    if callable(get_platform) and callable(headers) and isinstance(version, str):
        with contextlib.suppress(Exception):
            headers(version, platform=get_platform())


def free_blocks() -> dict[int, int]:
    """Free blocks left in partly used pools of CPython's small-object allocator, by block size,
    parsed from ``sys._debugmallocstats()`` (CPython only; ``{}`` when it cannot be read)."""
    import re
    import tempfile

    stats = getattr(sys, "_debugmallocstats", None)
    if stats is None:
        return {}
    with tempfile.TemporaryFile() as fh:
        saved = os.dup(2)  # the statistics are written by C code to fd 2
        try:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(fh.fileno(), 2)
            stats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        fh.seek(0)
        text = fh.read().decode("ascii", "replace")
    # "class   size   num pools   blocks in use  avail blocks" rows
    rows = re.finditer(r"^\s*\d+\s+(\d+)\s+\d+\s+\d+\s+(\d+)\s*$", text, re.M)
    return {int(m.group(1)): int(m.group(2)) for m in rows}


def fill_free_blocks(passes: int = 3) -> list[list[bytes]]:
    """Fill the free blocks of the allocator's partly used pools with objects this server keeps.

    Why: a child's new objects go first into free blocks of the pools it inherited, and writing one
    64-byte object there copies the whole 4 KiB page it shares with the fork server. With those
    blocks taken, a child's allocations fill pools of its own, densely. Measured: about 0.3 MiB
    less private memory per idle agent process, for a few hundred KiB once in this server.
    ``bytes`` objects of ``n`` bytes take blocks of ``n + 33`` rounded up, so one length per block
    size (48 and up) hits each pool's size exactly; a pass's own allocations (the lists) can open
    new pools, hence a few passes."""
    import itertools

    header = sys.getsizeof(b"")
    kept: list[list[bytes]] = []
    for _ in range(passes):
        todo = {size: n for size, n in free_blocks().items() if n and size > header + 8}
        if not todo:
            break
        for size, n in todo.items():
            kept.append([bytes(size - header) for _ in itertools.repeat(None, n)])
    return kept


def thread_count() -> int:
    """Threads of this process, native ones included (a C library's pool is no ``threading``
    thread but is just as lost in a forked child); ``threading``'s count where ``/proc`` is absent."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def _preload(ctx: Any) -> None:
    """Do, once and before any fork, the imports every agent process of this swarm would otherwise
    do itself when its instance starts: the agents' plans, their model providers' modules and SDKs,
    and the bundle's model, tool and extension entries (with everything they import).

    Why: memory a child allocates is private to it, pages it inherits stay shared. An ``openai`` SDK
    imported in each child costs about 35 MiB and 0.5 s of CPU per agent process; imported here it
    is shared by all of them. The children run the same modules they would have imported (a reload
    of the bundle starts a new fork server, which imports the changed files). Failures are ignored
    here: the child imports again and reports the error the usual way.
    """
    from goondan._modules import import_path

    entries: list[Path] = []
    for agent in sorted(ctx.agent_names):
        try:
            plan = ctx.plan(agent)
            entries += ctx.entry_paths(agent)
            # the built-in extensions an agent gets without listing them (context-message, ...)
            entries += [binding[1] for binding in ctx._implicit_context_message(plan)]
        except Exception:
            continue
        with contextlib.suppress(Exception):
            _preload_model(plan.model)
    for path in dict.fromkeys(entries):
        with contextlib.suppress(Exception):
            import_path(path)


REHEARSALS = 8  # CPython 3.11 specializes a function's bytecode after 8 calls


def rehearse(times: int = REHEARSALS) -> None:
    """Run, before the fork, the part of an agent process's work that is the same in every one and
    touches nothing outside this process: an event loop started and closed, the two ends of an agent
    channel (``FrameChannel``) over a socket pair exchanging the records of a turn (``turn``, a
    deferred runtime event, ``turn_accepted``, ``turn_done``), an ``asyncio`` queue, lock and
    tasks, and the id helpers.

    Why: memory a child writes is copied out of the pages it shares with this server, and CPython
    3.11 writes to objects it only reads: a function's first calls count up to its specialization
    in its code object, specialization rewrites the bytecode, and each type-attribute lookup that
    misses the interpreter's method cache replaces an entry that holds a reference to the name
    (a write to that string's page). Done here first, the children find the bytecode specialized
    and the cache filled, and copy fewer pages. Measured (40 idle agents after one turn):
    about 0.3 MiB less private memory each. No user code runs here (no model, tool or extension),
    no thread is started and nothing leaves the process; a failure is ignored (the children then do
    the same work themselves, as before).

    The method cache is emptied first: what the imports left in it is of little use to a child, and
    each entry a child replaces drops a reference to a name of this server (another page copied),
    while an empty entry costs nothing to fill. Measured: about 0.28 MiB less per idle agent
    process again; the entries the rehearsal fills are the ones the children find."""
    import asyncio

    clear_method_cache = getattr(sys, "_clear_type_cache", None)  # CPython
    if clear_method_cache is not None:
        clear_method_cache()

    from goondan._ids import new_id, new_span_id, new_trace_id, now_iso

    from ._ipc import FrameChannel, RuntimeEvent, Turn, TurnAccepted, TurnDone

    async def turns() -> None:
        near, far = socket.socketpair()
        host, agent = await FrameChannel.open(near), await FrameChannel.open(far)
        queue: asyncio.Queue[Turn] = asyncio.Queue()
        lock = asyncio.Lock()
        errors: list[IpcError] = []
        # the agent process's end: messages handled in the read callback, turns queued
        table = Dispatcher("fork server rehearsal", ipc_log).on(Turn, queue.put_nowait)
        for kind in (RuntimeEvent, TurnAccepted, TurnDone):
            table.on(kind, lambda _rec: None)
        reading = asyncio.get_running_loop().create_task(agent.serve(table.dispatch, errors.append))
        for n in range(3):
            ticket = new_id("ticket")
            event = {"id": new_id("evt"), "traceId": new_trace_id(), "spanId": new_span_id(), "createdAt": now_iso()}
            host.send_record(Turn(ticket, event), ORCHESTRATOR, FORKSERVER)
            turn = await queue.get()
            async with lock:
                agent.defer(RuntimeEvent({"type": "step.started", "stepIndex": n}).message(FORKSERVER, ORCHESTRATOR))
                agent.send_record(TurnAccepted(turn.ticket), FORKSERVER, ORCHESTRATOR)
                await asyncio.get_running_loop().create_task(asyncio.sleep(0))
            agent.send_record(TurnDone(turn.ticket, {"turnId": "", "finishReason": "stop"}), FORKSERVER, ORCHESTRATOR)
            await agent.drain()
            for _ in range(3):  # the host's end: messages read one by one
                reply = await host.recv()
                if reply is None:
                    break
                table.dispatch(reply)
        host.close()
        await reading  # the agent's end sees the end of the stream
        agent.close()
        await asyncio.sleep(0)  # the transports' close callbacks

    for _ in range(times):
        asyncio.run(turns())


def _redirect_output(out: int | None) -> None:
    """The child's fds 1 and 2 become the host's output pipe: prints, C-level writes and the output
    of subprocesses a tool starts land in the instance's bounded log, never on the host's stdout."""
    if out is None:
        return
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)


def _child(ctl: socket.socket, wake: tuple[int, int], fd: int, out: int | None, spec: dict[str, Any], ctx: Any) -> None:
    code = 70
    try:
        _redirect_output(out)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for w in wake:
            os.close(w)
        ctl.close()
        parent = int(spec.get("forkServerPid", 0))
        set_parent_death_signal()
        if parent and os.getppid() != parent:
            os._exit(0)
        from goondan.executors.process._agent_process import run_agent_process

        code = run_agent_process(fd, spec, ctx)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 70
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _restart_without_preload(ctl: socket.socket, raw: bytes) -> None:
    """Replace this process by a fresh fork server that does not preload (``exec``: every thread is
    gone), handing it the init message through an inherited temporary file.

    Why: a module imported by :func:`_preload` started a thread. A forked child has only the thread
    that forked, so that thread would be missing in every agent process, where it ran before
    (each child imported the module itself); and forking a process with threads can copy a lock
    some other thread holds. Correctness first: the children import the bundle's modules themselves.
    """
    import tempfile

    with tempfile.TemporaryFile() as fh:
        fh.write(raw)
        fh.flush()
        fd = os.dup(fh.fileno())
    os.set_inheritable(fd, True)
    os.set_inheritable(ctl.fileno(), True)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    argv = [sys.executable, "-m", "goondan.executors.process._forkserver", str(ctl.fileno()), str(fd)]
    os.execv(sys.executable, argv)


def _read_init(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as fh:
        fh.seek(0)
        return fh.read()


def serve(ctl: socket.socket, init_fd: int | None = None) -> int:
    """Serve the host on ``ctl``. ``init_fd``: this server replaced one whose preload started a
    thread (:func:`_restart_without_preload`); the init message is read from it and nothing is
    preloaded."""
    set_parent_death_signal()
    # Ctrl+C reaches the whole process group, and so does SIGTERM from `systemctl stop`
    # (KillMode=control-group), `timeout` or `kill -- -PGID`: the host decides when agent processes
    # stop (gdn run lets running turns answer first). Dying of the group's SIGTERM here took every
    # agent process with it (their parent-death signal) and failed those turns mid-way. The forked
    # agent processes inherit both; an agent process takes SIGTERM back once it acknowledged its
    # shutdown (the supervisor's escalation for one slow to exit). The host's own death still ends
    # this server (parent-death signal, end of stream).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raw = ctl.recv(1 << 22) if init_fd is None else _read_init(init_fd)
    if not raw:
        return 0
    try:
        init = decode_record(decode(raw))
        if not isinstance(init, Init):
            raise IpcError(f"the first message must be init, not {init.KIND}")
    except IpcError as exc:
        _packet(ctl, StartError({"code": "E_FORKSERVER", "message": str(exc)}))
        return 1
    for path in reversed(init.sys_path or []):
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        threads = thread_count()
        ctx = _warm(init, preload=init_fd is None)
        if init_fd is None and thread_count() > threads:
            _restart_without_preload(ctl, raw)
    except BaseException as exc:
        from goondan.errors import GoondanError

        error = exc.to_dict() if isinstance(exc, GoondanError) else {"code": "E_FORKSERVER", "message": str(exc)}
        error["class"] = type(exc).__name__
        _packet(ctl, StartError(error))
        return 1
    _packet(ctl, Ready(os.getpid()))
    with contextlib.suppress(Exception):
        rehearse()  # before the collection and the ballast: its garbage goes, its holes get filled
    gc.collect()
    ballast = fill_free_blocks()  # noqa: F841  (kept for the life of the server)
    gc.freeze()  # children inherit these objects untouched: no copy-on-write from the collector
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    children: set[int] = set()
    me = os.getpid()

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            _packet(ctl, ExitedMsg(pid, os.waitstatus_to_exitcode(status)))

    received: list[int] = []  # the descriptors that came with the datagram being dispatched

    def on_spawn(rec: Spawn) -> None:
        fds = received[:]
        received.clear()
        if not fds:
            return
        fd = fds[0]
        out = fds[1] if len(fds) > 1 else None
        for extra in fds[2:]:
            os.close(extra)
        spec = dict(rec.spec)
        spec["forkServerPid"] = me
        pid = os.fork()
        if pid == 0:
            _child(ctl, (wake_r, wake_w), fd, out, spec, ctx)
        os.close(fd)
        if out is not None:
            os.close(out)
        children.add(pid)
        _packet(ctl, Spawned(rec.id, pid))

    table = Dispatcher("fork server", ipc_log).on(Spawn, on_spawn)

    try:
        while True:
            try:
                ready, _, _ = select.select([ctl.fileno(), wake_r], [], [])
            except InterruptedError:
                continue
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
                reap()
            if ctl.fileno() in ready:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 20, 4)
                except OSError:
                    break
                if not data:
                    break
                received[:] = fds
                try:
                    table.dispatch(decode(data))
                except IpcError as exc:
                    ipc_log.error("fork server: skipped a datagram: %s", exc)
                for fd in received:  # not a spawn: nobody took them
                    os.close(fd)
                received.clear()
    finally:
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in list(children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return 0


def main(argv: list[str]) -> int:
    ctl = socket.socket(fileno=int(argv[1]))
    try:
        return serve(ctl, int(argv[2]) if len(argv) > 2 else None)
    finally:
        ctl.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
