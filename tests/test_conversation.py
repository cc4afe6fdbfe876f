"""ConversationState: NextMessages = BaseMessages + SUM(Events), maintained incrementally."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan import ConversationState, GoondanError
from goondan.conversation import fold_events
from goondan.messages import Message, assistant_message, user_message


def _ids(messages):
    return [m.id for m in messages]


def _msg(i: int, role: str = "user") -> Message:
    if role == "assistant":
        return assistant_message(f"a{i}", id=f"m{i}")
    return user_message(f"u{i}", id=f"m{i}")


def test_replace_then_append_gives_next_messages_of_base_plus_events():
    u, a = _msg(1), _msg(2, "assistant")
    state = ConversationState([u, a])
    state.emit({"type": "replace", "targetId": "m2", "message": assistant_message("updated", id="m2b")})
    state.emit({"type": "append", "message": _msg(3)})
    assert len(state.base_messages) == 2
    assert len(state.events) == 2
    assert _ids(state.next_messages) == ["m1", "m2b", "m3"]
    assert state.to_llm_messages()[1]["content"] == "updated"
    _, appended = state.pending_commit()
    assert appended is None  # a replace forces a rewrite of base.jsonl
    state.fold()
    assert _ids(state.base_messages) == ["m1", "m2b", "m3"]
    assert len(state.events) == 0


def test_append_only_turn_commits_as_delta():
    state = ConversationState([_msg(1)])
    state.emit({"type": "append", "message": _msg(2)})
    state.emit({"type": "append", "message": _msg(3)})
    _, appended = state.pending_commit()
    assert appended is not None and _ids(appended) == ["m2", "m3"]


def test_missing_target_is_skipped_with_structured_warning():
    state = ConversationState([_msg(1)])
    state.emit({"type": "remove", "targetId": "nope"})
    assert _ids(state.next_messages) == ["m1"]
    (warning,) = state.warnings
    assert warning["code"] == "E_MESSAGE_TARGET_NOT_FOUND"
    assert warning["targetId"] == "nope"
    assert warning["eventIndex"] == 0


def test_truncate_empties_the_conversation():
    state = ConversationState([_msg(1), _msg(2)])
    state.emit({"type": "truncate"})
    state.emit({"type": "append", "message": _msg(3)})
    assert _ids(state.next_messages) == ["m3"]


def test_emitted_message_is_copied_not_aliased():
    m = user_message("hello", {"tag": 1}, id="x")
    state = ConversationState()
    state.emit({"type": "append", "message": m})
    m.metadata["tag"] = 2
    m.data["content"] = "changed"
    stored = state.next_messages[0]
    assert stored.metadata["tag"] == 1
    assert stored.data["content"] == "hello"


def test_stored_messages_cannot_be_mutated_through_views():
    state = ConversationState([user_message("hi", {"k": 1}, id="x")])
    view = state.next_messages[0]
    with pytest.raises(TypeError, match="read-only"):
        view.metadata["k"] = 2
    with pytest.raises(TypeError, match="read-only"):
        state.to_llm_messages()[0]["content"] = "x"
    view.metadata = {"rebound": True}  # rebinding a handle's attribute never reaches the state
    assert state.next_messages[0].metadata == {"k": 1}
    fresh = state.next_messages[0]
    changed = dataclasses.replace(fresh, metadata={**fresh.metadata, "pinned": True}, id="x2")
    state.emit({"type": "replace", "targetId": "x", "message": changed})
    assert state.next_messages[0].metadata == {"k": 1, "pinned": True}


def test_views_are_read_only_sequences():
    state = ConversationState([_msg(1)])
    with pytest.raises((TypeError, AttributeError)):
        state.next_messages.append(_msg(2))  # type: ignore[attr-defined]
    assert len(state.next_messages) == 1


@pytest.mark.parametrize(
    "event",
    [
        {"type": "upsert", "message": None},
        {"type": "append"},
        {"type": "remove"},
        {"type": "remove", "targetId": ""},
        {"type": "truncate", "extra": 1},
        {"type": "append", "message": {"id": "x", "data": {"role": "robot", "content": "?"}}},
        "append",
    ],
)
def test_malformed_events_are_rejected_with_clear_error(event):
    state = ConversationState()
    with pytest.raises(GoondanError) as info:
        state.emit(event)
    assert info.value.code == "E_MESSAGE_EVENT_INVALID"
    assert info.value.suggestion


def test_appending_a_duplicate_id_is_rejected():
    state = ConversationState([_msg(1)])
    with pytest.raises(GoondanError) as info:
        state.emit({"type": "append", "message": _msg(1)})
    assert info.value.code == "E_MESSAGE_DUPLICATE_ID"


def test_sink_sees_every_event_before_it_is_applied():
    seen = []
    state = ConversationState(sink=lambda e: seen.append((e["type"], len(state.next_messages))))
    state.emit({"type": "append", "message": _msg(1)})
    state.emit({"type": "truncate"})
    assert seen == [("append", 0), ("truncate", 1)]


# --- property: incremental state == reference fold == applying events one at a time ---------

_counter = iter(range(10**9))


@st.composite
def histories(draw):
    base = [_msg(next(_counter)) for _ in range(draw(st.integers(0, 5)))]
    ids = [m.id for m in base]
    events = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["append", "append", "replace", "remove", "truncate", "remove-missing"]))
        if kind == "append":
            m = _msg(next(_counter), draw(st.sampled_from(["user", "assistant"])))
            ids.append(m.id)
            events.append({"type": "append", "message": m})
        elif kind in ("replace", "remove") and ids:
            target = draw(st.sampled_from(ids))
            if kind == "replace":
                m = _msg(next(_counter), "assistant")
                ids.append(m.id)
                events.append({"type": "replace", "targetId": target, "message": m})
            else:
                events.append({"type": "remove", "targetId": target})
        elif kind == "truncate":
            events.append({"type": "truncate"})
        else:
            events.append({"type": "remove", "targetId": "missing-id"})
    return base, events


@settings(max_examples=200, deadline=None)
@given(histories())
def test_incremental_next_messages_equal_reference_fold(history):
    base, events = history
    state = ConversationState(base)
    for event in events:
        state.emit(event)
        # after every single event the view equals the from-scratch fold of everything so far
    expected, expected_warnings = fold_events(base, events)
    assert _ids(state.next_messages) == _ids(expected)
    assert [w["eventIndex"] for w in state.warnings] == [w["eventIndex"] for w in expected_warnings]
    next_messages, appended = state.pending_commit()
    assert _ids(next_messages) == _ids(expected)
    if appended is not None:
        assert _ids(state.base_messages) + _ids(appended) == _ids(expected)
    state.fold()
    assert _ids(state.base_messages) == _ids(expected)
    assert len(state.events) == 0


@settings(max_examples=100, deadline=None)
@given(histories())
def test_replaying_recovered_events_equals_live_emission(history):
    base, events = history
    live = ConversationState(base)
    for event in events:
        live.emit(event)
    replayed = ConversationState(base, events)  # what a restart does with residual events.jsonl
    assert _ids(replayed.next_messages) == _ids(live.next_messages)


def test_views_are_snapshots_that_never_change_after_they_were_taken():
    state = ConversationState([_msg(1), _msg(2)])
    llm = state.to_llm_messages()
    view = state.next_messages
    state.emit({"type": "append", "message": _msg(3)})
    state.emit({"type": "remove", "targetId": "m1"})
    state.emit({"type": "replace", "targetId": "m2", "message": assistant_message("x", id="m2b")})
    assert [m["content"] for m in llm] == ["u1", "u2"]
    assert view.ids == ["m1", "m2"]
    assert _ids(state.next_messages) == ["m2b", "m3"]
    state.emit({"type": "truncate"})
    assert view.ids == ["m1", "m2"] and len(state.next_messages) == 0


def test_view_indexing_and_slicing_behave_like_a_sequence():
    state = ConversationState([_msg(i) for i in range(5)])
    llm = state.to_llm_messages()
    assert llm[-1]["content"] == "u4"
    assert [m["content"] for m in llm[1:3]] == ["u1", "u2"]
    with pytest.raises(IndexError):
        llm[5]
    assert list(llm) == [m.data for m in state.next_messages]


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3) | st.tuples(st.integers()),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=2) | st.integers(0, 3), children, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_quick_json_check_never_accepts_what_the_full_check_rejects(value):
    """is_plain_json is a shortcut for json_problem: when it says yes, json_problem must find nothing."""
    from goondan._json import is_plain_json, json_problem

    if is_plain_json(value):
        assert json_problem(value) is None


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=3),
        lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2), children, max_size=3),
        max_leaves=10,
    )
)
def test_quick_json_check_accepts_every_plain_json_tree(value):
    from goondan._json import freeze_json, is_plain_json

    assert is_plain_json(value)
    assert is_plain_json(freeze_json(value))
