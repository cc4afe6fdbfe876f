"""A conversation page as a person reads it (goondan.studio._conversation): results under their
calls even across a page boundary, who added a system message, compaction summaries marked."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.messages import Message, assistant_message, system_message, tool_message, user_message
from goondan.studio._conversation import LOOK_AROUND, conversation_rows


def call(n: int) -> Message:
    return assistant_message([{"type": "tool-call", "toolCallId": f"c{n}", "toolName": "calc__add", "input": {"n": n}}])


def result(n: int, *, error: bool = False) -> Message:
    output = (
        {"type": "error-json", "value": {"code": "E_X", "message": "no"}} if error else {"type": "json", "value": n}
    )
    return tool_message(f"c{n}", "calc__add", output)


def history(turns: int) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += [user_message(f"q{n}"), call(n), result(n, error=n % 3 == 0), assistant_message(f"a{n}")]
    return out


def page(messages: list[Message], offset: int, limit: int) -> list[dict]:
    lo = max(0, offset - LOOK_AROUND)
    return conversation_rows(messages[lo : offset + limit + LOOK_AROUND], lo, offset, limit)


def test_a_tool_call_shows_its_result_and_the_tool_message_is_folded_into_it() -> None:
    rows = page(history(2), 0, 8)
    call_block = rows[1]["blocks"][0]
    assert call_block["type"] == "tool-call" and call_block["toolName"] == "calc__add"
    assert call_block["result"] == {"index": 2, "status": "error", "value": {"code": "E_X", "message": "no"}}
    assert rows[2]["foldedInto"] == 1 and rows[6]["foldedInto"] == 5
    assert rows[5]["blocks"][0]["result"]["status"] == "ok"
    assert [r["index"] for r in rows] == list(range(8)) and rows[3]["record"]["data"]["content"] == "a0"


def test_a_result_on_the_next_page_still_folds_under_its_call() -> None:
    msgs = history(3)
    first = page(msgs, 0, 2)  # ends right after the call of turn 0
    assert first[1]["blocks"][0]["result"]["index"] == 2
    second = page(msgs, 2, 4)
    assert second[0]["foldedInto"] == 1  # its call is on the previous page


def test_system_messages_name_the_extension_that_added_them_and_compaction_summaries_are_marked() -> None:
    summary = system_message(
        "[summary]", {"compaction.summary": True}, source={"type": "extension", "extensionName": "message-compaction"}
    )
    note = system_message("runtime note", source={"type": "system"})
    delegated = user_message("do it", {"__goondanInbound": {"sourceKind": "agent", "sourceName": "lead"}})
    rows = page([summary, note, delegated, user_message("plain")], 0, 4)
    assert [(r["label"], r["compaction"]) for r in rows] == [
        ("extension message-compaction", True),
        ("runtime", False),
        ("from agent lead", False),
        (None, False),
    ]


@given(st.integers(1, 40), st.data())
@settings(max_examples=60, deadline=None)
def test_every_page_split_folds_every_result_under_its_call(turns: int, data: st.DataObject) -> None:
    msgs = history(turns)
    offset = data.draw(st.integers(0, len(msgs) - 1))
    limit = data.draw(st.integers(1, 30))
    rows = page(msgs, offset, limit)
    assert [r["index"] for r in rows] == list(range(offset, min(len(msgs), offset + limit)))
    for r in rows:
        for b in r["blocks"]:
            if b["type"] == "tool-call":
                n = int(b["toolCallId"][1:])
                assert b["result"]["index"] == 4 * n + 2
        if r["role"] == "tool":
            assert r["foldedInto"] == r["index"] - 1
