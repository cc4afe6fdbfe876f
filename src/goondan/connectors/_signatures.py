"""Request signature checks used by the built-in connectors.

Every comparison goes through :func:`hmac.compare_digest` so that the time taken does not reveal how
many leading characters of a forged signature were right. Timestamped schemes (Slack, Discord) also
reject requests outside a window around "now", which is what makes a captured request useless later.
"""

from __future__ import annotations

import hashlib
import hmac
import time

DEFAULT_WINDOW_SECONDS = 300


def hmac_sha256_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify_hmac_sha256(secret: str, body: bytes, signature: str | None, *, prefix: str = "sha256=") -> bool:
    """True when ``signature`` (hex, optionally ``sha256=``-prefixed) is the HMAC-SHA256 of ``body``."""
    if not secret or not signature:
        return False
    sig = signature.strip()
    if prefix and sig.startswith(prefix):
        sig = sig[len(prefix) :]
    expected = hmac_sha256_hex(secret, body)
    return hmac.compare_digest(expected.encode("ascii"), sig.lower().encode("ascii", "replace"))


def within_window(timestamp: str | None, *, now: float | None = None, window: int = DEFAULT_WINDOW_SECONDS) -> bool:
    """True when ``timestamp`` (unix seconds as text) lies within ``window`` seconds of ``now``."""
    if not timestamp:
        return False
    try:
        ts = int(timestamp.strip())
    except ValueError:
        return False
    current = time.time() if now is None else now
    return abs(current - ts) <= window


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode("ascii") + b":" + body
    return "v0=" + hmac.new(secret.encode("utf-8"), base, hashlib.sha256).hexdigest()


def verify_slack(
    secret: str,
    timestamp: str | None,
    body: bytes,
    signature: str | None,
    *,
    now: float | None = None,
    window: int = DEFAULT_WINDOW_SECONDS,
) -> bool:
    """Slack's ``v0`` scheme: ``v0=HMAC(secret, "v0:<ts>:<body>")`` and ``ts`` within ±``window`` s."""
    if not secret or not signature or not timestamp or not within_window(timestamp, now=now, window=window):
        return False
    expected = slack_signature(secret, timestamp.strip(), body)
    return hmac.compare_digest(expected.encode("ascii"), signature.strip().encode("ascii", "replace"))


class Ed25519Unavailable(RuntimeError):
    """Raised when no Ed25519 implementation (``cryptography`` or ``pynacl``) is installed."""


def verify_ed25519(public_key_hex: str, message: bytes, signature_hex: str | None) -> bool:
    """Discord's scheme: Ed25519 over ``timestamp + body`` with the application's public key."""
    if not public_key_hex or not signature_hex:
        return False
    try:
        key = bytes.fromhex(public_key_hex.strip())
        sig = bytes.fromhex(signature_hex.strip())
    except ValueError:
        return False
    if len(key) != 32 or len(sig) != 64:
        return False
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        return _verify_ed25519_nacl(key, message, sig)
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(sig, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def _verify_ed25519_nacl(key: bytes, message: bytes, sig: bytes) -> bool:
    try:
        from nacl.exceptions import BadSignatureError  # type: ignore[import-not-found,unused-ignore]
        from nacl.signing import VerifyKey  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise Ed25519Unavailable(
            "Discord signature checks need Ed25519: pip install cryptography (or pynacl)"
        ) from None
    try:
        VerifyKey(key).verify(message, sig)
    except (BadSignatureError, ValueError):
        return False
    return True


def content_key(*parts: bytes) -> str:
    """A replay-guard key for the signed content ``parts`` (e.g. timestamp and body).

    Keys must come from what the signature check verified, never from the signature header's text:
    one valid signature has many accepted spellings (``sha256=`` or not, upper- or lower-case hex,
    surrounding blanks, bytes separated by spaces), and keying on the spelling let every re-spelling
    through as a "new" request. Each part is length-prefixed so ``("ab", "c")`` and ``("a", "bc")``
    differ.
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


class ReplayGuard:
    """Remembers recently seen request identifiers (content keys, delivery ids) for ``ttl`` seconds.

    A timestamp window alone lets an attacker resend a captured request until it expires; remembering
    what was accepted inside the window closes that gap. Feed it :func:`content_key` of the verified
    content, not raw header values.
    """

    def __init__(self, ttl: float = DEFAULT_WINDOW_SECONDS * 2, limit: int = 10_000) -> None:
        self.ttl = ttl
        self.limit = limit
        self._seen: dict[str, float] = {}

    def seen_before(self, key: str, *, now: float | None = None) -> bool:
        """Record ``key``; True when it was already recorded within ``ttl``."""
        current = time.monotonic() if now is None else now
        if len(self._seen) >= self.limit:
            cutoff = current - self.ttl
            self._seen = {k: t for k, t in self._seen.items() if t >= cutoff}
            while len(self._seen) >= self.limit:
                self._seen.pop(next(iter(self._seen)))
        previous = self._seen.get(key)
        if previous is not None and current - previous <= self.ttl:
            return True
        self._seen[key] = current
        return False


__all__ = [
    "DEFAULT_WINDOW_SECONDS",
    "Ed25519Unavailable",
    "ReplayGuard",
    "content_key",
    "hmac_sha256_hex",
    "slack_signature",
    "verify_ed25519",
    "verify_hmac_sha256",
    "verify_slack",
    "within_window",
]
