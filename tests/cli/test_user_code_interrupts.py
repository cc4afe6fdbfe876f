"""KeyboardInterrupt and SystemExit raised by user code (a tool, sync or async, alone or beside
another call; a middleware; an event handler; a python model) fail only that code's work, the same
with the inline and the process executor: the model sees the tool's error, a turn fails with the
error named. A KeyboardInterrupt from a tool ended the agent process (the turn answered
E_AGENT_PROCESS_EXITED) and, inline, all of ``gdn run`` with exit 130 as if Ctrl+C had been
pressed. A real Ctrl+C still stops the run: tests/cli/test_run_interrupt.py. Real ``gdn``
subprocesses on real bundle files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_testkit import gdn

from kit import agent_doc, export, extension_doc, package_doc, python_model_doc, swarm_doc, tool_doc, write_bundle

EXECUTORS = ["inline", "process"]

TOOL = """\
import sys


def stop(ctx, args):
    RAISE


async def astop(ctx, args):
    RAISE


def fine(ctx, args):
    return "fine"


handlers = {"stop": stop, "astop": astop, "fine": fine}
"""

EXTENSION = """\
import sys


def register(api):
    async def turn(ctx):
        if ctx.conversation_state.next_messages[-1].text == "middleware":
            RAISE
        return await ctx.next()

    def leaves(event):
        RAISE

    async def leaves_later(event):
        RAISE

    api.pipeline.register("turn", turn)
    api.events.on("turn.completed", leaves)
    api.events.on("turn.completed", leaves_later)
"""

MODEL = """\
import sys


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        codes = []
        for message in reversed(request.messages):
            if message["role"] != "tool":
                break
            for part in message["content"]:
                value = part["output"]["value"]
                codes.insert(0, value["code"] if isinstance(value, dict) else value)
        return {"text": " ".join(codes)}
    said = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    if said == "model":
        RAISE
    calls = {
        "tool": [("t__stop", "c1")],
        "async tool": [("t__astop", "c1")],
        "two tools": [("t__stop", "c1"), ("t__fine", "c2")],  # run side by side: the sync one in a thread
    }.get(said)
    if calls:
        return {"toolCalls": [{"id": i, "name": n, "args": {}} for n, i in calls]}
    return {"text": "fine"}
"""

# how the user code leaves, the code its tool error carries, what the messages say it did
LEAVING = {
    "interrupt": (
        "raise KeyboardInterrupt",
        "E_USER_CODE_INTERRUPT",
        "raised KeyboardInterrupt, but nothing interrupted",
    ),
    "exit": ("sys.exit(5)", "E_USER_CODE_EXIT", "called sys.exit(5)"),
}


def _bundle(tmp_path: Path, statement: str) -> Path:
    tool = tool_doc("t", "./t.py", [export("stop"), export("astop"), export("fine")])
    agent = agent_doc("a", tools=["t"], extensions=["x"])
    docs = [package_doc("leaving"), python_model_doc(), tool, extension_doc("x", "./x.py"), agent, swarm_doc(["a"])]
    files = {name: source.replace("RAISE", statement) for name, source in (("model.py", MODEL), ("t.py", TOOL))}
    files["x.py"] = EXTENSION.replace("RAISE", statement)
    return write_bundle(tmp_path / "b", *docs, files=files)


@pytest.mark.parametrize("leaving", sorted(LEAVING))
@pytest.mark.parametrize("executor", EXECUTORS)
def test_keyboard_interrupt_or_exit_in_user_code_fails_only_that_code(
    tmp_path: Path, executor: str, leaving: str
) -> None:
    statement, code, did = LEAVING[leaving]
    bundle = _bundle(tmp_path, statement)

    def run(text: str) -> subprocess.CompletedProcess[str]:
        return gdn(tmp_path, "run", str(bundle), "--executor", executor, "--input", text, timeout=90)

    for text, answer in (("tool", code), ("async tool", code), ("two tools", f"{code} fine")):
        tool_run = run(text)  # the model quotes the error code of each tool result
        assert (tool_run.returncode, tool_run.stdout.strip()) == (0, answer), tool_run.stderr
        # both turn.completed handlers failed, were reported, and the run went on
        assert f"event handler register.<locals>.leaves for 'turn.completed' of extension x {did}" in tool_run.stderr
        assert f"handler register.<locals>.leaves_later for 'turn.completed' of extension x {did}" in tool_run.stderr
    middleware = run("middleware")
    assert middleware.returncode == 1, middleware.stderr
    assert f"turn middleware register.<locals>.turn of extension 'x' {did}" in middleware.stderr
    model = run("model")
    assert model.returncode == 1, model.stderr
    assert "[E_MODEL_CALL] python model generate() " in model.stderr
    for result in (tool_run, middleware, model):
        assert "Traceback" not in result.stderr
        assert "interrupted" not in result.stderr.replace("nothing interrupted", "")
        assert "E_AGENT_PROCESS_EXITED" not in result.stderr
    if leaving == "interrupt":
        assert "[E_USER_CODE_INTERRUPT]" in middleware.stderr
        assert "raised KeyboardInterrupt, but nothing interrupted the process" in model.stderr
    verbose = gdn(tmp_path, "run", str(bundle), "--executor", executor, "--input", "middleware", "-v", timeout=90)
    assert "Traceback (most recent call last):" in verbose.stderr
    assert f'File "{bundle / "x.py"}", line 7, in turn' in verbose.stderr


@pytest.mark.parametrize("executor", EXECUTORS)
def test_keyboard_interrupt_in_register_is_a_load_error_of_that_extension(tmp_path: Path, executor: str) -> None:
    """It ended gdn run with exit 130 inline and failed the agent process's start without a word
    of why (E_AGENT_START) with the process executor."""
    agent = agent_doc("a", extensions=["x"])
    docs = [package_doc("leaving"), python_model_doc(), extension_doc("x", "./x.py"), agent, swarm_doc(["a"])]
    files = {"model.py": "def generate(request):\n    return {'text': 'fine'}\n"}
    files["x.py"] = "def register(api):\n    raise KeyboardInterrupt\n"
    bundle = write_bundle(tmp_path / "b", *docs, files=files)
    run = gdn(tmp_path, "run", str(bundle), "--executor", executor, "--input", "hi", timeout=90)
    assert run.returncode == 3, run.stderr
    assert (
        "[E_EXT_INIT] failed to initialize extension x: [E_USER_CODE_INTERRUPT] register() of extension x raised "
        "KeyboardInterrupt, but nothing interrupted the process" in run.stderr
    )
