"""tail_never_fits (the warning of gdn validate and of message-compaction's start) says exactly when
the retained tail cannot be kept: it agrees with what plan_compaction does, on both sides of the edge."""

from __future__ import annotations

import pytest
from policy_kit import assistant, user

from goondan.base.extensions._compaction_plan import Limits, plan_compaction, tail_never_fits


@pytest.mark.parametrize("summary", [True, False])
@pytest.mark.parametrize("retain", [0, 1, 2, 3, 4, 5, 6])
def test_tail_never_fits_exactly_when_compaction_cannot_keep_the_retained_messages(retain: int, summary: bool) -> None:
    max_messages = 4
    history = [
        (user if i % 2 == 0 else assistant)(f"message {i}", f"m{i}")
        for i in range(11)  # ends with the current input
    ]
    limits = Limits(max_messages=max_messages, max_characters=10**6, retain_last=retain, summary_slot=summary)
    plan = plan_compaction(history, "remove", limits)
    assert plan is not None
    tail = [m.id for m in history[-max(retain, 1) :]]
    honoured = plan.mode == "remove" and set(tail) <= set(plan.kept)
    assert tail_never_fits(limits) is not honoured
