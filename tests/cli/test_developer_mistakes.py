"""The mistakes a developer makes in their own model, extension and swarm code, as `gdn run` shows
them: a clear `[CODE] message` with a suggestion that fits the mistake, the same with the inline and
the process executor. Real `gdn` subprocesses on real bundle files."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_testkit import gdn

from kit import (
    agent_doc,
    base_ref,
    export,
    extension_doc,
    package_doc,
    python_model_doc,
    swarm_doc,
    tool_doc,
    write_bundle,
)

EXECUTORS = ["inline", "process"]

ANSWERING_MODEL = 'def generate(request):\n    return {"text": "fine"}\n'


def _bundle(tmp_path: Path, model: str, extension: str | None = None) -> Path:
    """One agent with the python model ``model`` (model.py) and, given its source, Extension/x (x.py)."""
    files = {"model.py": model}
    extensions = []
    if extension is not None:
        files["x.py"] = extension
        extensions.append(extension_doc("x", "./x.py"))
    agent = agent_doc("a", extensions=["x"] if extension is not None else ())
    docs = [package_doc("mistakes"), python_model_doc(), *extensions, agent, swarm_doc(["a"])]
    return write_bundle(tmp_path / "b", *docs, files=files)


def _gdn_run(tmp_path: Path, bundle: Path, executor: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return gdn(tmp_path, "run", str(bundle), "--executor", executor, "--input", "go", *extra, timeout=120)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_model_that_keeps_answering_nothing_says_why_the_turn_gave_up(tmp_path: Path, executor: str) -> None:
    """A python model returning {} used to end the turn with the placeholder answer and no word
    anywhere, not even with -v, about the three empty responses behind it."""
    bundle = _bundle(tmp_path, "def generate(request):\n    return {}\n")
    run = _gdn_run(tmp_path, bundle, executor)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "I could not produce a usable response after several attempts."
    assert "the model gave an empty response 3 times in a row" in run.stderr
    verbose = _gdn_run(tmp_path, bundle, executor, "-v")
    assert "the model gave an empty response; asking it again (retry 1 of 2)" in verbose.stderr


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_model_that_keeps_making_malformed_calls_names_the_problem(tmp_path: Path, executor: str) -> None:
    bundle = _bundle(tmp_path, 'def generate(request):\n    return {"toolCalls": [{"args": {}}]}\n')
    run = _gdn_run(tmp_path, bundle, executor)
    assert run.returncode == 0, run.stderr
    assert "the model gave malformed tool calls (toolCalls[0] needs a string 'name') 3 times in a row" in run.stderr


@pytest.mark.parametrize(
    ("returned", "message", "suggestion"),
    [
        ("None", "returned NoneType; expected a dict", "Return a dict from generate(): {'text': 'the answer'}"),
        ('{"text": 42}', "returned 'text' of type int; it must be a string or None", "Convert the answer to a string"),
        (
            '{"toolCalls": {"name": "x"}}',
            "returned 'toolCalls' of type dict; it must be a list",
            "Return 'toolCalls' as a list of calls",
        ),
    ],
)
def test_a_python_models_bad_return_value_says_what_to_return(
    tmp_path: Path, returned: str, message: str, suggestion: str
) -> None:
    """A bad return value has no traceback: the suggestion was '`gdn run -v` prints its traceback',
    which printed nothing more."""
    run = _gdn_run(tmp_path, _bundle(tmp_path, f"def generate(request):\n    return {returned}\n"), "inline")
    assert run.returncode == 1
    assert "[E_MODEL_BAD_RESPONSE] python model model.py " + message in run.stderr
    assert f"suggestion: {suggestion}" in run.stderr
    assert "Traceback" not in run.stderr


NEXT_TWICE = """\
def register(api):
    async def twice(ctx):
        await ctx.next()
        return await ctx.next()

    api.pipeline.register("turn", twice)
"""

NEXT_NOT_AWAITED = """\
def register(api):
    async def forgot(ctx):
        return ctx.next()

    api.pipeline.register("turn", forgot)
"""

MISSPELT_TYPE = """\
def register(api):
    async def mw(ctx):
        return await ctx.next()

    api.pipeline.register("tool_call", mw)
"""


SPOOFING_EXTENSION = """\
def register(api):
    async def turn(ctx):
        api.events.emit("turn.completed", {"agentName": "nobody"})
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


V09_MIDDLEWARE = """\
def register(api):
    async def audit(ctx, next):
        return await next()

    api.pipeline.register("turn", audit)
"""


# (extension source, exit status, what stderr says); each used to be less clear or to fail otherwise:
EXTENSION_MISTAKES = [
    pytest.param(
        NEXT_TWICE,
        1,
        [
            "[E_PIPELINE_NEXT_TWICE] turn middleware register.<locals>.twice of extension 'x' called ctx.next() "
            "twice in one invocation"  # named no middleware
        ],
        id="next-twice",
    ),
    pytest.param(
        NEXT_NOT_AWAITED,
        1,
        [  # and inline only, Python's 'coroutine ... was never awaited' RuntimeWarning
            "returned a coroutine, expected TurnResult: an `await` is missing",
            "suggestion: Write `return await ctx.next()`",
        ],
        id="next-not-awaited",
    ),
    pytest.param(
        MISSPELT_TYPE,
        3,
        ["[E_EXT_COMPAT] extension 'x': unknown middleware type 'tool_call'", "suggestion: did you mean 'toolCall'?"],
        id="misspelt-middleware-type",
    ),
    pytest.param(
        V09_MIDDLEWARE,
        3,
        [  # failed every turn as E_TURN_FAILED TypeError (exit 1)
            "[E_EXT_INIT] extension 'x': turn middleware audit(ctx, next) (x.py:2) cannot be called as "
            "audit(ctx): missing a required argument: 'next'",
            "the v0.9 `next` argument is `ctx.next` in goondan.ai/v1",
        ],
        id="v09-middleware-signature",
    ),
    pytest.param(
        SPOOFING_EXTENSION,
        1,
        [  # reached every turn.completed handler with the made-up payload
            "[E_EVENT_NAME_INVALID] extension 'x' emitted 'turn.completed', which is a runtime event: only the "
            "runtime emits it",
            "suggestion: Emit an event of your own, named after the extension (e.g. 'x.done')",
        ],
        id="emits-a-runtime-event",
    ),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(("extension", "status", "said"), EXTENSION_MISTAKES)
def test_an_extension_mistake_is_named_with_a_fitting_suggestion(
    tmp_path: Path, executor: str, extension: str, status: int, said: list[str]
) -> None:
    run = _gdn_run(tmp_path, _bundle(tmp_path, ANSWERING_MODEL, extension), executor)
    assert run.returncode == status
    for text in said:
        assert text in run.stderr
    assert "never awaited" not in run.stderr
    assert "Traceback" not in run.stderr


GENERATOR_TOOL = """\
def listing(ctx, args):
    for name in ("a", "b"):
        yield name


async def streaming(ctx, args):
    yield "chunk"


handlers = {"listing": listing, "streaming": streaming}
"""

GENERATOR_EXTENSION_TOOL = """\
def register(api):
    async def items(ctx, args):
        yield 1

    api.tools.register({"name": "x__items", "description": "d", "parameters": {"type": "object"}}, items)
"""


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("export_name", ["listing", "streaming"])
def test_a_generator_tool_handler_is_refused_at_load(tmp_path: Path, executor: str, export_name: str) -> None:
    """A handler that yields returned a generator, which the model got as '<generator object ...>'
    and gdn run answered around with exit 0."""
    tool = tool_doc("t", "./t.py", [export(export_name)])
    docs = [package_doc("mistakes"), python_model_doc(), tool, agent_doc("a", tools=["t"]), swarm_doc(["a"])]
    bundle = write_bundle(tmp_path / "b", *docs, files={"model.py": ANSWERING_MODEL, "t.py": GENERATOR_TOOL})
    run = _gdn_run(tmp_path, bundle, executor)
    assert run.returncode == 3, run.stdout
    line = 1 if export_name == "listing" else 6
    assert (
        f"[E_TOOL_LOAD] Tool/t: export '{export_name}': handler {export_name} (t.py:{line}) is a generator "
        "function (it uses `yield`)" in run.stderr
    )
    assert "suggestion: Return the result instead of yielding it" in run.stderr


def test_a_generator_extension_tool_is_refused_at_register(tmp_path: Path) -> None:
    run = _gdn_run(tmp_path, _bundle(tmp_path, ANSWERING_MODEL, GENERATOR_EXTENSION_TOOL), "inline")
    assert run.returncode == 3
    assert "tool 'x__items': handler items (x.py:2) is a generator function" in run.stderr


DELEGATING_MODEL = """\
import json
import shutil


def generate(request):
    last = [m for m in request.messages if m["role"] != "system"][-1]
    if request.agent_name == "worker":
        raise RuntimeError("worker exploded")
    if last["role"] == "tool":
        return {"text": json.dumps(last["content"][0]["output"])}
    return {"toolCalls": [{"name": "agents__request", "args": {"target": "worker", "input": "go"}}]}
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_failed_sub_agent_names_its_error_code_and_where_its_traceback_is(tmp_path: Path, executor: str) -> None:
    """The caller's model got only the callee's message, without its code or any suggestion, and the
    callee's traceback is in the callee's log, not the caller's."""
    agents = [agent_doc("boss", tools=[base_ref("Tool", "agents")]), agent_doc("worker")]
    docs = [package_doc("mistakes"), python_model_doc(), *agents, swarm_doc(["boss", "worker"])]
    bundle = write_bundle(tmp_path / "b", *docs, files={"model.py": DELEGATING_MODEL})
    run = _gdn_run(tmp_path, bundle, executor)
    assert run.returncode == 0, run.stderr
    output = json.loads(run.stdout)
    assert output["type"] == "error-json"
    assert output["value"] == {
        "code": "AGENT_REQUEST_FAILED",
        "message": "agent 'worker' failed to handle the request: [E_MODEL_CALL] python model generate() raised "
        "RuntimeError: worker exploded",
        "suggestion": "`gdn logs --agent worker -v` shows what failed (its turn.failed event, with the traceback).",
    }
    logs = gdn(tmp_path, "logs", str(bundle), "--agent", "worker", "-v")
    assert 'raise RuntimeError("worker exploded")' in logs.stdout


def test_the_coordinator_recipe_reports_a_worker_that_failed(tmp_path: Path) -> None:
    """docs/cookbook/coordinator copied as a developer would, with a reviewer whose model raises: the
    recipe's model read value['target'] of the error result and failed the whole turn with KeyError."""
    recipe = Path(__file__).resolve().parents[2] / "docs" / "cookbook" / "coordinator"
    bundle = tmp_path / "crew"
    shutil.copytree(recipe, bundle)
    text = (bundle / "goondan.yaml").read_text()
    reviewer = "  name: reviewer\nspec:\n  modelConfig:\n    modelRef: Model/worker-brain\n"
    assert reviewer in text
    text = text.replace(reviewer, reviewer.replace("worker-brain", "broken"))
    broken = python_model_doc("broken", "./broken.py")
    write_bundle(bundle, text, broken, files={"broken.py": "def generate(request):\n    raise RuntimeError('out')\n"})
    run = _gdn_run(tmp_path, bundle, "inline")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("writer noted: writer, please handle: go; ")
    assert "reviewer failed: [AGENT_REQUEST_FAILED] agent 'reviewer' failed to handle the request: [E_MODEL_CALL]" in (
        run.stdout
    )


def test_gdn_validate_reports_a_misspelt_summary_model_provider(tmp_path: Path) -> None:
    """gdn validate said 'Bundle is valid.' and the run then failed with E_EXT_CONFIG."""
    compaction = {
        "ref": base_ref("Extension", "message-compaction"),
        "config": {"summaryModel": {"provider": "pyhton"}},
    }
    agent = agent_doc("a", extensions=[compaction])
    bundle = write_bundle(tmp_path / "b", package_doc("mistakes"), python_model_doc(), agent, swarm_doc(["a"]))
    (bundle / "model.py").write_text(ANSWERING_MODEL)
    run = gdn(tmp_path, "validate", str(bundle))
    assert run.returncode == 4, run.stdout
    assert "config.summaryModel.provider" in run.stdout + run.stderr
    assert "python" in run.stdout + run.stderr


EVENT_HANDLERS = """\
import sys


def register(api):
    def counts(event):
        raise KeyError("turns")

    async def leaves(event):
        sys.exit(7)

    api.events.on("turn.completed", counts)
    api.events.on("turn.completed", leaves)
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_an_event_handler_that_raises_or_exits_never_ends_the_run(tmp_path: Path, executor: str) -> None:
    """sys.exit(7) in an async turn.completed handler ended gdn run inline with status 7 and no
    answer printed, and the agent process mid-turn with the process executor (E_AGENT_PROCESS_EXITED);
    a handler that raised printed a full traceback, starting in the event bus, without -v."""
    bundle = _bundle(tmp_path, ANSWERING_MODEL, EVENT_HANDLERS)
    run = _gdn_run(tmp_path, bundle, executor)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "fine"
    assert (
        "event handler register.<locals>.counts for 'turn.completed' of extension x raised KeyError: 'turns'"
        in run.stderr
    )
    assert "event handler register.<locals>.leaves for 'turn.completed' of extension x called sys.exit(7)" in run.stderr
    assert "Traceback" not in run.stderr
    assert "(`gdn run -v` prints its traceback)" in run.stderr
    verbose = _gdn_run(tmp_path, bundle, executor, "-v")
    assert 'Traceback (most recent call last):\n  File "' + str(bundle / "x.py") in verbose.stderr
    assert "`gdn run -v` prints" not in verbose.stderr  # it was given: the traceback is right there


STRAY_CANCEL_TOOL = """\
import asyncio


async def stop(ctx, args):
    raise asyncio.CancelledError()


handlers = {"stop": stop}
"""

STRAY_CANCEL_EXTENSION = """\
import asyncio


def register(api):
    async def turn(ctx):
        if ctx.conversation_state.next_messages[-1].text == "middleware":
            raise asyncio.CancelledError()
        return await ctx.next()

    async def leaves(event):
        raise asyncio.CancelledError()

    api.pipeline.register("turn", turn)
    api.events.on("turn.completed", leaves)
"""

STRAY_CANCEL_MODEL = """\
import asyncio


async def generate(request):
    last = [m for m in request.messages if m["role"] != "system"][-1]
    if last["role"] == "tool":
        return {"text": last["content"][0]["output"]["value"]["code"]}
    if last["content"] == "model":
        raise asyncio.CancelledError()
    if last["content"] == "tool":
        return {"toolCalls": [{"name": "t__stop", "args": {}}]}
    return {"text": "fine"}
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_cancelled_error_raised_by_user_code_fails_only_that_code(tmp_path: Path, executor: str) -> None:
    """asyncio.CancelledError raised by a tool, a middleware, an event handler or a python model
    while nothing cancelled the turn was taken for a cancellation: gdn run died with the runtime's
    traceback inline and hung in an agent process (the turn never answered)."""
    tool = tool_doc("t", "./t.py", [export("stop")])
    agent = agent_doc("a", tools=["t"], extensions=["x"])
    docs = [package_doc("mistakes"), python_model_doc(), tool, extension_doc("x", "./x.py"), agent, swarm_doc(["a"])]
    files = {"model.py": STRAY_CANCEL_MODEL, "t.py": STRAY_CANCEL_TOOL, "x.py": STRAY_CANCEL_EXTENSION}
    bundle = write_bundle(tmp_path / "b", *docs, files=files)

    def run(text: str) -> subprocess.CompletedProcess[str]:
        return gdn(tmp_path, "run", str(bundle), "--executor", executor, "--input", text, timeout=60)

    tool_run = run("tool")  # the model quotes the error code of the tool's result
    assert (tool_run.returncode, tool_run.stdout.strip()) == (0, "E_USER_CODE_CANCELLED"), tool_run.stderr
    assert "raised asyncio.CancelledError, but nothing cancelled it" in tool_run.stderr  # the event handler's
    middleware = run("middleware")
    assert middleware.returncode == 1
    assert (
        "[E_USER_CODE_CANCELLED] turn middleware register.<locals>.turn of extension 'x' raised "
        "asyncio.CancelledError, but nothing cancelled it" in middleware.stderr
    )
    model = run("model")
    assert model.returncode == 1
    assert "[E_MODEL_CALL] python model generate() raised asyncio.CancelledError" in model.stderr
    for result in (tool_run, middleware, model):
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_generate_that_cannot_take_the_request_is_refused_at_load(tmp_path: Path, executor: str) -> None:
    """def generate(request, history) failed every turn as E_MODEL_CALL TypeError (exit 1), though
    nothing of it ran: it is a load error (exit 3), named like a tool handler that cannot be called."""
    bundle = _bundle(tmp_path, "def generate(request, history):\n    return {'text': 'x'}\n")
    run = _gdn_run(tmp_path, bundle, executor)
    assert run.returncode == 3
    assert (
        "[E_MODEL_LOAD] python model model.py: generate(request, history) (model.py:1) cannot be called as "
        "generate(request): missing a required argument: 'history'" in run.stderr
    )


MISSPELLING_MODEL = """\
import json


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"toolCalls": [{"name": "t__ad", "args": {}}], "text": json.dumps(last["content"][0]["output"])}
    return {"toolCalls": [{"name": "t__ad", "args": {}}]}
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_model_stuck_on_a_misspelt_tool_is_told_the_near_name_and_the_log_says_why_the_turn_stopped(
    tmp_path: Path, executor: str
) -> None:
    """The model was told only 'Call only tools listed in this step's tool catalog.', and the turn
    stopped at maxStepsPerTurn with nothing in the log, even with -v."""
    tool = tool_doc("t", "./t.py", [export("add")])
    docs = [
        package_doc("mistakes"),
        python_model_doc(),
        tool,
        agent_doc("a", tools=["t"]),
        swarm_doc(["a"], max_steps=3),
    ]
    files = {"model.py": MISSPELLING_MODEL, "t.py": "def add(ctx, args):\n    return 1\n\n\nhandlers = {'add': add}\n"}
    run = _gdn_run(tmp_path, write_bundle(tmp_path / "b", *docs, files=files), executor)
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)  # the last text: the error result the model got
    assert (
        answer["value"]["suggestion"]
        == "did you mean 't__add'? Call only tools listed in this step's tool catalog: t__add"
    )
    assert (
        "the turn stopped at maxStepsPerTurn (3) with the model still calling tools; the last step's errors: "
        "t__ad: E_TOOL_NOT_IN_CATALOG" in run.stderr
    )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_sub_agent_that_cannot_start_is_reported_alike_by_both_executors(tmp_path: Path, executor: str) -> None:
    """The process executor said 'could not take the request: [E_TOOL_LOAD] ...' with no suggestion,
    the inline one 'could not take the request [E_TOOL_LOAD]: ...' with 'see the runtime log'."""
    broken = tool_doc("broken", "./broken.py", [export("x")])
    agents = [agent_doc("boss", tools=[base_ref("Tool", "agents")]), agent_doc("worker", tools=["broken"])]
    docs = [package_doc("mistakes"), python_model_doc(), broken, *agents, swarm_doc(["boss", "worker"])]
    files = {"model.py": DELEGATING_MODEL, "broken.py": "import not_installed_zz\n\nhandlers = {}\n"}
    run = _gdn_run(tmp_path, write_bundle(tmp_path / "b", *docs, files=files), executor)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["value"] == {
        "code": "IPC_DELIVERY_FAILED",
        "message": "agent 'worker' could not take the request [E_TOOL_LOAD]: Tool/broken: importing broken.py "
        "failed at broken.py:1: ModuleNotFoundError: No module named 'not_installed_zz'",
        "suggestion": "Check that agent 'worker' starts: its tools, extensions and model load (`gdn logs --agent "
        "worker -v` shows a tool.loadFailed or extension.failed event with the traceback).",
    }
