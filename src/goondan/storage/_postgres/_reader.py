"""A read-only view of one instance in PostgreSQL (``WorkspaceStore.reader``), for viewers
(Studio, ``gdn logs``) running beside a live writer on another node.

No lease, no writes, nothing created. Each call reads in one REPEATABLE READ transaction, so the
base and the pending events come from one snapshot: a commit is seen entirely or not at all (the
filesystem reader has to cope with seeing a turn in both files; here it cannot happen). Pages
are index range scans on ``(instance_id, seq)``; the version is a handful of index lookups.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import orjson

from ...messages import Message, event_from_record
from .._reader import fold_events

if TYPE_CHECKING:
    import psycopg

    from ._db import Database

_VERSION = """
SELECT i.xmin::text,
  (SELECT max(seq) FROM goondan_messages WHERE instance_id = i.id),
  (SELECT xmin::text FROM goondan_messages WHERE instance_id = i.id AND seq = 0),
  (SELECT max(seq) FROM goondan_events WHERE instance_id = i.id),
  (SELECT count(*) FROM goondan_events WHERE instance_id = i.id),
  (SELECT max(seq) FROM goondan_runtime_events WHERE instance_id = i.id)
FROM goondan_instances i WHERE i.id = %s
"""


class PostgresInstanceReader:
    """See the module docstring."""

    def __init__(self, db: Database, workspace_id: str, agent_name: str, instance_key: str) -> None:
        self._db = db
        self._key = (workspace_id, agent_name, instance_key)
        self._id: int | None = None

    @property
    def agent_name(self) -> str:
        return self._key[1]

    @property
    def instance_key(self) -> str:
        return self._key[2]

    def _instance_id(self, conn: psycopg.Connection[Any]) -> int | None:
        if self._id is None:
            row = conn.execute(
                "SELECT id FROM goondan_instances WHERE workspace_id = %s AND agent_name = %s AND instance_key = %s",
                self._key,
            ).fetchone()
            self._id = None if row is None else int(row[0])
        return self._id

    def metadata(self) -> dict[str, Any] | None:
        with self._db.connection("read metadata") as conn:
            instance_id = self._instance_id(conn)
            if instance_id is None:
                return None
            row = conn.execute(
                "SELECT status, created_at, updated_at FROM goondan_instances WHERE id = %s", (instance_id,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        return {
            "agentName": self.agent_name,
            "instanceKey": self.instance_key,
            "status": row[0],
            "createdAt": row[1],
            "updatedAt": row[2],
        }

    def version(self) -> Hashable:
        with self._db.connection("read the instance version") as conn:
            instance_id = self._instance_id(conn)
            if instance_id is None:
                return None
            row = conn.execute(_VERSION, (instance_id,)).fetchone()
        return None if row is None else tuple(row)

    def _snapshot(self, offset: int, limit: int | None) -> tuple[int, list[Message], list[dict[str, Any]]]:
        """``(message count, the page, pending event records)`` from one snapshot."""
        with self._db.connection("read the conversation") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            instance_id = self._instance_id(conn)
            if instance_id is None:
                return 0, [], []
            events = [
                orjson.loads(r[0])
                for r in conn.execute(
                    "SELECT record::text FROM goondan_events WHERE instance_id = %s ORDER BY seq", (instance_id,)
                ).fetchall()
            ]
            row = conn.execute(
                "SELECT coalesce(max(seq) + 1, 0) FROM goondan_messages WHERE instance_id = %s", (instance_id,)
            ).fetchone()
            n_base = int(row[0]) if row else 0
            only_appends = all(e.get("type") == "append" for e in events)
            if only_appends:
                # the page is a slice of base followed by the appended messages: read only that
                total = n_base + len(events)
                stop = total if limit is None else min(total, offset + max(0, limit))
                page: list[Message] = []
                if offset < n_base and offset < stop:
                    rows = conn.execute(
                        "SELECT record::text FROM goondan_messages WHERE instance_id = %s AND seq >= %s AND seq < %s"
                        " ORDER BY seq",
                        (instance_id, offset, min(stop, n_base)),
                    ).fetchall()
                    page = [Message.from_record(orjson.loads(r[0])) for r in rows]
                first = max(offset, n_base) - n_base
                page.extend(Message.from_record(e["message"]) for e in events[first : max(first, stop - n_base)])
                return total, page, events
            rows = conn.execute(
                "SELECT record::text FROM goondan_messages WHERE instance_id = %s ORDER BY seq", (instance_id,)
            ).fetchall()
        everything = fold_events(
            [Message.from_record(orjson.loads(r[0])) for r in rows], [event_from_record(e) for e in events]
        )
        end = None if limit is None else offset + max(0, limit)
        return len(everything), everything[offset:end], events

    def message_count(self) -> int:
        return self._snapshot(0, 0)[0]

    def messages(self, offset: int = 0, limit: int | None = None) -> list[Message]:
        return self._snapshot(max(0, offset), limit)[1]

    def message_events(self) -> list[dict[str, Any]]:
        with self._db.connection("read pending events") as conn:
            instance_id = self._instance_id(conn)
            if instance_id is None:
                return []
            rows = conn.execute(
                "SELECT record::text FROM goondan_events WHERE instance_id = %s ORDER BY seq", (instance_id,)
            ).fetchall()
        return [orjson.loads(r[0]) for r in rows]

    def runtime_events(self, after: int = 0, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """Events after the cursor (a ``seq``: sequences only grow, so a fresh start's new events
        come after any old cursor)."""
        with self._db.connection("read runtime events") as conn:
            instance_id = self._instance_id(conn)
            if instance_id is None:
                return [], after
            rows = conn.execute(
                "SELECT seq, record::text FROM goondan_runtime_events WHERE instance_id = %s AND seq > %s"
                " ORDER BY seq LIMIT %s",
                (instance_id, after, limit),
            ).fetchall()
        out: list[dict[str, Any]] = []
        cursor = after
        for seq, text in rows:
            cursor = int(seq)
            value = orjson.loads(text)
            if isinstance(value, dict):
                out.append(value)
        return out, cursor

    def close(self) -> None:
        self._id = None


__all__ = ["PostgresInstanceReader"]
