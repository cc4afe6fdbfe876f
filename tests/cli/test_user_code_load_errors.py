"""An error raised by the user's own tool or extension code says where it came from.

* A Tool module that fails to import names the line of the user's file, and its traceback is shown
  by ``gdn run -v`` and kept in a ``tool.loadFailed`` runtime event (``gdn logs -v``), as an
  extension's import already was.
* A tool handler the runtime cannot call as ``handler(ctx, args)`` is refused when the tool loads
  (E_TOOL_LOAD, exit 3), not failed call by call as E_TOOL_ERROR with exit 0; every signature the
  call accepts still runs.
* A middleware that raises fails its turn with a message that names it, its layer and its
  extension; its traceback stays on -v and in the turn.failed event.

Each case runs a real ``gdn run`` subprocess."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import gdn

from goondan.types import ExtensionFailedEvent, RuntimeEventType, ToolLoadFailedEvent
from kit import write_bundle

CALC = "def add(ctx, args):\n    return args['a'] + args['b']\n\nhandlers = {'add': add}\n"
AUDIT = "def register(api, config):\n    pass\n"


def assert_record_of(typed: Any, record: dict[str, Any]) -> None:
    """The record is what the public type says (goondan.types: readers of runtime-events.jsonl
    type their parsing with it, and the events reference page is generated from it)."""
    required, optional = typed.__required_keys__, typed.__optional_keys__
    assert required <= set(record) <= required | optional, (sorted(record), sorted(required | optional))
    assert record["type"] in typing.get_args(RuntimeEventType)


def _doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "goondan.ai/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def bundle(tmp_path: Path, exports: list[str] | None = None, **files: str) -> Path:
    """Agent ``a`` with Tool/calc (``exports``, each called once in the first step by a scripted
    model that answers ``done`` after the results) and Extension/audit."""
    exports = exports or ["add"]
    calls = [{"name": f"calc__{e}", "args": {"a": 1, "b": 2}} for e in exports]
    rules = [{"when": {"role": "tool"}, "reply": {"text": "done"}}, {"reply": {"toolCalls": calls}}]
    listing = [{"name": e, "description": e, "parameters": {"type": "object"}} for e in exports]
    docs = [
        _doc("Model", "m", {"provider": "scripted", "model": "x", "options": {"rules": rules}}),
        _doc("Tool", "calc", {"entry": "./calc.py", "exports": listing}),
        _doc("Extension", "audit", {"entry": "./audit.py"}),
        _doc(
            "Agent",
            "a",
            {"modelConfig": {"modelRef": "Model/m"}, "tools": ["Tool/calc"], "extensions": ["Extension/audit"]},
        ),
        _doc("Swarm", "s", {"entryAgent": "Agent/a", "agents": ["Agent/a"]}),
    ]
    return write_bundle(tmp_path / "b", *docs, files={"calc.py": CALC, "audit.py": AUDIT, **files})


def runtime_events(tmp_path: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in sorted((tmp_path / "home").rglob("runtime-events.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


# --- a Tool module that fails to import ---------------------------------------------------------

TOOL_IMPORT_FAILURES = [
    pytest.param("import json\nimport goondan_no_such_module\n" + CALC, 2, "ModuleNotFoundError", id="missing-package"),
    pytest.param(
        "def setup():\n    raise RuntimeError('no config file')\n\n\nsetup()\n" + CALC,
        2,
        "RuntimeError: no config file",
        id="top-level-exception",
    ),
]


@pytest.mark.parametrize("executor", ["process", "inline"])
@pytest.mark.parametrize(("source", "line", "error"), TOOL_IMPORT_FAILURES)
def test_tool_import_failure_names_its_line_and_shows_its_traceback_with_v(
    tmp_path: Path, executor: str, source: str, line: int, error: str
) -> None:
    path = bundle(tmp_path, **{"calc.py": source})
    proc = gdn(tmp_path, "run", str(path), "--input", "go", "-v", "--executor", executor)
    assert proc.returncode == 3, proc.stderr
    assert f"[E_TOOL_LOAD] Tool/calc: importing calc.py failed at calc.py:{line}: {error}" in proc.stderr, proc.stderr
    assert f'calc.py", line {line}, in ' in proc.stderr, proc.stderr  # the user's traceback, at -v
    assert "importlib" not in proc.stderr, proc.stderr  # starting at the user's frame, not the loader's


def test_syntax_error_in_a_module_the_tool_imports_names_that_file_and_line(tmp_path: Path) -> None:
    """``gdn validate`` compiles the entry file only; a helper module it imports fails at import."""
    files = {"calc.py": "import helper\n" + CALC, "helper.py": "x = 1\ndef f(:\n    pass\n"}
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, **files)), "--input", "go", "--executor", "inline")
    assert proc.returncode == 3, proc.stderr
    assert (
        "[E_TOOL_LOAD] Tool/calc: importing calc.py failed at helper.py:2: SyntaxError: invalid syntax" in proc.stderr
    )


def test_tool_import_failure_traceback_is_kept_for_gdn_logs_v(tmp_path: Path) -> None:
    path = bundle(tmp_path, **{"calc.py": "import json\nimport goondan_no_such_module\n" + CALC})
    proc = gdn(tmp_path, "run", str(path), "--input", "go")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    [failed] = [r for r in runtime_events(tmp_path) if r["type"] == "tool.loadFailed"]
    assert failed["toolName"] == "calc"
    assert_record_of(ToolLoadFailedEvent, failed)
    assert failed["error"] == {"code": "E_TOOL_LOAD", "traceback": failed["error"]["traceback"]}  # type: ignore[index]
    logs = gdn(tmp_path, "logs", str(path), "-v")
    assert logs.returncode == 0, logs.stderr
    assert "tool.loadFailed" in logs.stdout and 'calc.py", line 2, in <module>' in logs.stdout, logs.stdout


def test_extension_import_failure_names_its_line_and_is_kept_for_gdn_logs_v(tmp_path: Path) -> None:
    path = bundle(tmp_path, **{"audit.py": "import json\nimport goondan_no_such_module\n" + AUDIT})
    proc = gdn(tmp_path, "run", str(path), "--input", "go")
    assert proc.returncode == 3, proc.stderr
    assert "[E_EXT_LOAD] extension audit: importing audit.py failed at audit.py:2: ModuleNotFoundError" in proc.stderr
    [failed] = [r for r in runtime_events(tmp_path) if r["type"] == "extension.failed"]
    assert failed["extensionName"] == "audit"
    assert_record_of(ExtensionFailedEvent, failed)
    assert 'audit.py", line 2, in <module>' in failed["error"]["traceback"]  # type: ignore[index]


# --- handler signatures -----------------------------------------------------------------------


@pytest.mark.parametrize("executor", ["process", "inline"])
def test_tool_handler_that_cannot_take_ctx_and_args_is_refused_at_load(tmp_path: Path, executor: str) -> None:
    source = "import json\n\n\ndef add(args):\n    return 1\n\n\nhandlers = {'add': add}\n"
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, **{"calc.py": source})), "--input", "go", "--executor", executor)
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert (
        "[E_TOOL_LOAD] Tool/calc: export 'add': handler add(args) (calc.py:4) cannot be called as add(ctx, args)"
        in proc.stderr
    ), proc.stderr
    assert "def add(ctx, args)" in proc.stderr and proc.stdout == "", proc.stderr


REFUSED = [
    pytest.param("def f(ctx, args, extra):\n    return 1\n", "f(ctx, args, extra)", id="third-required"),
    pytest.param("def f(ctx, args, *, mode):\n    return 1\n", "f(ctx, args, *, mode)", id="required-keyword-only"),
    pytest.param("async def f():\n    return 1\n", "f()", id="async-no-parameters"),
]


@pytest.mark.parametrize(("source", "shown"), REFUSED)
def test_tool_handler_signature_refusals_show_the_signature(tmp_path: Path, source: str, shown: str) -> None:
    files = {"calc.py": source + "\nhandlers = {'add': f}\n"}
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, **files)), "--input", "go", "--executor", "inline")
    assert proc.returncode == 3, proc.stderr
    assert f"handler {shown} (calc.py:1) cannot be called as f(ctx, args)" in proc.stderr, proc.stderr


ACCEPTED = """\
import functools


async def async_fn(ctx, args):
    return 'async_fn'


def other_names(context, payload):
    return 'other_names'


def star_args(*parts):
    return 'star_args'


def defaults_and_kwargs(ctx, args=None, extra=1, *, flag=False, **more):
    return 'defaults_and_kwargs'


def partial_base(prefix, ctx, args):
    return prefix


class Callable:
    def __call__(self, ctx, args):
        return 'callable_object'


class Service:
    def handle(self, ctx, args):
        return 'bound_method'

    @staticmethod
    def static(ctx, args):
        return 'static_method'


handlers = {
    'async_fn': async_fn,
    'other_names': other_names,
    'star_args': star_args,
    'defaults_and_kwargs': defaults_and_kwargs,
    'partial': functools.partial(partial_base, 'partial'),
    'callable_object': Callable(),
    'bound_method': Service().handle,
    'static_method': Service.static,
    'lambda': lambda ctx, args: 'lambda',
}
"""


def test_every_handler_signature_the_call_accepts_still_runs(tmp_path: Path) -> None:
    exports = [
        "async_fn",
        "other_names",
        "star_args",
        "defaults_and_kwargs",
        "partial",
        "callable_object",
        "bound_method",
        "static_method",
        "lambda",
    ]
    path = bundle(tmp_path, exports, **{"calc.py": ACCEPTED})
    proc = gdn(tmp_path, "run", str(path), "--input", "go", "--executor", "inline")
    assert (proc.returncode, proc.stdout) == (0, "done\n"), proc.stderr
    done = {r["toolName"]: r["status"] for r in runtime_events(tmp_path) if r["type"] == "tool.completed"}
    assert done == {f"calc__{e}": "ok" for e in exports}, done


# --- a raising middleware -------------------------------------------------------------------------

RAISING_MIDDLEWARE = """\
def register(api, config):
    async def outer(ctx):
        return await ctx.next()

    async def guard(ctx):
        check(ctx)
        return await ctx.next()

    def check(ctx):
        raise ValueError('quota exceeded')

    api.pipeline.register('turn', outer)
    api.pipeline.register('LAYER', guard)
"""


@pytest.mark.parametrize("layer", ["turn", "step"])
def test_raising_middleware_failure_names_the_middleware_its_layer_and_extension(tmp_path: Path, layer: str) -> None:
    path = bundle(tmp_path, **{"audit.py": RAISING_MIDDLEWARE.replace("LAYER", layer)})
    proc = gdn(tmp_path, "run", str(path), "--input", "go", "-v", "--executor", "inline")
    assert proc.returncode == 1, proc.stderr
    named = f"{layer} middleware register.<locals>.guard of extension 'audit' raised ValueError: quota exceeded"
    assert f"[E_TURN_FAILED] {named}" in proc.stderr, proc.stderr
    assert 'audit.py", line 10, in check' in proc.stderr, proc.stderr  # the user's traceback, at -v
    [failed] = [r for r in runtime_events(tmp_path) if r["type"] == "turn.failed"]
    assert failed["errorMessage"] == named and failed["extensionName"] == "audit", failed
    assert "in check" in failed["error"]["traceback"], failed  # type: ignore[index]


def test_raising_tool_call_middleware_is_named_in_the_tool_failed_event(tmp_path: Path) -> None:
    path = bundle(tmp_path, **{"audit.py": RAISING_MIDDLEWARE.replace("LAYER", "toolCall")})
    proc = gdn(tmp_path, "run", str(path), "--input", "go", "--executor", "inline")
    assert (proc.returncode, proc.stdout) == (0, "done\n"), proc.stderr  # the model gets the error; the turn goes on
    [failed] = [r for r in runtime_events(tmp_path) if r["type"] == "tool.failed"]
    named = "toolCall middleware register.<locals>.guard of extension 'audit' raised ValueError: quota exceeded"
    assert failed["errorMessage"] == named and failed["extensionName"] == "audit", failed


def test_extension_tool_handler_that_cannot_take_ctx_and_args_is_refused_by_register(tmp_path: Path) -> None:
    source = (
        "def status(args):\n    return 'up'\n\n\n"
        "def register(api, config):\n"
        "    api.tools.register({'name': 'audit__status', 'description': 'status'}, status)\n"
    )
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, **{"audit.py": source})), "--input", "go", "--executor", "inline")
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert "[E_TOOL_DEFINITION_INVALID] tool 'audit__status': handler status(args) (audit.py:1)" in proc.stderr, (
        proc.stderr
    )


def test_goondan_error_raised_by_a_middleware_keeps_its_message_and_names_the_extension(tmp_path: Path) -> None:
    source = RAISING_MIDDLEWARE.replace("LAYER", "step").replace(
        "raise ValueError('quota exceeded')",
        "from goondan import GoondanError\n        raise GoondanError('E_QUOTA', 'quota exceeded', suggestion='wait')",
    )
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, **{"audit.py": source})), "--input", "go", "--executor", "inline")
    assert proc.returncode == 1, proc.stderr
    assert "[E_QUOTA] quota exceeded" in proc.stderr, proc.stderr
    [failed] = [r for r in runtime_events(tmp_path) if r["type"] == "turn.failed"]
    assert failed["extensionName"] == "audit" and failed["error"]["code"] == "E_QUOTA", failed  # type: ignore[index]
