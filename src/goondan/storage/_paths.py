"""Where state lives: the state root, workspace ids and instance directory names.

Directory names are derived from user-chosen strings (swarm instance keys, agent names, instance keys
such as ``user:123`` or a Slack thread id), so they must be filesystem safe on every platform we run on,
including case-insensitive ones (macOS), and the instance directory name must be *reversible* so that a
directory listing alone tells which conversation a directory holds.

Component encoding (used for instance directories and extension-state file names):

* ``[a-z0-9-]`` and ``.`` (except as first character) are kept verbatim, so the usual lowercase
  kebab-case names stay readable;
* every other character, including ``_``, ``.`` in first position and *uppercase letters* (which would
  collide with their lowercase form on a case-insensitive filesystem), becomes ``_`` followed by the two
  lowercase hex digits of each of its UTF-8 bytes.

Because ``_`` always starts an escape of exactly two hex digits, the pair ``__`` can never occur inside
an encoded component and is used as the separator ``<agent>__<key>``. Decoding is therefore exact, and
:func:`parse_instance_dir_name` accepts only *canonical* encodings, so that every valid name has exactly
one (agent, key) pair and vice versa.

Names longer than :data:`MAX_INSTANCE_DIR_LEN` cannot be both short and reversible; those (very rare)
pairs use the hashed form ``_h<40 hex>-<readable prefix>``. ``_h`` is not a valid escape, so hashed
names never collide with reversible ones; the original pair is recorded in ``metadata.json``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

MAX_WORKSPACE_ID_LEN = 128
MAX_INSTANCE_DIR_LEN = 200
MAX_COMPONENT_FILE_LEN = 200

STATE_ROOT_ENV = "GOONDAN_STATE_ROOT"

_SEPARATOR = "__"
_HASHED_PREFIX = "_h"

_SLUG_BAD = re.compile(r"[^a-z0-9._-]")
_SLUG_DASHES = re.compile(r"-+")

# Characters that never need escaping (a leading "." is handled separately).
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")
_HEX = frozenset("0123456789abcdef")


def resolve_state_root(
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """``--state-root`` (``explicit``) > ``GOONDAN_STATE_ROOT`` > ``~/.goondan``, as an absolute path.

    The directory is not created: read-only commands (``gdn instance list``) must not leave state behind.
    ``env`` defaults to ``os.environ``; passing a mapping makes the lookup testable.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    raw: str | None = None
    if explicit is not None and os.fspath(explicit) != "":
        raw = os.fspath(explicit)
    elif environ.get(STATE_ROOT_ENV):
        raw = environ[STATE_ROOT_ENV]
    home = environ.get("HOME") or str(Path.home())
    if raw is None:
        return Path(os.path.abspath(os.path.join(home, ".goondan")))
    # "~" follows the same HOME as the default so that an explicit env mapping is honoured.
    raw = home + raw[1:] if raw == "~" or raw.startswith("~/") else os.path.expanduser(raw)
    return Path(os.path.abspath(raw))


def _short_hash(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def workspace_id(swarm_instance_key: str) -> str:
    """The workspace id: a slug of the swarm's instance key.

    trim, lowercase, ``[^a-z0-9._-]`` → ``-``, collapse runs of ``-``, strip edge ``-``, empty →
    ``default``. Slugs longer than 128 characters are cut and suffixed with a hash of the full slug, so
    the result stays deterministic and distinct long keys stay distinct.
    """
    slug = _SLUG_DASHES.sub("-", _SLUG_BAD.sub("-", swarm_instance_key.strip().lower())).strip("-")
    if not slug or slug in (".", ".."):
        return "default"
    if len(slug) <= MAX_WORKSPACE_ID_LEN:
        return slug
    digest = _short_hash(slug, 12)
    head = slug[: MAX_WORKSPACE_ID_LEN - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}"


def encode_component(text: str) -> str:
    """Encode one string with the reversible, case-insensitive-safe escape scheme described above."""
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch in _SAFE and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def decode_component(encoded: str) -> str:
    """Inverse of :func:`encode_component`; ``ValueError`` for anything it could not have produced."""
    raw = bytearray()
    i = 0
    n = len(encoded)
    while i < n:
        ch = encoded[i]
        if ch == "_":
            pair = encoded[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise ValueError(f"invalid escape at position {i} in {encoded!r}")
            raw.append(int(pair, 16))
            i += 3
        elif ch in _SAFE:
            raw.extend(ch.encode("ascii"))
            i += 1
        else:
            raise ValueError(f"unexpected character {ch!r} in {encoded!r}")
    try:
        text = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{encoded!r} does not decode to UTF-8 text") from exc
    if encode_component(text) != encoded:
        raise ValueError(f"{encoded!r} is not a canonical encoding")
    return text


def _hashed_name(encoded: str, identity: str, limit: int) -> str:
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    prefix = f"{_HASHED_PREFIX}{digest}-"
    readable = encoded[: limit - len(prefix)]
    # Never cut an escape in half: the readable part is informative only, but keep it tidy.
    cut = readable.rfind("_")
    if cut != -1 and cut > len(readable) - 3:
        readable = readable[:cut]
    return prefix + readable


def instance_dir_name(agent_name: str, instance_key: str) -> str:
    """The directory name of one agent instance: ``<agent>__<key>`` (each component encoded).

    Unique per (agent, key), only ``[A-Za-z0-9._-]``, never starting with ``.``, at most 200 characters.
    Reversible with :func:`parse_instance_dir_name` unless the encoding would exceed 200 characters, in
    which case a hashed name is used (still unique and deterministic).
    """
    name = encode_component(agent_name) + _SEPARATOR + encode_component(instance_key)
    if len(name) <= MAX_INSTANCE_DIR_LEN:
        return name
    # The identity hashed is the (unambiguous) full encoding, so distinct pairs get distinct names.
    return _hashed_name(name, name, MAX_INSTANCE_DIR_LEN)


def is_hashed_instance_dir_name(name: str) -> bool:
    return name.startswith(_HASHED_PREFIX)


def parse_instance_dir_name(name: str) -> tuple[str, str]:
    """``(agent_name, instance_key)`` of a name made by :func:`instance_dir_name`.

    Raises ``ValueError`` for foreign names, non-canonical encodings and hashed (over-long) names, whose
    pair can only be read from the instance's ``metadata.json``.
    """
    if is_hashed_instance_dir_name(name):
        raise ValueError(f"{name!r} is a hashed instance directory; read its metadata.json")
    if len(name) > MAX_INSTANCE_DIR_LEN:
        raise ValueError(f"{name!r} is longer than {MAX_INSTANCE_DIR_LEN} characters")
    # Find the separator: scan escapes so that "_5f" followed by "_" is never mistaken for "__".
    i = 0
    n = len(name)
    while i < n:
        if name[i] == "_":
            if name.startswith(_SEPARATOR, i):
                agent = decode_component(name[:i])
                key = decode_component(name[i + 2 :])
                return agent, key
            i += 3
        else:
            i += 1
    raise ValueError(f"{name!r} is not an instance directory name (no '__' separator)")


def component_file_name(name: str, suffix: str) -> str:
    """A safe file name for ``name`` (e.g. an extension name) with ``suffix`` (e.g. ``.json``)."""
    encoded = encode_component(name) or "_"
    # An empty name encodes to "", which is not a valid file name: "_" alone is not a canonical
    # encoding of anything, so it cannot collide.
    if len(encoded) + len(suffix) > MAX_COMPONENT_FILE_LEN:
        encoded = _hashed_name(encoded, encoded, MAX_COMPONENT_FILE_LEN - len(suffix))
    return encoded + suffix


__all__ = [
    "MAX_INSTANCE_DIR_LEN",
    "MAX_WORKSPACE_ID_LEN",
    "component_file_name",
    "decode_component",
    "encode_component",
    "instance_dir_name",
    "is_hashed_instance_dir_name",
    "parse_instance_dir_name",
    "resolve_state_root",
    "workspace_id",
]
