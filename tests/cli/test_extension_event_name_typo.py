"""``api.events.on("turn.complete", fn)`` subscribed to an event nobody emits and the handler never
ran, silently. A name close to a runtime event's, or in its namespace (``turn.``/``step.``/``tool.``),
is a warning on ``gdn run``'s stderr naming the extension and the event meant; an extension's own
event names (``audit.done``) and the runtime's are not."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import bundle_with_audit, gdn

SOURCE = """\
def register(api):
    api.events.on("turn.complete", lambda event: None)
    api.events.on("tool.finished", lambda event: None)
    api.events.on("turn.completed", lambda event: None)
    api.events.on("audit.done", lambda *args: None)
"""


def test_a_misspelt_runtime_event_name_is_a_warning_with_the_name_meant(tmp_path: Path) -> None:
    bundle_with_audit(tmp_path, SOURCE)
    for executor in ("inline", "process"):
        run = gdn(tmp_path, "run", "b", "--input", "hi", "--executor", executor)
        assert run.returncode == 0, run.stderr
        assert run.stdout == "echo: hi\n"
        assert (
            "extension 'audit' subscribed to 'turn.complete', which is no runtime event: its handler runs only if "
            "an extension emits it. did you mean 'turn.completed'?"
        ) in run.stderr, executor
        assert "subscribed to 'tool.finished', which is no runtime event" in run.stderr
        assert "'turn.completed', which" not in run.stderr and "'audit.done'" not in run.stderr
