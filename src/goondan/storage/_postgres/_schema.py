"""The PostgreSQL store's schema and its versioned migrations.

Why versioned migrations instead of ``CREATE TABLE IF NOT EXISTS``: a later release that changes a
table must know what an existing database holds. ``goondan_schema_version`` records every applied
version; :func:`migrate` applies the missing ones in ONE transaction that first takes a
transaction-level advisory lock, so two nodes starting at once against an empty database never
race (the second waits, then finds everything applied). A database newer than this goondan is
refused (``E_STORE_SCHEMA``) rather than written with assumptions that no longer hold.

Layout (every table keyed by the instance's surrogate id; no foreign keys, which would cost a
row lock on the instance per insert - deletion is explicit and fenced instead):

* ``goondan_workspaces`` - one row per workspace: what bundle/swarm it belongs to (``record``).
* ``goondan_instances`` - one row per instance ever opened, kept as a tombstone after a delete so
  its fencing ``token`` keeps growing: metadata columns (``status`` NULL = no metadata, not
  listed), the lease ``holder`` ``{pid, host, since, token}``, the paused-turn record.
* ``goondan_messages`` - the committed base, ``seq`` 0..n-1.
* ``goondan_events`` - message events of the turn in progress (residual after a crash).
* ``goondan_runtime_events`` - observability records, append-only.
* ``goondan_extension_state``, ``goondan_attachments`` (content-addressed per instance, bytea).

JSON is kept in ``json`` columns (the text as written, validated by the server; ``jsonb`` would
reject the ``\\u0000`` a message may legitimately contain). Two functions fence writers inside
the server: ``goondan_fence`` (row lock FOR UPDATE + token compare, raising SQLSTATE ``GDN01``)
for commits, and ``goondan_append_event`` (FOR SHARE + compare + insert) for event appends.
"""

from __future__ import annotations

from typing import Any

#: Raised by the fencing functions when the caller's token is no longer the instance's.
SQLSTATE_LEASE_LOST = "GDN01"

#: Key of the transaction-level advisory lock that serialises migrations (two-int form, so it
#: can never collide with the single-bigint instance lease locks).
MIGRATION_LOCK = (0x67646E, 1)

_V1 = """
CREATE TABLE goondan_workspaces (
    workspace_id text PRIMARY KEY,
    record json,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE goondan_instances (
    id bigserial PRIMARY KEY,
    workspace_id text NOT NULL,
    agent_name text NOT NULL,
    instance_key text NOT NULL,
    status text,
    created_at text,
    updated_at text,
    token bigint NOT NULL DEFAULT 0,
    holder json,
    paused_turn json,
    UNIQUE (workspace_id, agent_name, instance_key)
);
CREATE TABLE goondan_messages (
    instance_id bigint NOT NULL,
    seq integer NOT NULL,
    record json NOT NULL,
    PRIMARY KEY (instance_id, seq)
);
CREATE TABLE goondan_events (
    instance_id bigint NOT NULL,
    seq bigserial,
    record json NOT NULL,
    PRIMARY KEY (instance_id, seq)
);
CREATE TABLE goondan_runtime_events (
    instance_id bigint NOT NULL,
    seq bigserial,
    record json NOT NULL,
    PRIMARY KEY (instance_id, seq)
);
CREATE TABLE goondan_extension_state (
    instance_id bigint NOT NULL,
    name text NOT NULL,
    value json NOT NULL,
    PRIMARY KEY (instance_id, name)
);
CREATE TABLE goondan_attachments (
    instance_id bigint NOT NULL,
    id text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (instance_id, id)
);
CREATE FUNCTION goondan_fence(p_id bigint, p_token bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE current bigint;
BEGIN
    SELECT token INTO current FROM goondan_instances WHERE id = p_id FOR UPDATE;
    IF current IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION 'goondan: lease lost (token %, now %)', p_token, current
            USING ERRCODE = 'GDN01';
    END IF;
END $$;
CREATE FUNCTION goondan_append_event(p_id bigint, p_token bigint, p_record json) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM goondan_instances WHERE id = p_id AND token = p_token FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'goondan: lease lost (token %)', p_token USING ERRCODE = 'GDN01';
    END IF;
    INSERT INTO goondan_events (instance_id, record) VALUES (p_id, p_record);
END $$;
"""

# v2: one round trip per store call on the hot path. Each function runs as ONE statement in an
# autocommit transaction: the fold (fence + base + events), and the observability writes that
# turn synchronous_commit off for their own transaction only (set_config(..., true)).
_V2 = """
CREATE FUNCTION goondan_commit(p_id bigint, p_token bigint, p_delta boolean, p_offset integer,
                               p_records text[], p_clear_events boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM goondan_fence(p_id, p_token);
    IF NOT p_delta THEN
        DELETE FROM goondan_messages WHERE instance_id = p_id;
    END IF;
    INSERT INTO goondan_messages (instance_id, seq, record)
        SELECT p_id, p_offset + o - 1, r::json FROM unnest(p_records) WITH ORDINALITY AS t(r, o);
    IF p_clear_events THEN
        DELETE FROM goondan_events WHERE instance_id = p_id;
    END IF;
END $$;
CREATE FUNCTION goondan_runtime_event(p_id bigint, p_record json) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO goondan_runtime_events (instance_id, record) VALUES (p_id, p_record);
END $$;
CREATE FUNCTION goondan_set_status(p_id bigint, p_status text, p_now text, p_durable boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT p_durable THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    UPDATE goondan_instances SET status = p_status, created_at = coalesce(created_at, p_now), updated_at = p_now
        WHERE id = p_id;
END $$;
"""

#: version -> SQL. Append only; never edit a released migration.
MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2}
LATEST = max(MIGRATIONS)


def migrate(conn: Any) -> list[int]:
    """Bring the database to :data:`LATEST` and return the versions applied now (empty when it
    already was). ``conn`` is an autocommit psycopg connection."""
    from ...errors import StorageError

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", MIGRATION_LOCK)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS goondan_schema_version ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT coalesce(max(version), 0) FROM goondan_schema_version").fetchone()
        current = int(row[0]) if row else 0
        if current > LATEST:
            raise StorageError(
                "E_STORE_SCHEMA",
                f"the database's goondan schema is version {current}, newer than this goondan understands "
                f"(up to {LATEST})",
                suggestion="Upgrade goondan on this machine to the version the other nodes run.",
            )
        applied = []
        for version in sorted(v for v in MIGRATIONS if v > current):
            conn.execute(MIGRATIONS[version])
            conn.execute("INSERT INTO goondan_schema_version (version) VALUES (%s)", (version,))
            applied.append(version)
    return applied


__all__ = ["LATEST", "MIGRATIONS", "MIGRATION_LOCK", "SQLSTATE_LEASE_LOST", "migrate"]
