"""The Studio JSON API (goondan.studio._app / _data) over the state of a real two-agent run: lead
delegates to helper through the agents tool, helper calls calc__add, each in its own agent process."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from studio_testkit import delegation_bundle, delegation_run, run_turns

from goondan.storage import open_store
from goondan.studio import StudioData, bundle_info, create_app


@pytest.fixture(scope="module")
def run_state(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return delegation_run(tmp_path_factory.mktemp("studio-run"))


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


WEBHOOK = """\
apiVersion: goondan.ai/v1
kind: Connection
metadata:
  name: hook
spec:
  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }
  config:
    port: { value: "0" }
  ingress:
    rules:
      - match: { event: message, properties: { to: helper } }
        route: { agentRef: Agent/helper }
      - route: { instanceKeyProperty: chat }
"""


def test_with_the_bundle_the_graph_shows_its_connections_and_where_their_routes_go(tmp_path: Path) -> None:
    bundle = delegation_bundle(tmp_path / "bundle")
    (bundle / "goondan.yaml").write_text((bundle / "goondan.yaml").read_text() + "---\n" + WEBHOOK)
    info = bundle_info(bundle)
    assert info.agents == ["lead", "helper"] and info.entry_agents == ["lead"]
    assert info.connectors == [
        {
            "connection": "hook",
            "connector": "webhook",
            "routes": [{"event": "message", "agent": "helper"}, {"event": None, "agent": "lead"}],
        }
    ]
    data = StudioData(open_store(None, state_root=tmp_path / "state"), bundle=info)
    graph = data.graph("any-workspace")  # nothing ran yet: the bundle's agents, no calls
    assert [a["id"] for a in graph["agents"]] == ["helper", "lead"] and graph["edges"] == []
    assert graph["connectors"] == info.connectors


def test_a_step_opens_to_its_model_input_when_the_run_recorded_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOONDAN_TRACE_LLM_INPUT", "1")
    bundle = delegation_bundle(tmp_path / "bundle")
    run_turns(bundle, tmp_path / "state", ["hello"])
    data = StudioData(open_store(None, state_root=tmp_path / "state"))
    ws = data.workspaces()[0]["id"]
    (turn,) = data.turns(ws, "helper", "default", offset=0, limit=5)["items"]
    steps = [s for s in data.trace(ws, turn["traceId"])["spans"] if s["kind"] == "step"]
    helper_first = next(s for s in steps if s["attrs"]["agentName"] == "helper")
    assert [m["role"] for m in helper_first["attrs"]["llmInputMessages"]][-1] == "user"
    assert "add 2 and 3" in str(helper_first["attrs"]["llmInputMessages"])


def test_the_wheel_ships_the_page_and_its_modules(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for asset in ("index.html", "app.js", "dom.js", "views.js", "style.css"):
        assert f"goondan/studio/static/{asset}" in names, asset


def test_studio_reads_a_postgresql_store_like_the_file_store(tmp_path: Path, postgres_url: str) -> None:
    bundle = delegation_bundle(tmp_path / "bundle")
    run_turns(bundle, tmp_path / "state", ["hello"], store=postgres_url)
    data = StudioData(open_store(postgres_url, state_root=tmp_path / "state"), bundle=bundle_info(bundle))
    try:
        with TestClient(create_app(data)) as client:
            rows = {r["agent"]: r for r in get(client, "/api/instances")["items"]}
            assert {a: (r["turns"], r["messages"], r["status"]) for a, r in rows.items()} == {
                "lead": (1, 4, "idle"),
                "helper": (1, 4, "idle"),
            }
            ws = rows["lead"]["workspace"]
            conv = get(client, "/api/conversation", workspace=ws, agent="lead", key="default")
            assert conv["rows"][1]["blocks"][0]["result"]["value"]["response"] == "sum is 5"
            (turn,) = get(client, "/api/turns", workspace=ws, agent="lead", key="default")["items"]
            trace = get(client, "/api/trace", workspace=ws, trace=turn["traceId"])
            assert trace["spanCount"] == 12 and trace["agents"] == ["helper", "lead"]
    finally:
        data.close()


def test_an_instance_whose_metadata_is_corrupt_is_listed_as_unreadable_and_its_conversation_opens(
    tmp_path: Path,
) -> None:
    # it was left out of the list (as gdn instance list left it out): its conversation looked lost
    bundle, state = delegation_run(tmp_path)
    (metadata,) = [p for p in state.rglob("metadata.json") if p.parent.name.startswith("lead")]
    metadata.write_text("garbage{")
    data = StudioData(open_store(None, state_root=state), bundle=bundle_info(bundle))
    with TestClient(create_app(data, info={"store": "test"})) as c:
        page = get(c, "/api/instances")
        rows = {r["agent"]: r for r in page["items"]}
        assert page["total"] == 2 and rows["helper"]["status"] == "idle"
        lead = rows["lead"]
        assert lead["status"] == "unreadable" and "metadata.json" in lead["problem"]
        conv = get(c, "/api/conversation", workspace=lead["workspace"], agent="lead", key=lead["key"])
        assert [r["role"] for r in conv["rows"]] == ["user", "assistant", "tool", "assistant"]
