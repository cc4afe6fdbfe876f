"""Durable approvals in every executor: a call that needs approval pauses its turn
(``finish_reason="awaiting_approval"``) with nothing held in memory; ``Runtime.approve`` resumes
the same turn, also in a runtime started after the first one closed; a denied call reaches the
model as ``E_TOOL_DENIED`` with the note; edited arguments are the ones the tool runs with;
several calls of one step wait at once; undecided calls are denied when they expire."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit
from kit.approvals import approval_bundle as bundle
from kit.approvals import ran


def turn_ended(rt: Any) -> bool:
    """The instance's last committed message is the model's answer and no turn is open."""
    messages = rt.workspace.instance_path("a", "k") / "messages"
    base = kit.read_jsonl(messages / "base.jsonl") if (messages / "base.jsonl").exists() else []
    open_events = kit.read_jsonl(messages / "events.jsonl") if (messages / "events.jsonl").exists() else []
    return bool(base) and base[-1]["data"]["role"] == "assistant" and len(base) > 2 and not open_events


def results_of(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": r["toolCallId"], "output": r["output"]} for r in kit.tool_results(history)]


async def request(root: Path, state_root: Path, executor: str, text: str) -> Any:
    async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
        return await rt.request(text, instance_key="k")


def test_an_approval_survives_a_restart_of_the_runtime_between_request_and_decision(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log)

    async def main() -> tuple[Any, Any, list[Any], list[Any], list[dict[str, Any]]]:
        first = await request(root, state_root, executor, "one")  # this runtime closes: nothing waits
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            listed = await rt.pending_approvals()
            result = await rt.approve(listed[0].approval_id)
            after = await rt.pending_approvals()
            return first, result, listed, after, kit.history(rt, "a", "k")

    first, result, listed, after, history = asyncio.run(main())
    assert first.finish_reason == "awaiting_approval"
    assert first.text == "I will run it."
    (pending,) = first.pending_approvals
    assert (pending.tool_name, pending.tool_call_id, pending.args) == ("shell__run", "c1", {"cmd": "rm x"})
    assert (pending.agent_name, pending.instance_key) == ("a", "k")
    assert first.to_dict()["pendingApprovals"][0]["approvalId"] == pending.approval_id
    assert [p.approval_id for p in listed] == [pending.approval_id]
    assert result.finish_reason == "text_response", result.error
    assert result.turn_id == first.turn_id  # the same turn went on
    assert result.pending_approvals == [] and after == []
    assert ran(log) == ["rm x"]
    assert kit.roles(history) == ["user", "assistant", "tool", "assistant"]
    assert results_of(history) == [{"id": "c1", "output": {"type": "text", "value": "ran rm x"}}]


def test_a_denied_call_reaches_the_model_as_e_tool_denied_with_the_note(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log)

    async def main() -> tuple[Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = await rt.request("one", instance_key="k")
            result = await rt.approve(first.pending_approvals[0].approval_id, approved=False, note="not on prod")
            return result, kit.history(rt, "a", "k")

    result, history = asyncio.run(main())
    assert result.finish_reason == "text_response", result.error
    assert ran(log) == []
    (denied,) = results_of(history)
    assert denied["output"]["type"] == "error-json"
    assert denied["output"]["value"]["code"] == "E_TOOL_DENIED"
    assert "Note: not on prod" in denied["output"]["value"]["message"]
    assert "E_TOOL_DENIED" in (result.text or "") and "not on prod" in (result.text or "")


def test_an_approval_with_edited_args_runs_the_tool_with_the_new_args(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log)

    async def main() -> Any:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = await rt.request("one", instance_key="k")
            return await rt.approve(first.pending_approvals[0].approval_id, args={"cmd": "ls"})

    result = asyncio.run(main())
    assert result.finish_reason == "text_response", result.error
    assert ran(log) == ["ls"]
    assert "ran ls" in (result.text or "")


def test_two_calls_of_one_step_wait_at_once_and_the_turn_resumes_when_both_are_decided(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log)

    async def main() -> tuple[Any, Any, list[str], Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = await rt.request("two", instance_key="k")
            a, b = first.pending_approvals
            middle = await rt.approve(b.approval_id, approved=False, note="no b")
            ran_between = ran(log)
            last = await rt.approve(a.approval_id)
            return first, middle, ran_between, last, kit.history(rt, "a", "k")

    first, middle, ran_between, last, history = asyncio.run(main())
    assert first.finish_reason == "awaiting_approval"
    assert [(p.tool_call_id, p.args) for p in first.pending_approvals] == [("c1", {"cmd": "a"}), ("c3", {"cmd": "b"})]
    assert middle.finish_reason == "awaiting_approval"
    assert [p.tool_call_id for p in middle.pending_approvals] == ["c1"]
    assert ran_between == ["echo free"]  # the unguarded call ran; the guarded ones waited
    assert last.finish_reason == "text_response", last.error
    assert ran(log) == ["echo free", "a"]
    outputs = {r["id"]: r["output"] for r in results_of(history)}
    assert outputs["c1"] == {"type": "text", "value": "ran a"}
    assert outputs["c2"] == {"type": "text", "value": "echo free"}
    assert outputs["c3"]["value"]["code"] == "E_TOOL_DENIED"


def test_an_undecided_approval_is_denied_when_it_expires(tmp_path: Path, state_root: Path, executor: str) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log, timeout=0.3)

    async def main() -> tuple[Any, list[Any], list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = await rt.request("one", instance_key="k")
            for _ in range(50):  # the runtime's timer decides it and the turn goes on; bounded wait
                await asyncio.sleep(0.1)
                if turn_ended(rt):
                    break
            return first, await rt.pending_approvals(), kit.history(rt, "a", "k")

    first, after, history = asyncio.run(main())
    assert first.pending_approvals[0].expires_at is not None
    assert after == []
    assert ran(log) == []
    (denied,) = results_of(history)
    assert denied["output"]["value"]["code"] == "E_TOOL_DENIED"
    assert "Nobody decided within 0.3 s" in denied["output"]["value"]["message"]
    assert kit.roles(history)[-1] == "assistant"


def test_an_approval_that_expired_while_no_runtime_ran_is_denied_when_listed(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log, timeout=0.2)

    async def main() -> tuple[Any, list[Any], list[dict[str, Any]]]:
        first = await request(root, state_root, executor, "one")
        await asyncio.sleep(0.4)
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            return first, await rt.pending_approvals(), kit.history(rt, "a", "k")

    first, after, history = asyncio.run(main())
    assert first.finish_reason == "awaiting_approval"
    assert after == []
    assert results_of(history)[0]["output"]["value"]["code"] == "E_TOOL_DENIED"


def test_a_toolcall_middleware_can_require_approval_and_the_approved_call_runs_through_it(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log)

    async def main() -> tuple[Any, Any]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = await rt.request("mw", instance_key="k")
            assert ran(log) == []
            return first, await rt.approve(first.pending_approvals[0].approval_id)

    first, result = asyncio.run(main())
    (pending,) = first.pending_approvals
    assert (pending.tool_name, pending.reason) == ("shell__echo", "big commands need a person")
    assert result.finish_reason == "text_response", result.error
    assert ran(log) == ["echo big"]


def test_an_agent_policy_can_guard_a_built_in_tool(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = bundle(tmp_path / "b", tmp_path / "ran.log", policy=["bash__exec"])
    result = asyncio.run(request(root, state_root, executor, "bash"))
    assert result.finish_reason == "awaiting_approval"
    assert [(p.tool_name, p.args) for p in result.pending_approvals] == [("bash__exec", {"command": "echo hi"})]


def test_a_new_message_while_calls_wait_denies_them_and_starts_a_new_turn(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log)

    async def main() -> tuple[Any, list[Any], list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            await rt.request("one", instance_key="k")
            result = await rt.request("never mind", instance_key="k")
            return result, await rt.pending_approvals(), kit.history(rt, "a", "k")

    result, after, history = asyncio.run(main())
    assert result.text == "said never mind"
    assert after == [] and ran(log) == []
    assert kit.roles(history) == ["user", "assistant", "tool", "user", "assistant"]
    assert results_of(history)[0]["output"]["value"]["code"] == "E_TOOL_DENIED"


def test_approval_events_are_recorded_as_runtime_events(tmp_path: Path, state_root: Path, executor: str) -> None:
    root = bundle(tmp_path / "b", tmp_path / "ran.log")

    async def main() -> tuple[list[dict[str, Any]], Path]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = await rt.request("one", instance_key="k")
            await rt.approve(first.pending_approvals[0].approval_id, note="fine")
            assert rt.workspace is not None
            path = rt.workspace.instance_path("a", "k")
            assert path is not None
            return kit.read_jsonl(path / "messages" / "runtime-events.jsonl"), path

    events, _ = asyncio.run(main())
    types = [e["type"] for e in events]
    assert types.index("approval.requested") < types.index("approval.decided")
    requested = next(e for e in events if e["type"] == "approval.requested")
    decided = next(e for e in events if e["type"] == "approval.decided")
    assert (requested["toolName"], requested["args"]) == ("shell__run", {"cmd": "rm x"})
    assert (decided["approved"], decided["note"], decided["approvalId"]) == (True, "fine", requested["approvalId"])
    assert requested["traceId"] == decided["traceId"]


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"approval_id": "appr-missing"}, "E_APPROVAL_NOT_FOUND"),
        ({"approval_id": "", "approved": True}, "E_APPROVAL_INVALID"),
        ({"approval_id": "x", "approved": False, "args": {"cmd": "ls"}}, "E_APPROVAL_INVALID"),
        ({"approval_id": "x", "args": ["not", "an", "object"]}, "E_APPROVAL_INVALID"),
        ({"approval_id": "x", "approved": "yes"}, "E_APPROVAL_INVALID"),
    ],
)
def test_a_bad_decision_is_a_clear_error(tmp_path: Path, state_root: Path, kwargs: dict[str, Any], code: str) -> None:
    root = bundle(tmp_path / "b", tmp_path / "ran.log")

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, executor="inline") as rt:
            await rt.approve(**kwargs)

    with pytest.raises(goondan.GoondanError) as info:
        asyncio.run(main())
    assert info.value.code == code
    assert info.value.suggestion or code == "E_APPROVAL_INVALID"


def test_an_approval_is_decided_once(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path / "b", tmp_path / "ran.log")

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, executor="inline") as rt:
            first = await rt.request("two", instance_key="k")
            await rt.approve(first.pending_approvals[0].approval_id)
            await rt.approve(first.pending_approvals[0].approval_id)

    with pytest.raises(goondan.GoondanError) as info:
        asyncio.run(main())
    assert info.value.code == "E_APPROVAL_DECIDED"


def test_pending_approval_records_are_json(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path / "b", tmp_path / "ran.log")
    result = asyncio.run(request(root, state_root, "inline", "one"))
    assert json.loads(json.dumps(result.to_dict()))["finishReason"] == "awaiting_approval"


def test_an_inter_agent_response_arriving_while_calls_wait_joins_the_resumed_turn(
    tmp_path: Path, state_root: Path
) -> None:
    from goondan.messages import user_message

    root = bundle(tmp_path / "b", tmp_path / "ran.log")

    async def main() -> tuple[list[str], list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor="inline") as rt:
            first = await rt.request("one", instance_key="k")
            instance = await rt.get_instance("a", "k")
            await instance.deliver_inter_agent_response(user_message("late reply"))
            while_waiting = kit.roles(kit.history(rt, "a", "k"))
            await rt.approve(first.pending_approvals[0].approval_id)
            return while_waiting, kit.history(rt, "a", "k")

    while_waiting, history = asyncio.run(main())
    # nothing may come between a call and its result: the response waits for the decision
    assert while_waiting == ["user", "assistant"]
    assert kit.roles(history) == ["user", "assistant", "tool", "user", "assistant"]


@pytest.mark.parametrize("max_parallel", [None, 1])
def test_results_keep_the_call_order_when_an_earlier_call_waits_for_approval(
    tmp_path: Path, state_root: Path, executor: str, max_parallel: int | None
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log, max_parallel=max_parallel)

    async def main() -> tuple[list[str], Any, list[dict[str, Any]]]:
        first = await request(root, state_root, executor, "pair")  # the runtime closes while c1 waits
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            ran_before = ran(log)
            result = await rt.approve(first.pending_approvals[0].approval_id)
            return ran_before, result, kit.history(rt, "a", "k")

    ran_before, result, history = asyncio.run(main())
    assert ran_before == ["echo free"]  # the call that needs no approval ran before the decision
    assert result.finish_reason == "text_response", result.error
    assert ran(log) == ["echo free", "a"]  # and not a second time after it
    assert results_of(history) == [
        {"id": "c1", "output": {"type": "text", "value": "ran a"}},
        {"id": "c2", "output": {"type": "text", "value": "echo free"}},
    ]
    assert kit.roles(history) == ["user", "assistant", "tool", "tool", "assistant"]
    assert '"echo free"' in (result.text or "") and '"ran a"' in (result.text or "")


def test_a_crash_while_resuming_answers_the_approved_call_as_interrupted_and_keeps_the_held_results(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log)

    async def main() -> list[dict[str, Any]]:
        first = await request(root, state_root, executor, "pair")
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            assert rt.workspace is not None
            path = rt.workspace.instance_path("a", "k") / "paused-turn.json"
        # the state a process leaves when it dies while the approved call runs: every call decided
        record = json.loads(path.read_text())
        assert [a["approvalId"] for a in record["approvals"]] == [first.pending_approvals[0].approval_id]
        record["approvals"][0]["decision"] = {"approved": True, "note": None, "decidedBy": "api"}
        path.write_text(json.dumps(record))
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            assert await rt.pending_approvals() == []
            await rt.request("after", instance_key="k")  # the instance starts (and repairs) first
            return kit.history(rt, "a", "k")

    history = asyncio.run(main())
    assert ran(log) == ["echo free"]  # neither call ran a second time
    first_two = results_of(history)[:2]
    assert [r["id"] for r in first_two] == ["c1", "c2"]
    assert first_two[0]["output"]["value"]["code"] == "E_TOOL_INTERRUPTED"
    assert first_two[1]["output"] == {"type": "text", "value": "echo free"}


def test_an_inter_agent_response_arriving_while_calls_wait_survives_a_restart_and_joins_the_resumed_turn(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    log = tmp_path / "ran.log"
    root = bundle(tmp_path / "b", log, peer=True)

    async def main() -> tuple[Any, Any, list[dict[str, Any]]]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            first = await rt.request("ask", instance_key="k")  # b answers 0.3 s after a paused
            assert rt.workspace is not None
            paused = rt.workspace.instance_path("a", "k") / "paused-turn.json"
            for _ in range(50):  # bounded: until the response is durable
                await asyncio.sleep(0.1)
                if "said slow hello" in paused.read_text():
                    break
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            result = await rt.approve(first.pending_approvals[0].approval_id)
            return first, result, kit.history(rt, "a", "k")

    first, result, history = asyncio.run(main())
    assert first.finish_reason == "awaiting_approval"
    assert result.finish_reason == "text_response", result.error
    assert ran(log) == ["x"]
    # the resumed turn's model saw the response (its answer echoes the last message it got)
    assert "said slow hello" in (result.text or "")
    assert kit.roles(history) == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert "inter_agent_response" in json.dumps(history[4])
