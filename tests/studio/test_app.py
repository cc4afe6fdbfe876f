"""The Studio JSON API (goondan.studio._app / _data) over the state of a real two-agent run: lead
delegates to helper through the agents tool, helper calls calc__add, each in its own agent process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from studio_testkit import delegation_bundle, run_turns

from goondan.storage import open_store
from goondan.studio import StudioData, bundle_info, create_app


@pytest.fixture(scope="module")
def run_state(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("studio-run")
    bundle = delegation_bundle(root / "bundle")
    run_turns(bundle, root / "state", ["hello"])
    return bundle, root / "state"


@pytest.fixture
def client(run_state: tuple[Path, Path]) -> Iterator[TestClient]:
    bundle, state = run_state
    data = StudioData(open_store(None, state_root=state), bundle=bundle_info(bundle))
    with TestClient(create_app(data, info={"store": "test"})) as c:
        yield c


def get(client: TestClient, path: str, **params: Any) -> Any:
    res = client.get(path, params=params)
    assert res.status_code == 200, res.text
    return res.json()


def workspace(client: TestClient) -> str:
    (ws,) = get(client, "/api/overview")["workspaces"]
    return str(ws["id"])


def test_the_instance_list_shows_both_agents_with_status_turns_messages_and_bundle(client: TestClient) -> None:
    page = get(client, "/api/instances")
    assert page["total"] == 2
    rows = {r["agent"]: r for r in page["items"]}
    for agent in ("lead", "helper"):
        r = rows[agent]
        assert (r["key"], r["status"], r["turns"], r["messages"], r["bundle"]) == (
            "default",
            "idle",
            1,
            4,
            "studio-demo",
        )
        assert r["lastTurn"]["status"] == "ok" and r["updatedAt"] >= r["createdAt"]
    assert get(client, "/api/instances", q="help")["total"] == 1
    assert get(client, "/api/instances", offset=1, limit=1)["items"][0]["agent"] in rows


def test_the_conversation_folds_the_delegated_answer_under_the_agents_tool_call(client: TestClient) -> None:
    conv = get(client, "/api/conversation", workspace=workspace(client), agent="lead", key="default")
    assert conv["total"] == 4 and conv["offset"] == 0 and conv["pendingEvents"] == []
    assert [r["role"] for r in conv["rows"]] == ["user", "assistant", "tool", "assistant"]
    (call,) = conv["rows"][1]["blocks"]
    assert call["toolName"] == "agents__request" and call["input"] == {"target": "helper", "input": "add 2 and 3"}
    assert call["result"]["status"] == "ok" and call["result"]["value"]["response"] == "sum is 5"
    assert conv["rows"][2]["foldedInto"] == 1
    helper = get(client, "/api/conversation", workspace=workspace(client), agent="helper", key="default")
    assert helper["rows"][0]["label"] == "from agent lead"
    assert helper["rows"][1]["blocks"][0]["result"]["value"] == {"sum": 5}
    last = get(client, "/api/conversation", workspace=workspace(client), agent="lead", key="default", limit=1)
    assert (last["offset"], [r["index"] for r in last["rows"]]) == (3, [3])  # no offset: the last page


def test_the_trace_of_a_turn_joins_the_callees_turn_from_the_other_agent_process(client: TestClient) -> None:
    ws = workspace(client)
    (turn,) = get(client, "/api/turns", workspace=ws, agent="lead", key="default")["items"]
    assert turn["status"] == "ok" and turn["stepCount"] == 2 and turn["tokenUsage"]["totalTokens"] == 30
    trace = get(client, "/api/trace", workspace=ws, trace=turn["traceId"])
    assert trace["spanCount"] == 12 and trace["agents"] == ["helper", "lead"]
    spans = trace["spans"]
    request = next(s for s in spans if s["kind"] == "request")
    callee = spans[spans.index(request) + 1]
    assert (callee["kind"], callee["attrs"]["agentName"], callee["parent"]) == ("turn", "helper", request["id"])
    assert callee["depth"] == request["depth"] + 1 == 3
    tool = next(s for s in spans if s["kind"] == "tool")
    assert tool["name"] == "calc__add" and tool["depth"] == 5 and tool["status"] == "ok"
    models = [s for s in spans if s["kind"] == "model"]
    assert len(models) == 4 and {m["attrs"]["finishReason"] for m in models} == {"tool-calls", "stop"}


def test_the_swarm_graph_counts_calls_between_agents_and_marks_the_entry_agent(client: TestClient) -> None:
    graph = get(client, "/api/graph", workspace=workspace(client))
    assert [(a["id"], a.get("entry", False), a["turns"]) for a in graph["agents"]] == [
        ("helper", False, 1),
        ("lead", True, 1),
    ]
    (edge,) = graph["edges"]
    assert (edge["from"], edge["to"], edge["count"], edge["errors"]) == ("lead", "helper", 1, 0)
    assert edge["meanMs"] > 0 and edge["tools"] == ["agents__request"]


def test_bad_requests_are_clear_errors_with_a_code(client: TestClient) -> None:
    res = client.get("/api/conversation", params={"workspace": "x"})
    assert res.status_code == 400 and res.json()["error"]["code"] == "E_STUDIO_BAD_REQUEST"
    res = client.get("/api/instances", params={"limit": "many"})
    assert res.status_code == 400 and "limit" in res.json()["error"]["message"]
    res = client.get("/api/conversation", params={"workspace": "nope", "agent": "a", "key": "k"})
    assert res.status_code == 404 and res.json()["error"]["code"] == "E_STUDIO_NOT_FOUND"
    res = client.get("/api/trace", params={"workspace": workspace(client), "trace": "0" * 32})
    assert res.status_code == 404 and res.json()["error"]["suggestion"]


def test_reading_changes_nothing_in_the_state_root(client: TestClient, run_state: tuple[Path, Path]) -> None:
    def snapshot() -> dict[str, tuple[int, int]]:
        out = {}
        for dirpath, _dirs, files in os.walk(run_state[1]):
            for f in files:
                st = os.stat(os.path.join(dirpath, f))
                out[os.path.join(dirpath, f)] = (st.st_size, st.st_mtime_ns)
        return out

    before = snapshot()
    ws = workspace(client)
    for path, params in [
        ("/api/instances", {}),
        ("/api/conversation", {"workspace": ws, "agent": "lead", "key": "default"}),
        ("/api/turns", {"workspace": ws, "agent": "helper", "key": "default"}),
        ("/api/graph", {"workspace": ws}),
        ("/api/instance", {"workspace": ws, "agent": "ghost", "key": "none"}),
    ]:
        client.get(path, params=params)
    assert snapshot() == before


def test_the_page_and_its_modules_are_served_from_the_package(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and '<script type="module" src="/static/app.js">' in page.text
    for asset in ("app.js", "dom.js", "views.js", "style.css"):
        res = client.get(f"/static/{asset}")
        assert res.status_code == 200 and len(res.content) > 500, asset
        assert "https://" not in res.text and "cdn" not in res.text.lower(), asset  # nothing fetched remotely
