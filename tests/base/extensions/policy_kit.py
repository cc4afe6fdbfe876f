"""Helpers for the @goondan/base policy-extension tests.

Two levels:

- :func:`run_turn_middleware` / :func:`run_step_middleware` load an extension module of
  ``@goondan/base`` through the real loader (``register_extension``, so ``CONFIG_SCHEMA`` is
  enforced), register it on a real :class:`PipelineRegistry` and run the real chain over a real
  :class:`ConversationState` seeded with a given history; the state after the emitted events is
  what the next layer (and the model) would see.
- :func:`bundle` writes a real bundle that references the built-ins as
  ``{kind: Extension, name: ..., package: "@goondan/base"}`` and uses a ``python`` model forwarding
  to :data:`MODEL`, which records what each model call received in :data:`REQUESTS`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import goondan
import kit
from goondan.conversation import ConversationState
from goondan.engine._info import AgentInfo, InboundInfo, PromptInfo, RuntimeInfo, SwarmInfo
from goondan.extensions import EventBus, ExtensionApi, ExtensionState, load_module, register_extension
from goondan.messages import Message, assistant_message, system_message, tool_message, user_message
from goondan.pipeline import PipelineRegistry, StepState, Turn, TurnState
from goondan.results import StepResult, TurnResult
from goondan.tools import ToolRegistry

API = "goondan.ai/v1"
BASE = Path(__import__("goondan").__file__).parent / "base"
BASE_EXT = BASE / "extensions"

MODEL: Callable[[Any], Any] | None = None
REQUESTS: list[list[dict[str, Any]]] = []
PROBE: dict[str, Any] = {}

FORWARDING_MODEL = """\
import json
import policy_kit


def generate(request):
    policy_kit.REQUESTS.append(json.loads(json.dumps(list(request.messages))))
    return policy_kit.MODEL(request)
"""


def reset() -> None:
    global MODEL
    MODEL = None
    REQUESTS.clear()
    PROBE.clear()


# --- messages -----------------------------------------------------------------------------------


def user(text: str, mid: str, **meta: Any) -> Message:
    return user_message(text, meta or None, id=mid)


def assistant(text: str, mid: str, **meta: Any) -> Message:
    return assistant_message(text, meta or None, id=mid)


def call(mid: str, *call_ids: str, text: str | None = None, **meta: Any) -> Message:
    calls = [{"id": c, "name": "t__echo", "args": {"value": c}} for c in call_ids]
    return assistant_message(text, meta or None, tool_calls=calls, id=mid)


def result(mid: str, call_id: str, value: str = "ok", **meta: Any) -> Message:
    return tool_message(call_id, "t__echo", {"type": "text", "value": value}, meta or None, id=mid)


def system(text: str, mid: str, **meta: Any) -> Message:
    return system_message(text, meta or None, id=mid)


# --- running one extension's middleware over a real conversation state ------------------------


class MemoryState:
    """An in-memory extension-state backend (the StateBackend protocol)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def load_extension_state(self, extension_name: str) -> Any | None:
        return self.values.get(extension_name)

    def save_extension_state(self, extension_name: str, value: Any) -> None:
        self.values[extension_name] = value


def runtime_info(
    *,
    prompt: str | None = None,
    bundle_root: str = ".",
    swarm: SwarmInfo | None = None,
    inbound: InboundInfo | None = None,
    call: Any = None,
) -> RuntimeInfo:
    return RuntimeInfo(
        agent=AgentInfo("agent", bundle_root, PromptInfo(prompt) if prompt is not None else None),
        swarm=swarm or SwarmInfo("swarm", "agent", "agent", ("agent",), ()),
        inbound=inbound or InboundInfo("evt-1", "request", "runtime", "api", "2026-01-01T00:00:00Z", None, None),
        call=call,
    )


class Harness:
    """One extension registered on a real registry, run over a seeded conversation."""

    def __init__(self, name: str, entry: Path, config: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.entry = entry
        self.config = dict(config or {})
        self.registry = PipelineRegistry()
        self.backend = MemoryState()
        self.state = ExtensionState(self.backend, name)
        self.api = ExtensionApi(name, pipeline=self.registry, tools=ToolRegistry(), state=self.state, bus=EventBus())

    async def register(self) -> None:
        await register_extension(self.name, load_module(self.name, self.entry), self.api, self.config)

    def turn_state(self, conversation: ConversationState, runtime: RuntimeInfo | None) -> TurnState:
        return TurnState(
            agent_name="agent",
            instance_key="key",
            turn_id="turn-1",
            trace_id="trace-1",
            input_event={"type": "request", "input": "hi"},
            conversation_state=conversation,
            emit_message_event=conversation.emit,
            agents=None,
            runtime=runtime or runtime_info(),
            turn=Turn("turn-1", "agent", {"type": "request"}),
        )

    async def turn(
        self, conversation: ConversationState, runtime: RuntimeInfo | None = None
    ) -> tuple[TurnResult, TurnState, list[Message]]:
        """Run the turn chain; the core records the messages it saw (what the model would get)."""
        seen: list[Message] = []

        async def core(state: TurnState) -> TurnResult:
            seen.extend(state.conversation_state.next_messages)
            return TurnResult(state.turn_id, None, "text_response", None, "done")

        state = self.turn_state(conversation, runtime)
        out = await self.registry.chain("turn", core).run(state)
        return out, state, seen

    async def step(
        self,
        conversation: ConversationState,
        core: Callable[[StepState], Any],
        catalog: list[dict[str, Any]] | None = None,
    ) -> StepResult:
        state = StepState(self.turn_state(conversation, None), 0, catalog or [])
        result: StepResult = await self.registry.chain("step", core).run(state)
        return result


def harness(module: str, config: Mapping[str, Any] | None = None, name: str | None = None) -> Harness:
    h = Harness(name or module.replace("_", "-"), BASE_EXT / f"{module}.py", config)
    asyncio.run(h.register())
    return h


def run_turn(
    module: str,
    history: Sequence[Message],
    config: Mapping[str, Any] | None = None,
    runtime: RuntimeInfo | None = None,
) -> tuple[ConversationState, list[Message], TurnState]:
    """Register ``module`` and run one turn chain over ``history``; returns the conversation (with
    the extension's events), the messages the core saw, and the turn state."""
    h = harness(module, config)
    conversation = ConversationState(history)
    _, state, seen = asyncio.run(h.turn(conversation, runtime))
    return conversation, seen, state


def ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def event_summary(conversation: ConversationState) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for event in conversation.events:
        if event["type"] in ("remove", "replace"):
            out.append((event["type"], event["targetId"]))
        elif event["type"] == "append":
            out.append(("append", event["message"].id))
        else:
            out.append((event["type"], None))
    return out


# --- real bundles ------------------------------------------------------------------------------


def base_ref(name: str, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    ref = {"kind": "Extension", "name": name, "package": "@goondan/base"}
    return {"ref": ref, "config": dict(config)} if config is not None else ref


ECHO_TOOL = """\
def echo(ctx, args):
    return "echo:" + str(args.get("value", ""))


def fail(ctx, args):
    raise RuntimeError("boom")


handlers = {"echo": echo, "fail": fail}
"""


def bundle(
    root: Path,
    extensions: Sequence[Any],
    *,
    prompt: str | None = None,
    extra_docs: Sequence[Mapping[str, Any]] = (),
    files: Mapping[str, str] | None = None,
    max_steps: int | None = None,
    required_tools: Sequence[str] = (),
    other_agents: Sequence[str] = (),
) -> Path:
    agent = kit.agent_doc("a", tools=["t"], prompt=prompt)
    agent["spec"]["extensions"] = list(extensions)  # as given: refs, base_ref(...) or "Extension/x"
    if required_tools:
        agent["spec"]["requiredTools"] = list(required_tools)
    echo = kit.export("echo", {"value": {"type": "string"}})
    echo["description"] = "echo a value"
    fail = {"name": "fail", "description": "always fails", "parameters": {"type": "object"}}
    return kit.write_bundle(
        root,
        kit.package_doc("policy-test"),
        kit.python_model_doc(model="test"),
        kit.tool_doc("t", "./tool.py", [echo, fail]),
        *extra_docs,
        agent,
        *(kit.agent_doc(name) for name in other_agents),
        kit.swarm_doc(["a", *other_agents], name="s", max_steps=max_steps),
        files={"model.py": FORWARDING_MODEL, "tool.py": ECHO_TOOL, **(files or {})},
    )


def ask(root: Path, state_root: Path, questions: Sequence[str]) -> None:
    """Run one real (inline) runtime over ``root`` and send ``questions`` as consecutive turns."""

    async def go() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            for question in questions:
                await rt.request(question)

    asyncio.run(go())


def scripted(*replies: Any) -> Callable[[Any], Any]:
    """Replies in order (the last repeats); a callable reply is called with the request."""
    counter = {"n": 0}

    def generate(request: Any) -> Any:
        reply = replies[min(counter["n"], len(replies) - 1)]
        counter["n"] += 1
        return reply(request) if callable(reply) else reply

    return generate


def text_reply(value: str) -> dict[str, Any]:
    return {"text": value, "toolCalls": []}


def calls_reply(*call_ids: str, name: str = "t__echo") -> dict[str, Any]:
    return {"text": None, "toolCalls": [{"id": c, "name": name, "args": {"value": c}} for c in call_ids]}


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
