"""One SDK client per provider configuration per event loop, shared by every agent instance.

An SDK client owns an HTTP connection pool; sharing it means a swarm of agents on the same Model
reuses warm TLS connections instead of opening one pool per instance. Clients are bound to the event
loop they were first used on (their connections are), hence the per-loop map; adapters hold a
reference while alive and the last ``release`` closes the client, so nothing outlives its users.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Any


@dataclasses.dataclass(slots=True)
class _Entry:
    client: Any
    close: Callable[[Any], Awaitable[None]]
    users: int = 0


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, _Entry]] = weakref.WeakKeyDictionary()


def secret_fingerprint(secret: str | None) -> str:
    """A key for the pool that does not keep the secret itself in a dict key."""
    return hashlib.sha256((secret or "").encode()).hexdigest()[:16]


def acquire(key: Hashable, make: Callable[[], Any], close: Callable[[Any], Awaitable[None]]) -> Any:
    pool = _POOLS.setdefault(asyncio.get_running_loop(), {})
    entry = pool.get(key)
    if entry is None:
        entry = _Entry(make(), close)
        pool[key] = entry
    entry.users += 1
    return entry.client


async def release(key: Hashable) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    pool = _POOLS.get(loop)
    entry = pool.get(key) if pool is not None else None
    if entry is None or pool is None:
        return
    entry.users -= 1
    if entry.users <= 0:
        del pool[key]
        await entry.close(entry.client)


def live_clients() -> int:
    """How many clients the current loop holds (for tests and diagnostics)."""
    try:
        return len(_POOLS.get(asyncio.get_running_loop(), {}))
    except RuntimeError:
        return 0
