"""Attachments: the bytes of image and file parts, kept beside a conversation by content hash.

Both built-in stores name an attachment by the lowercase hex sha256 of its bytes, so the same image
sent twice is stored once and an id can never point at other bytes than the ones it was made from.
"""

from __future__ import annotations

import hashlib
import re

from ..errors import StorageError

_ID = re.compile(r"^[0-9a-f]{64}$")


def attachment_id(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_id(attachment_id: str) -> str:
    """``attachment_id`` when it is a sha256 id; anything else (a path, ``..``) is refused, so an id
    read from a message can never name a file outside the attachments directory."""
    if not isinstance(attachment_id, str) or not _ID.match(attachment_id):
        raise not_found(attachment_id)
    return attachment_id


def not_found(attachment_id: object) -> StorageError:
    return StorageError(
        "E_ATTACHMENT_NOT_FOUND",
        f"attachment {attachment_id!r} is not stored for this instance",
        suggestion="The conversation refers to an image or file that was deleted; "
        "start the instance fresh (a restart with --fresh) or remove the message.",
    )


__all__ = ["attachment_id", "check_id", "not_found"]
