"""Content parts of user messages: text, images and files (``rt.request([...parts])``).

A request's input is a string or a list of parts:

* ``{"type": "text", "text": str}``
* ``{"type": "image", "mediaType": "image/png", "path" | "url" | "data": ...}``
* ``{"type": "file", "mediaType": "application/pdf", "name": str, "path" | "url" | "data": ...}``

``data`` is base64 (``bytes`` are accepted from Python and encoded). Everything is checked here,
before the request reaches an executor, so bad input fails at the caller with one clear
:class:`~goondan.errors.GoondanError` instead of in the middle of a turn. ``path`` is read by the
caller's process (:func:`normalize_input` with ``read_paths=True``) because the instance may run in
another process or on another host, where the path means nothing.

Stored conversations never hold the bytes: the engine writes them through the instance store and keeps
``{"type", "mediaType", "attachment": <sha256>, "size"}`` (plus ``name``) in the message, and resolves
the reference back to ``data`` only for the model request of a step.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Required, TypeAlias, TypedDict

from .errors import GoondanError


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ImagePart(TypedDict, total=False):
    """An image: PNG, JPEG, GIF or WebP, given by exactly one of ``path``, ``url``, ``data`` (base64)."""

    type: Required[Literal["image"]]
    mediaType: str  # guessed from the name when only a path is given
    path: str
    url: str
    data: str


class FilePart(TypedDict, total=False):
    """Any other file (a PDF, a text file...), given by exactly one of ``path``, ``url``, ``data``."""

    type: Required[Literal["file"]]
    mediaType: str
    name: str  # the file's name when only a path is given
    path: str
    url: str
    data: str


ContentPart: TypeAlias = TextPart | ImagePart | FilePart

RequestInput: TypeAlias = str | Sequence[ContentPart | Mapping[str, Any]]
"""What ``Runtime.request`` takes: a string, or a list of content parts."""

MAX_PART_BYTES_ENV = "GOONDAN_MAX_ATTACHMENT_BYTES"
DEFAULT_MAX_PART_BYTES = 20 * 1024 * 1024

MEDIA_KINDS = frozenset({"image", "file"})
# What Anthropic, OpenAI and Gemini all accept as an image; anything else is better sent as a file.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# names in common use for an image type, each sent as the type providers know (a part of type
# image/jpg became a file part the providers refuse, or an image part refused here)
MEDIA_TYPE_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-png": "image/png"}
_SOURCES = ("path", "url", "data")
_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MAGIC: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}
_HINT = (
    "A part is {type: text, text} | {type: image, mediaType, path|url|data}"
    " | {type: file, mediaType, name, path|url|data}."
)


def max_part_bytes() -> int:
    """The size limit of one image or file part (``GOONDAN_MAX_ATTACHMENT_BYTES``, default 20 MiB)."""
    raw = os.environ.get(MAX_PART_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_PART_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise GoondanError(
            "E_CONTENT_INVALID",
            f"{MAX_PART_BYTES_ENV}={raw!r} is not a positive number of bytes",
            suggestion=f"Set {MAX_PART_BYTES_ENV} to a byte count such as {DEFAULT_MAX_PART_BYTES}, or unset it.",
        )
    return value


def _invalid(index: int, what: str) -> GoondanError:
    return GoondanError("E_CONTENT_INVALID", f"input part {index}: {what}", suggestion=_HINT)


def _too_large(index: int, size: int, limit: int) -> GoondanError:
    return GoondanError(
        "E_CONTENT_TOO_LARGE",
        f"input part {index} is {size} bytes, over the limit of {limit} bytes per part",
        suggestion=f"Send a smaller file, or raise the limit with {MAX_PART_BYTES_ENV}.",
    )


def _media_type_error(index: int, what: str) -> GoondanError:
    return GoondanError(
        "E_CONTENT_MEDIA_TYPE",
        f"input part {index}: {what}",
        suggestion=f"Images are {', '.join(sorted(IMAGE_TYPES))}; send other media as {{type: file}} parts.",
    )


def has_media(value: Any) -> bool:
    """Whether a message content holds an image or file part."""
    return isinstance(value, list) and any(isinstance(p, Mapping) and p.get("type") in MEDIA_KINDS for p in value)


def guess_media_type(path: str | os.PathLike[str]) -> str:
    """The media type of a file by its name (``application/octet-stream`` when unknown)."""
    guessed, _ = mimetypes.guess_type(os.fspath(path), strict=False)
    return guessed or "application/octet-stream"


def sniff_image(data: bytes) -> str | None:
    """The image media type the bytes start with, or ``None`` for bytes of no known image format."""
    for media_type, magics in _MAGIC.items():
        if data.startswith(magics):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def decode_data(value: Any, index: int) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if not isinstance(value, str):
        raise _invalid(index, f"data must be a base64 string, got {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _invalid(index, f"data is not valid base64 ({exc})") from exc


def check_path(raw: Any, index: int, limit: int) -> Path:
    """The file of a ``path`` part, when it is a readable regular file within the size limit."""
    if not isinstance(raw, str | os.PathLike) or not os.fspath(raw):
        raise _invalid(index, "path must be a non-empty string")
    path = Path(os.fspath(raw)).expanduser()
    try:
        size = path.stat().st_size
        if not path.is_file():
            what = "a directory" if path.is_dir() else "not a regular file"
            raise GoondanError(
                "E_CONTENT_INVALID",
                f"input part {index}: {path} is {what}",
                suggestion="Attach a file (one per part); to send a directory's files, attach each of them.",
            )
    except OSError as exc:
        raise GoondanError(
            "E_CONTENT_INVALID",
            f"input part {index}: cannot read {path}: {exc.strerror or exc}",
            suggestion="Check the file's path (relative paths are relative to the current directory).",
        ) from exc
    if size > limit:
        raise _too_large(index, size, limit)
    return path


def _unreadable(index: int, path: Path, exc: OSError) -> GoondanError:
    """A file that exists but cannot be read (permissions, a device that fails)."""
    return GoondanError(
        "E_CONTENT_INVALID",
        f"input part {index}: cannot read {path}: {exc.strerror or exc}",
        suggestion="Check the file's permissions.",
    )


# enough of a file's start for sniff_image to tell every format it knows
SNIFF_BYTES = 16


def check_part_file(part: Mapping[str, Any], index: int, limit: int) -> None:
    """A normalized ``path`` part checked as reading it would check it, without reading it all: the
    file (see :func:`check_path`) and, for an image, that its first bytes are of the type it claims.

    For ``gdn run --attach``: a text file attached as ``:image/png`` used to pass this check and fail
    only in the runtime, as a failed request (exit 1) instead of a usage error (exit 2)."""
    path = check_path(part["path"], index, limit)
    if part.get("type") != "image":
        return
    try:
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError as exc:
        raise _unreadable(index, path, exc) from exc
    _check_bytes("image", str(part.get("mediaType")), head, index)


def read_path(raw: Any, index: int, limit: int) -> bytes:
    """The bytes of a ``path`` part (see :func:`check_path`)."""
    path = check_path(raw, index, limit)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _unreadable(index, path, exc) from exc
    if len(data) > limit:
        raise _too_large(index, len(data), limit)
    return data


def _check_media_type(kind: str, media_type: Any, index: int) -> str:
    if not isinstance(media_type, str) or not _MEDIA_TYPE.match(media_type.lower()):
        raise _media_type_error(index, f"mediaType must be a media type such as image/png, got {media_type!r}")
    lowered = media_type.lower()
    lowered = MEDIA_TYPE_ALIASES.get(lowered, lowered)
    if kind == "image" and lowered not in IMAGE_TYPES:
        raise _media_type_error(index, f"an image part cannot be {lowered}")
    return lowered


def _check_bytes(kind: str, media_type: str, data: bytes, index: int) -> None:
    if kind != "image":
        return
    actual = sniff_image(data)
    if actual != media_type:
        found = f"its bytes are {actual}" if actual else "its bytes are not an image"
        raise _media_type_error(index, f"the part says {media_type} but {found}")


def normalize_part(part: Any, index: int, *, limit: int, read_paths: bool) -> dict[str, Any]:
    """One checked part; with ``read_paths`` a ``path`` becomes ``data`` (base64)."""
    if not isinstance(part, Mapping):
        raise _invalid(index, f"expected an object, got {type(part).__name__}")
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise _invalid(index, "a text part needs a string 'text'")
        return {"type": "text", "text": text}
    if kind not in MEDIA_KINDS:
        raise _invalid(index, f"unknown part type {kind!r}")
    sources = [key for key in _SOURCES if part.get(key) is not None]
    if len(sources) != 1:
        raise _invalid(index, f"an {kind} part needs exactly one of path, url, data (got {sources or 'none'})")
    source = sources[0]
    if source == "path" and (not isinstance(part["path"], str | os.PathLike) or not os.fspath(part["path"])):
        raise _invalid(index, "path must be a non-empty string")
    out: dict[str, Any] = {"type": kind}
    raw_type = part.get("mediaType")
    if raw_type is None and source == "path":
        raw_type = guess_media_type(part["path"])
    out["mediaType"] = _check_media_type(str(kind), raw_type, index)
    if kind == "file":
        name = part.get("name")
        if name is None and source == "path":
            name = Path(os.fspath(part["path"])).name
        if not isinstance(name, str) or not name:
            raise _invalid(index, "a file part needs a non-empty 'name'")
        out["name"] = name
    if source == "url":
        url = part["url"]
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise _invalid(index, f"url must be an http(s) URL, got {url!r}")
        out["url"] = url
        return out
    if source == "path" and not read_paths:
        out["path"] = os.fspath(part["path"])
        return out
    data = read_path(part["path"], index, limit) if source == "path" else decode_data(part["data"], index)
    if len(data) > limit:
        raise _too_large(index, len(data), limit)
    _check_bytes(str(kind), out["mediaType"], data, index)
    out["data"] = base64.b64encode(data).decode("ascii")
    return out


def normalize_input(value: Any, *, read_paths: bool = True) -> str | list[dict[str, Any]]:
    """A request's input checked: a string as is, a list of parts normalized (see the module doc)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list | tuple):
        raise GoondanError(
            "E_REQUEST_INVALID",
            f"input must be a string or a list of content parts, got {type(value).__name__}",
            suggestion=_HINT,
        )
    if not value:
        raise GoondanError("E_REQUEST_INVALID", "input is an empty list of parts", suggestion=_HINT)
    limit = max_part_bytes()
    return [normalize_part(part, i, limit=limit, read_paths=read_paths) for i, part in enumerate(value)]


def is_attachment_id(value: Any) -> bool:
    """Whether ``value`` names a stored attachment (a lowercase hex sha256)."""
    return isinstance(value, str) and bool(_SHA256.match(value))


def placeholder(part: Mapping[str, Any]) -> str:
    """A textual stand-in for a media part, for models that take only text."""
    kind = part.get("type")
    media_type = part.get("mediaType", "application/octet-stream")
    size = part.get("size")
    where = f", {size} bytes" if isinstance(size, int) else (f", {part['url']}" if part.get("url") else "")
    if kind == "file":
        return f"[file {part.get('name', '')} ({media_type}{where}) not shown: this model reads text only]"
    return f"[image ({media_type}{where}) not shown: this model reads text only]"


__all__ = [
    "DEFAULT_MAX_PART_BYTES",
    "IMAGE_TYPES",
    "MAX_PART_BYTES_ENV",
    "SNIFF_BYTES",
    "ContentPart",
    "FilePart",
    "ImagePart",
    "RequestInput",
    "TextPart",
    "check_part_file",
    "check_path",
    "decode_data",
    "guess_media_type",
    "has_media",
    "is_attachment_id",
    "max_part_bytes",
    "normalize_input",
    "normalize_part",
    "placeholder",
    "read_path",
    "sniff_image",
]
