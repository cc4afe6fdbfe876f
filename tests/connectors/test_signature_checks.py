"""Signature helpers: HMAC-SHA256, Slack v0 with its time window, Ed25519, replay memory."""

from __future__ import annotations

import hashlib
import hmac

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from goondan.connectors import ReplayGuard, slack_signature, verify_ed25519, verify_hmac_sha256, verify_slack


def test_hmac_accepts_hex_with_or_without_prefix_and_rejects_everything_else() -> None:
    body = b'{"a":1}'
    good = hmac.new(b"k", body, hashlib.sha256).hexdigest()
    assert verify_hmac_sha256("k", body, good)
    assert verify_hmac_sha256("k", body, "sha256=" + good)
    assert verify_hmac_sha256("k", body, "sha256=" + good.upper())
    assert not verify_hmac_sha256("k", body + b" ", good)
    assert not verify_hmac_sha256("other", body, good)
    assert not verify_hmac_sha256("k", body, good[:-1])
    assert not verify_hmac_sha256("k", body, None)
    assert not verify_hmac_sha256("", body, good)  # no secret configured never means "accept"
    assert not verify_hmac_sha256("k", body, "sha256=ü" + good[2:])


def test_slack_signature_window_is_300_seconds_either_way() -> None:
    sig = slack_signature("s", "1000", b"body")
    assert verify_slack("s", "1000", b"body", sig, now=1300)
    assert verify_slack("s", "1000", b"body", sig, now=700)
    assert not verify_slack("s", "1000", b"body", sig, now=1301)
    assert not verify_slack("s", "1000", b"body", sig, now=699)
    assert not verify_slack("s", "1001", b"body", sig, now=1000)  # timestamp is part of what is signed
    assert not verify_slack("s", "abc", b"body", sig, now=1000)


def test_ed25519_verifies_timestamp_plus_body() -> None:
    key = Ed25519PrivateKey.generate()
    pub = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    sig = key.sign(b"123" + b"{}").hex()
    assert verify_ed25519(pub, b"123{}", sig)
    assert not verify_ed25519(pub, b"124{}", sig)
    assert not verify_ed25519(pub, b"123{}", "zz")
    assert not verify_ed25519("00", b"123{}", sig)


def test_replay_guard_remembers_within_ttl_only() -> None:
    guard = ReplayGuard(ttl=10, limit=3)
    assert not guard.seen_before("a", now=0)
    assert guard.seen_before("a", now=5)
    assert not guard.seen_before("a", now=16)
    for i, k in enumerate("bcdef"):
        assert not guard.seen_before(k, now=20 + i)
    assert len(guard._seen) <= 3  # bounded memory
