"""``gdn run --attach FILE`` (repeatable) and ``/attach FILE`` in a chat session: files sent with the
request as image or file parts.

The media type is guessed from the file name; ``FILE:TYPE`` (e.g. ``scan.bin:image/png``) sets it.
PNG, JPEG, GIF and WebP become image parts, anything else a file part named after the file. Paths are
made absolute here, because a request may be handed to a ``gdn run`` started in another directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._content import (
    IMAGE_TYPES,
    MEDIA_TYPE_ALIASES,
    check_part_file,
    guess_media_type,
    max_part_bytes,
    normalize_part,
)
from ..errors import GoondanError
from ._output import EXIT_USAGE, CliError

_TYPE_SUFFIX = re.compile(r":([a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*)$", re.IGNORECASE)


def attachment_part(arg: str) -> dict[str, Any]:
    """One ``--attach`` value as a content part (the runtime checks and reads it)."""
    media_type: str | None = None
    match = _TYPE_SUFFIX.search(arg)
    if match is not None and not os.path.exists(arg):
        arg, media_type = arg[: match.start()], match.group(1).lower()
    path = Path(arg).expanduser().absolute()
    media_type = media_type or guess_media_type(path)
    media_type = MEDIA_TYPE_ALIASES.get(media_type, media_type)
    if media_type in IMAGE_TYPES:
        return {"type": "image", "mediaType": media_type, "path": str(path)}
    return {"type": "file", "mediaType": media_type, "name": path.name, "path": str(path)}


def check_attachments(attachments: Sequence[str] | None) -> None:
    """Refuse a ``--attach`` that names no readable file, an oversized one or a bad media type before
    anything starts: bad command-line input is a usage error (exit code 2), not a failed request."""
    limit = max_part_bytes()
    for index, arg in enumerate(attachments or ()):
        _check_type_suffix(arg)
        try:
            part = normalize_part(attachment_part(arg), index, limit=limit, read_paths=False)
            check_part_file(part, index, limit)
        except GoondanError as exc:
            message = exc.message.replace(f"input part {index}", f"--attach {arg}", 1)
            raise CliError(exc.code, message, exit_code=EXIT_USAGE, suggestion=exc.suggestion) from None


def _check_type_suffix(arg: str) -> None:
    """A ``:TYPE`` one letter or two from a known media type (``:text/plainn``, ``:application/pfd``)
    is a typo: the part would reach the provider with it and be refused there, after the turn began.
    A type far from every known one (``application/vnd.acme+json``) is taken as written."""
    match = _TYPE_SUFFIX.search(arg)
    if match is None or os.path.exists(arg):
        return
    typed = match.group(1).lower()
    import difflib
    import mimetypes

    mimetypes.init()
    known = {*mimetypes.types_map.values(), *mimetypes.common_types.values(), *IMAGE_TYPES, *MEDIA_TYPE_ALIASES}
    if typed in known:
        return
    near = difflib.get_close_matches(typed, known, n=1, cutoff=0.9)
    if near:
        raise CliError(
            "E_CONTENT_MEDIA_TYPE",
            f"--attach {arg}: {typed} is not a known media type; did you mean {near[0]!r}?",
            exit_code=EXIT_USAGE,
            suggestion=f"Attach it as {arg[: match.start()]}:{near[0]}, or leave the type out to have it "
            "guessed from the file name.",
        )


def request_input(text: str | None, attachments: Sequence[str] | None) -> str | list[dict[str, Any]] | None:
    """What ``gdn run`` sends: the text alone, or a text part followed by one part per attachment."""
    if not attachments:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts.extend(attachment_part(arg) for arg in attachments)
    return parts


def attach_command(line: str, attached: list[str]) -> str:
    """``/attach FILE[:TYPE]`` in a chat session: queue a file for the next message; returns what to
    tell the user. ``/attach`` alone lists what is queued."""
    arg = line.removeprefix("/attach").strip()
    if not arg:
        return "attached: " + (", ".join(attached) if attached else "nothing") + "\n"
    part = attachment_part(arg)
    try:  # what --attach refuses is refused here, not as a failed turn when the next message goes
        check_attachments([arg])
    except CliError as exc:
        message = exc.message.replace("--attach", "/attach", 1)
        return f"[{exc.code}] {message} (not attached)\n" + (
            f"  suggestion: {exc.suggestion}\n" if exc.suggestion else ""
        )
    attached.append(arg)
    return f"attached {Path(part['path']).name} ({part['mediaType']}): sent with your next message\n"


__all__ = ["attach_command", "attachment_part", "check_attachments", "request_input"]
