"""A direct stream the agent process cannot open (the connector's socket refuses, its address is too
long) falls back to the usual route: the turn runs, every text delta reaches the client in order
through gdn run, the reply is not held, and one warning says so. The deltas were lost (the client got
only the final reply) and nothing above info level said why. Real pieces, as in test_direct_streams:
a Runtime with agent processes, the real connector supervisor and host running the webhook in
``replyMode: stream``, an httpx client reading the Server-Sent Events."""

from __future__ import annotations

import asyncio
import logging

import pytest
from test_direct_streams import deltas, swarm

PIECES = [f"cats-{i} " for i in range(5)]

UNOPENABLE = {
    "refused": "@goondan-no-such-connector",  # nothing listens on that abstract name
    "abstract name too long": "@" + "x" * 200,
    "path too long": "/tmp/" + "x" * 200,
}


@pytest.mark.parametrize("address", sorted(UNOPENABLE))
def test_a_direct_stream_that_cannot_be_opened_sends_its_deltas_through_gdn_run(
    tmp_path, caplog: pytest.LogCaptureFixture, address: str
) -> None:
    caplog.set_level(logging.INFO)

    async def main() -> None:
        async with swarm(tmp_path, "process") as s:
            assert s.proc._child is not None and s.proc._child.deltas.startswith("@")
            s.proc._child.deltas = UNOPENABLE[address]
            for key in ("k1", "k1", "k2"):  # twice in one agent process, then in another
                events = await asyncio.wait_for(s.ask("cats", key), 30)
                # every delta, in order, none twice (the SSE writer may merge deltas that queue)
                assert "".join(deltas(events)) == "".join(PIECES), events
                assert events[-1] == ("done", {"ok": True, "text": "".join(PIECES), "finishReason": "text_response"})
            # the usual route without a subscription: no host listener, nothing left registered
            assert s.proc._off_deltas is None
            orch = s.rt.executor.orchestrator
            assert orch is not None and not orch.delta_listeners and not orch.direct_fallbacks
            assert not s.rt.executor._direct

    asyncio.run(main())
    said = [r for r in caplog.records if "direct stream to the connector at" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING, logging.INFO, logging.WARNING], said  # one per process
    assert "cannot be opened" in said[0].getMessage() and "go through gdn run" in said[0].getMessage()


def test_host_listeners_and_the_fallback_each_get_every_delta_once(tmp_path) -> None:
    async def main() -> None:
        async with swarm(tmp_path, "process") as s:
            seen: list[str] = []
            s.rt.on_text_delta(lambda payload: seen.append(payload["delta"]))
            assert s.proc._child is not None
            s.proc._child.deltas = UNOPENABLE["refused"]
            events = await asyncio.wait_for(s.ask("cats", "k1"), 30)
            assert "".join(deltas(events)) == "".join(PIECES), events
            assert seen == PIECES  # unmarked: the fallback's copies are for the connector only
            assert all("directStream" not in str(d) for d in seen)

    asyncio.run(main())
