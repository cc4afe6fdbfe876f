"""What Studio shows, read through the store's read-only readers (no starlette here).

Everything goes through :class:`~goondan.storage.StoreBackend` / :class:`~goondan.storage.InstanceReader`
so the same views work on the filesystem, in-memory and PostgreSQL stores, and never take the
single-writer lease a live run holds. Each instance Studio has looked at gets an
:class:`InstanceView` that tails its runtime events from the last cursor (never re-reading the whole
file) whenever the reader's cheap ``version()`` changed, and keeps them indexed by trace id, so a trace
is joined across instances without reading them again. The instance list reads every instance's
metadata (one small record each) but computes turn and message counts only for the page shown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import GoondanError
from ..storage import InstanceReader, StoreBackend, WorkspaceStore
from ..storage._lease import shown_status
from ._conversation import LOOK_AROUND, conversation_rows
from ._trace import AGENT_TOOL_PREFIX, build_trace

MAX_PAGE = 500
LIST_TTL = 1.0  # seconds an instance listing is reused (the list view polls it)


def bad_request(message: str, suggestion: str) -> GoondanError:
    return GoondanError("E_STUDIO_BAD_REQUEST", message, suggestion=suggestion)


@dataclass(slots=True)
class BundleInfo:
    """What ``gdn studio PATH`` adds: which workspaces belong to the bundle, and its swarm graph."""

    root: str
    package: str | None
    agents: list[str] = field(default_factory=list)
    entry_agents: list[str] = field(default_factory=list)
    connectors: list[dict[str, Any]] = field(default_factory=list)

    def owns(self, record: Mapping[str, Any] | None) -> bool:
        if record is None:
            return False
        if self.package and record.get("package") == self.package:
            return True
        return record.get("bundle") == self.root


def _ref_name(ref: object) -> str | None:
    """The name of a reference written any of the ways a bundle may (``Agent/x``, ``{ref: ...}``,
    ``{kind, name}``)."""
    if isinstance(ref, dict):
        inner = ref.get("ref")
        return _ref_name(inner) if inner is not None else (str(ref["name"]) if "name" in ref else None)
    if isinstance(ref, str):
        return ref.split("/", 1)[-1]
    return None


class _EveryVariableSet(Mapping[str, str]):
    """The environment Studio loads a bundle with: every variable counts as set. Studio shows the
    bundle's structure and never runs it, so the secrets its Connections and Models read (a
    signing secret, an API key, the port) need not be here: ``gdn studio ./bundle`` on a
    workstation without them refused to start with E_CONFIG_ENV_MISSING."""

    def __init__(self, real: Mapping[str, str]) -> None:
        self._real = real

    def __getitem__(self, key: str) -> str:
        value = self._real.get(key)
        return value if value else "<set where the bundle runs>"

    def __iter__(self) -> Any:
        return iter(self._real)

    def __len__(self) -> int:
        return len(self._real)


def bundle_info(path: str | Path) -> BundleInfo:
    """Load the bundle at ``path`` (raises its ``ConfigError``) and keep what the views need."""
    import os

    from ..bundle import load_bundle_for_requests

    # Connections are not resolved (their config is checked against its connector's schema, and a
    # stand-in value is no port); Models and the rest read the stand-in values
    bundle = load_bundle_for_requests(path, env=_EveryVariableSet(os.environ))
    info = BundleInfo(str(Path(bundle.root).resolve()), getattr(bundle, "package_name", None))
    for swarm in bundle.of_kind("Swarm"):
        spec = swarm.raw.get("spec") or {}
        for item in spec.get("agents") or []:
            name = _ref_name(item)
            if name and name not in info.agents:
                info.agents.append(name)
        entry = _ref_name(spec.get("entryAgent"))
        if entry and entry not in info.entry_agents:
            info.entry_agents.append(entry)
    default_entry = info.entry_agents[0] if info.entry_agents else None
    for conn in bundle.of_kind("Connection"):
        spec = conn.raw.get("spec") or {}
        routes = []
        for rule in ((spec.get("ingress") or {}).get("rules")) or [{}]:
            match = rule.get("match") or {}
            route = rule.get("route") or {}
            routes.append({"event": match.get("event"), "agent": _ref_name(route.get("agentRef")) or default_entry})
        info.connectors.append(
            {"connection": conn.name, "connector": _ref_name(spec.get("connectorRef")), "routes": routes}
        )
    return info


class InstanceView:
    """One instance as Studio follows it: its reader, the runtime events read so far (tailed from a
    cursor) and what they say about its turns. Thread-safe (handlers run in a thread pool)."""

    def __init__(self, workspace: str, reader: InstanceReader) -> None:
        self.workspace = workspace
        self.reader = reader
        self.lock = threading.Lock()
        self.version: Hashable = object()
        self.cursor = 0
        self.events: list[dict[str, Any]] = []
        self.by_trace: dict[str, list[dict[str, Any]]] = {}
        self.turns: dict[str, dict[str, Any]] = {}
        self.parent_of_turn: dict[str, str] = {}  # callee turn span -> caller tool span
        self.message_count = 0

    def refresh(self) -> bool:
        """Catch up with the store if anything changed; ``True`` when it did."""
        with self.lock:
            version = self.reader.version()
            if version == self.version:
                return False
            self.version = version
            events, cursor = self.reader.runtime_events(self.cursor)
            if cursor < self.cursor:  # a fresh start cleared them: start over
                self.events, self.by_trace, self.turns, self.parent_of_turn = [], {}, {}, {}
            self.cursor = cursor
            for event in events:
                self._ingest(event)
            self.message_count = self.reader.message_count()
            return True

    def _ingest(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        trace = event.get("traceId")
        if isinstance(trace, str):
            self.by_trace.setdefault(trace, []).append(event)
        etype = event.get("type")
        turn_id = event.get("turnId")
        if not isinstance(etype, str) or not isinstance(turn_id, str) or not etype.startswith("turn."):
            return
        turn = self.turns.setdefault(turn_id, {"turnId": turn_id, "status": "running"})
        turn["traceId"] = event.get("traceId")
        if etype == "turn.started":
            turn["startedAt"] = event.get("timestamp")
            parent = event.get("parentSpanId")
            if isinstance(parent, str):
                self.parent_of_turn[str(event.get("spanId"))] = parent
            return
        turn["endedAt"] = event.get("timestamp")
        turn["duration"] = event.get("duration")
        turn["stepCount"] = event.get("stepCount")
        turn["tokenUsage"] = event.get("tokenUsage")
        if etype == "turn.failed":
            turn["status"] = "error"
            turn["error"] = event.get("error") or {"message": event.get("errorMessage")}
            if isinstance(turn["error"], dict) and "message" not in turn["error"]:
                turn["error"] = {**turn["error"], "message": event.get("errorMessage")}
        else:
            turn["status"] = "cancelled" if event.get("cancelled") else "ok"

    def summary(self) -> dict[str, Any]:
        meta = self.reader.metadata() or {}
        last_turn = next(reversed(self.turns.values()), None) if self.turns else None
        return {
            "workspace": self.workspace,
            "agent": self.reader.agent_name,
            "key": self.reader.instance_key,
            "status": meta.get("status", "unknown"),
            "createdAt": meta.get("createdAt"),
            "updatedAt": meta.get("updatedAt"),
            "turns": len(self.turns),
            "messages": self.message_count,
            "lastTurn": last_turn,
        }


class StudioData:
    """The read-only model behind the HTTP API (one per server)."""

    def __init__(self, backend: StoreBackend, *, bundle: BundleInfo | None = None) -> None:
        self.backend = backend
        self.bundle = bundle
        self._lock = threading.Lock()
        self._workspaces: dict[str, WorkspaceStore] = {}
        self._views: dict[tuple[str, str, str], InstanceView] = {}
        self._listing: tuple[float, list[dict[str, Any]]] | None = None

    # ------------------------------------------------------------------ workspaces and instances

    def workspace(self, workspace_id: str) -> WorkspaceStore:
        with self._lock:
            ws = self._workspaces.get(workspace_id)
            if ws is None:
                ws = self._workspaces[workspace_id] = self.backend.workspace(workspace_id)
            return ws

    def workspaces(self) -> list[dict[str, Any]]:
        out = []
        for wid in self.backend.list_workspaces():
            record = self.workspace(wid).record()
            if self.bundle is not None and not self.bundle.owns(record):
                continue
            out.append(
                {
                    "id": wid,
                    "bundle": (record or {}).get("bundle"),
                    "package": (record or {}).get("package"),
                    "swarm": (record or {}).get("swarm"),
                }
            )
        return out

    def _all_instances(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        cached = self._listing
        if cached is not None and now - cached[0] < LIST_TTL:
            return cached[1]
        rows: list[dict[str, Any]] = []
        for ws in self.workspaces():
            label = ws["package"] or (Path(ws["bundle"]).name if ws["bundle"] else ws["id"])
            for info in self._instances_of(ws["id"]):
                row = {
                    "workspace": ws["id"],
                    "bundle": label,
                    "agent": info.agent_name,
                    "key": info.instance_key,
                    "status": shown_status(info),  # `interrupted`, not a stale `processing`
                    "createdAt": info.created_at.isoformat().replace("+00:00", "Z"),
                    "updatedAt": info.updated_at.isoformat().replace("+00:00", "Z"),
                    "_sort": info.updated_at.timestamp(),
                }
                problem = getattr(info, "problem", None)
                if problem:
                    row["problem"] = problem
                rows.append(row)
        rows.sort(key=lambda r: (-r["_sort"], r["agent"], r["key"]))
        self._listing = (now, rows)
        return rows

    def instances(self, *, workspace: str | None, query: str | None, offset: int, limit: int) -> dict[str, Any]:
        """A page of instances, most recently active first, with live counts for the page only."""
        rows = self._all_instances()
        if workspace:
            rows = [r for r in rows if r["workspace"] == workspace]
        if query:
            q = query.lower()
            rows = [r for r in rows if q in r["agent"].lower() or q in r["key"].lower() or q in r["bundle"].lower()]
        page = rows[offset : offset + limit]
        items = []
        for row in page:
            view = self.view(row["workspace"], row["agent"], row["key"])
            view.refresh()
            summary = view.summary()
            item = {**{k: v for k, v in row.items() if k != "_sort"}, **summary, "bundle": row["bundle"]}
            if "problem" in row:  # no metadata to read: what the listing made of the directory stands
                item.update(status=row["status"], createdAt=row["createdAt"], updatedAt=row["updatedAt"])
            elif row["status"] == "interrupted" and item["status"] == "processing":
                item["status"] = "interrupted"  # the stored status outlived the process that ran the turn
            items.append(item)
        return {"total": len(rows), "offset": offset, "items": items}

    def listing_signature(self, workspace: str | None) -> int:
        rows = self._all_instances()
        return hash(
            tuple(
                (r["workspace"], r["agent"], r["key"], r["status"], r["updatedAt"])
                for r in rows
                if not workspace or r["workspace"] == workspace
            )
        )

    def view(self, workspace: str, agent: str, key: str) -> InstanceView:
        ident = (workspace, agent, key)
        with self._lock:
            view = self._views.get(ident)
        if view is None:
            if workspace not in self.backend.list_workspaces():
                raise GoondanError(
                    "E_STUDIO_NOT_FOUND",
                    f"no workspace {workspace!r} in this store",
                    suggestion="Pick an instance from the list; check --state-root / --store.",
                )
            reader = self.workspace(workspace).reader(agent, key)
            with self._lock:
                view = self._views.setdefault(ident, InstanceView(workspace, reader))
        return view

    def instance(self, workspace: str, agent: str, key: str) -> dict[str, Any]:
        view = self.view(workspace, agent, key)
        view.refresh()
        out = view.summary()
        if out["status"] == "processing":  # as the list shows it: `interrupted` when nobody runs that turn
            row = next(
                (r for r in self._all_instances() if (r["workspace"], r["agent"], r["key"]) == (workspace, agent, key)),
                None,
            )
            if row is not None and row["status"] == "interrupted":
                out["status"] = "interrupted"
        if out["status"] == "unknown" and not out["turns"] and not out["messages"]:
            raise GoondanError(
                "E_STUDIO_NOT_FOUND",
                f"no instance {agent}:{key} in workspace {workspace!r}",
                suggestion="Pick an instance from the list; it may have been deleted.",
            )
        return out

    # ------------------------------------------------------------------ conversation

    def conversation(self, workspace: str, agent: str, key: str, *, offset: int | None, limit: int) -> dict[str, Any]:
        """Rows ``[offset, offset+limit)``; ``offset=None`` is the last page (where a reader starts)."""
        view = self.view(workspace, agent, key)
        reader = view.reader
        with view.lock:
            total = reader.message_count()
            if offset is None:
                offset = max(0, total - limit)
            lo = max(0, offset - LOOK_AROUND)
            window = reader.messages(lo, offset - lo + limit + LOOK_AROUND)
            pending = reader.message_events()
        rows = conversation_rows(window, lo, offset, limit)
        return {"total": total, "offset": offset, "rows": rows, "pendingEvents": pending}

    # ------------------------------------------------------------------ traces

    def turns(self, workspace: str, agent: str, key: str, *, offset: int, limit: int) -> dict[str, Any]:
        """The instance's turns, newest first."""
        view = self.view(workspace, agent, key)
        view.refresh()
        turns = list(reversed(view.turns.values()))
        return {"total": len(turns), "offset": offset, "items": turns[offset : offset + limit]}

    def _instances_of(self, workspace: str) -> list[Any]:
        """The workspace's instances, with those whose metadata.json is corrupt (file store: listed
        with status ``unreadable`` and their ``problem``; their conversation and events are intact, and
        an instance left out would look lost, as in ``gdn instance list``)."""
        store = self.workspace(workspace)
        infos: list[Any] = list(store.list_instances())
        unreadable = getattr(store, "unreadable_instances", None)
        if unreadable is not None:
            infos.extend(unreadable())
        return infos

    def _workspace_views(self, workspace: str) -> list[InstanceView]:
        views = []
        for info in self._instances_of(workspace):
            view = self.view(workspace, info.agent_name, info.instance_key)
            view.refresh()
            views.append(view)
        return views

    def trace(self, workspace: str, trace_id: str) -> dict[str, Any]:
        """Every span of ``trace_id`` in any instance of the workspace, as one tree."""
        events: list[dict[str, Any]] = []
        for view in self._workspace_views(workspace):
            with view.lock:
                events.extend(view.by_trace.get(trace_id, ()))
        if not events:
            raise GoondanError(
                "E_STUDIO_NOT_FOUND",
                f"no runtime event of trace {trace_id!r} in workspace {workspace!r}",
                suggestion="Pick a turn of an instance; its trace id is in the turn list.",
            )
        return build_trace(events)

    # ------------------------------------------------------------------ swarm graph

    def graph(self, workspace: str) -> dict[str, Any]:
        """Agents, the calls between them (count, mean latency, errors) from runtime events, and the
        connectors with their routes when Studio was given the bundle."""
        views = self._workspace_views(workspace)
        callee_of: dict[str, str] = {}  # caller tool span -> callee agent
        agents: dict[str, dict[str, Any]] = {}
        for view in views:
            agent = view.reader.agent_name
            node = agents.setdefault(agent, {"id": agent, "instances": 0, "turns": 0})
            node["instances"] += 1
            node["turns"] += len(view.turns)
            with view.lock:
                for parent in view.parent_of_turn.values():
                    callee_of[parent] = agent
        edges: dict[tuple[str, str], dict[str, Any]] = {}
        for view in views:
            caller = view.reader.agent_name
            with view.lock:
                done = [e for e in view.events if e.get("type") in ("tool.completed", "tool.failed")]
            for event in done:
                tool = str(event.get("toolName", ""))
                if not tool.startswith(AGENT_TOOL_PREFIX):
                    continue
                callee = callee_of.get(str(event.get("spanId")))
                if callee is None:
                    continue
                edge = edges.setdefault(
                    (caller, callee),
                    {"from": caller, "to": callee, "count": 0, "errors": 0, "totalMs": 0.0, "tools": []},
                )
                edge["count"] += 1
                edge["totalMs"] += float(event.get("duration") or 0)
                if event.get("type") == "tool.failed" or event.get("status") == "error":
                    edge["errors"] += 1
                if tool not in edge["tools"]:
                    edge["tools"].append(tool)
        out_edges = []
        for edge in edges.values():
            edge["meanMs"] = round(edge.pop("totalMs") / edge["count"], 1) if edge["count"] else 0.0
            out_edges.append(edge)
        connectors: list[dict[str, Any]] = []
        if self.bundle is not None:
            for name in self.bundle.agents:
                agents.setdefault(name, {"id": name, "instances": 0, "turns": 0})
            connectors = self.bundle.connectors
        for name in self.bundle.entry_agents if self.bundle is not None else []:
            agents[name]["entry"] = True
        return {"agents": sorted(agents.values(), key=lambda a: a["id"]), "edges": out_edges, "connectors": connectors}

    def close(self) -> None:
        with self._lock:
            for view in self._views.values():
                view.reader.close()
            for ws in self._workspaces.values():
                ws.close()
            self._views.clear()
            self._workspaces.clear()


__all__ = ["MAX_PAGE", "BundleInfo", "InstanceView", "StudioData", "bad_request", "bundle_info"]
