"""What ``Runtime.approve`` accepts as a decision, checked before any instance is touched: a
non-empty id, a bool, an optional string note, and ``args`` that are a JSON object (only with an
approval). Anything else is ``E_APPROVAL_INVALID`` with a message and a suggestion, never a traceback."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.errors import GoondanError
from goondan.runtime._approvals import _check

ANY = st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=2)


@settings(max_examples=300, deadline=None)
@given(
    approval_id=ANY | st.just("appr-1"),
    approved=ANY,
    note=ANY,
    args=ANY | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
def test_a_decision_is_valid_exactly_when_each_field_has_its_type(
    approval_id: Any, approved: Any, note: Any, args: Any
) -> None:
    valid = (
        isinstance(approval_id, str)
        and bool(approval_id)
        and isinstance(approved, bool)
        and (note is None or isinstance(note, str))
        and (args is None or (approved is True and isinstance(args, dict)))
    )
    if valid:
        _check(approval_id, approved, note, args)
        return
    with pytest.raises(GoondanError) as info:
        _check(approval_id, approved, note, args)
    assert info.value.code == "E_APPROVAL_INVALID" and info.value.message
    assert info.value.suggestion  # every refusal says what to pass instead


def test_args_that_cannot_be_stored_as_json_are_refused() -> None:
    with pytest.raises(GoondanError) as info:
        _check("appr-1", True, None, {"x": object()})
    assert info.value.code == "E_APPROVAL_INVALID"
