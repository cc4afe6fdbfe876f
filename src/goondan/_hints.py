"""Suggestion text shared by every layer: the near name (``did you mean 'x'?``) and suggestions
made of several parts. Kept free of imports beyond the standard library so that the runtime's
lower layers (tools, pipeline, model providers) can name a near miss without importing bundle
loading (and pydantic) on their error paths."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, options: Iterable[str]) -> str | None:
    """``did you mean 'x'?`` for the closest option, or None when nothing is close."""
    options = list(options)  # read twice below: a generator would be empty the second time
    matches = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if not matches:
        lowered = {o.lower(): o for o in options}
        if word.lower() in lowered:
            matches = [lowered[word.lower()]]
    return f"did you mean {matches[0]!r}?" if matches else None


def join_hints(*parts: str | None) -> str | None:
    """A suggestion made of several parts, as sentences: ``did you mean 'Agent'? Known kinds: ...``.
    Joined with ``"; "`` they read ``did you mean 'Agent'?; known kinds: ...``. None when all are empty."""
    out = ""
    for part in parts:
        if not part:
            continue
        if out:
            out += (" " if out[-1] in ".?!" else ". ") + part[:1].upper() + part[1:]
        else:
            out = part
    return out or None
