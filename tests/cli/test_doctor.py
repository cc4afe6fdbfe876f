"""``gdn doctor PATH`` checks what this bundle needs: the extras of what it uses and the API keys its
models read — nothing else, so a scripted bundle is not told to set ANTHROPIC_API_KEY."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_testkit import env_for, fresh_venv, gdn

from kit import write_files

HEAD = "apiVersion: goondan.ai/v1\n"


def bundle(*, model: str, unused_model: str = "", extra_agent_spec: str = "", swarm_spec: str = "") -> str:
    return (
        f"{HEAD}kind: Model\nmetadata: {{name: main}}\nspec:\n{model}"
        + (f"---\n{HEAD}kind: Model\nmetadata: {{name: spare}}\nspec:\n{unused_model}" if unused_model else "")
        + f"---\n{HEAD}kind: Agent\nmetadata: {{name: a}}\nspec:\n  modelConfig: {{modelRef: Model/main}}\n"
        + extra_agent_spec
        + f"---\n{HEAD}kind: Swarm\nmetadata: {{name: default}}\nspec:\n  entryAgent: Agent/a\n  agents: [Agent/a]\n"
        + swarm_spec
    )


SCRIPTED = "  provider: scripted\n  model: m\n  options: {rules: [{reply: {text: hi}}]}\n"
ANTHROPIC = "  provider: anthropic\n  model: claude-x\n"
OPENAI = "  provider: openai\n  model: gpt-x\n"


def checks(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return {c["check"]: c for c in json.loads(proc.stdout)["checks"]}


def test_scripted_bundle_needs_no_key_and_no_extra(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", {"goondan.yaml": bundle(model=SCRIPTED)})
    proc = gdn(tmp_path, "doctor", str(app), "--json", ANTHROPIC_API_KEY="")
    assert proc.returncode == 0, proc.stdout
    found = checks(proc)
    assert not [name for name in found if name.startswith(("key:", "extra:"))]
    assert found["needs"]["status"] == "ok"


def test_only_the_keys_of_models_agents_use_are_checked_and_dotenv_counts(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", {"goondan.yaml": bundle(model=ANTHROPIC, unused_model=OPENAI)})
    missing = gdn(tmp_path, "doctor", str(app), "--json")
    assert missing.returncode == 1
    found = checks(missing)
    assert found["key:ANTHROPIC_API_KEY"]["status"] == "fail"
    assert "Model/main" in found["key:ANTHROPIC_API_KEY"]["detail"]
    assert "key:OPENAI_API_KEY" not in found and "extra:openai" not in found  # Model/spare is used by no agent
    assert found["extra:anthropic"]["status"] == "ok"
    (app / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-from-dotenv\n")
    fixed = gdn(tmp_path, "doctor", str(app))
    assert fixed.returncode == 0, fixed.stdout
    assert "key:ANTHROPIC_API_KEY: set" in fixed.stdout and "sk-ant-from-dotenv" not in fixed.stdout


def test_a_models_own_api_key_variable_replaces_the_providers_default(tmp_path: Path) -> None:
    model = ANTHROPIC + "  apiKey: {valueFrom: {env: TEAM_CLAUDE_KEY}}\n"
    app = write_files(tmp_path / "app", {"goondan.yaml": bundle(model=model)})
    found = checks(gdn(tmp_path, "doctor", str(app), "--json", TEAM_CLAUDE_KEY="k"))
    assert found["key:TEAM_CLAUDE_KEY"]["status"] == "ok"
    assert "key:ANTHROPIC_API_KEY" not in found


def test_configured_backends_and_extensions_bring_their_extras(tmp_path: Path) -> None:
    mcp = (
        "  extensions:\n    - ref: {kind: Extension, name: mcp, package: '@goondan/base'}\n"
        "      config: {transport: {type: stdio, command: [python, server.py]}}\n"
    )
    app = write_files(tmp_path / "app", {"goondan.yaml": bundle(model=SCRIPTED, extra_agent_spec=mcp)})
    found = checks(gdn(tmp_path, "doctor", str(app), "--json", GOONDAN_STORE="postgresql://u@localhost/db"))
    assert found["extra:mcp"]["status"] == "ok" and "Agent/a uses Extension/mcp" in found["extra:mcp"]["detail"]
    assert found["extra:postgres"]["status"] == "ok"
    assert "extra:ray" not in found


def test_a_missing_extra_fails_with_the_install_command(tmp_path: Path) -> None:
    """A venv that sees this environment except the local model's llama_cpp (blocked on import)."""
    block = (
        "import sys; sys.meta_path.insert(0, type('B', (), {'find_spec': staticmethod(lambda n, *a: "
        "(_ for _ in ()).throw(ModuleNotFoundError(n)) if n.split('.')[0] == 'llama_cpp' else None)})())"
    )
    python = fresh_venv(tmp_path / "venv", block)
    local = "  provider: local\n  model: smollm2\n"
    app = write_files(tmp_path / "app", {"goondan.yaml": bundle(model=local)})
    proc = subprocess.run(
        [str(python), "-m", "goondan", "doctor", str(app), "--json"],
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    found = checks(proc)
    assert found["extra:local"]["status"] == "fail"
    assert found["extra:local"]["suggestion"] == "pip install 'goondan-runtime[local]'"


def test_a_path_that_does_not_exist_fails_instead_of_passing(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "doctor", str(tmp_path / "no-such-bundle"))
    assert proc.returncode == 1, proc.stdout
    assert "does not exist" in proc.stdout and "All required checks passed" not in proc.stdout


def test_the_store_goondan_store_names_must_answer_a_wrong_database_fails_before_the_service_starts(
    tmp_path: Path, postgres_url: str
) -> None:
    app = write_files(tmp_path / "app", {"goondan.yaml": bundle(model=SCRIPTED)})
    proc = gdn(tmp_path, "doctor", str(app), "--json", GOONDAN_STORE=postgres_url)
    assert proc.returncode == 0, proc.stdout
    assert checks(proc)["store"]["status"] == "ok"
    wrong = postgres_url.rsplit("/", 1)[0] + "/no_such_db"
    proc = gdn(tmp_path, "doctor", str(app), "--json", GOONDAN_STORE=wrong)
    assert proc.returncode == 1, proc.stdout  # was 0: "All required checks passed", then every turn failed
    store = checks(proc)["store"]
    assert store["status"] == "fail"
    assert store["detail"].startswith("[E_STORE_DATABASE_NOT_FOUND]") and "no database 'no_such_db'" in store["detail"]
    assert "createdb" in store["suggestion"]
    proc = gdn(tmp_path, "doctor", str(app), "--json", GOONDAN_STORE=str(app / "goondan.yaml"))
    assert proc.returncode == 1 and checks(proc)["store"]["detail"].endswith("is not a directory")


def test_the_ray_executor_s_address_and_actor_options_are_checked_without_starting_ray(tmp_path: Path) -> None:
    import socket

    app = write_files(tmp_path / "app", {"goondan.yaml": bundle(model=SCRIPTED)})
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = gdn(tmp_path, "doctor", str(app), "--json", GOONDAN_EXECUTOR="ray", GOONDAN_RAY_ADDRESS=f"127.0.0.1:{port}")
    # was "All required checks passed", then every gdn run failed with E_RAY_CONNECT
    assert proc.returncode == 1, proc.stdout
    ray = checks(proc)["ray"]
    assert ray["status"] == "fail" and ray["detail"].startswith(
        f"[E_RAY_CONNECT] no Ray cluster answers at 127.0.0.1:{port}"
    )
    proc = gdn(tmp_path, "doctor", str(app), "--json", GOONDAN_EXECUTOR="ray", GOONDAN_RAY_ACTOR_OPTIONS="[1]")
    assert proc.returncode == 1 and checks(proc)["ray"]["detail"].startswith("[E_RAY_OPTIONS]")
    proc = gdn(tmp_path, "doctor", str(app), "--json", GOONDAN_EXECUTOR="ray")
    assert (
        proc.returncode == 0
        and checks(proc)["ray"]["detail"] == "GOONDAN_EXECUTOR=ray: a local Ray started for each run"
    )


def test_an_otlp_receiver_that_does_not_answer_is_a_warning_naming_it(tmp_path: Path) -> None:
    import socket

    app = write_files(tmp_path / "app", {"goondan.yaml": bundle(model=SCRIPTED)})
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(4)
        up = f"http://127.0.0.1:{listening.getsockname()[1]}"
        proc = gdn(tmp_path, "doctor", str(app), "--json", OTEL_EXPORTER_OTLP_ENDPOINT=up)
        assert checks(proc)["otlp"] == {
            "check": "otlp",
            "status": "ok",
            "detail": f"spans go to {up}/v1/traces (it accepts connections)",
        }
    proc = gdn(tmp_path, "doctor", str(app), "--json", OTEL_EXPORTER_OTLP_ENDPOINT=up)  # closed now
    # was nothing at all: the spans of every turn were dropped with one log line after the start
    assert proc.returncode == 0, proc.stdout  # a warning: export never breaks a turn
    otlp = checks(proc)["otlp"]
    assert otlp["status"] == "warn" and otlp["detail"].startswith(f"spans go to {up}/v1/traces, which does not answer")
    proc = gdn(
        tmp_path, "doctor", str(app), "--json", OTEL_EXPORTER_OTLP_ENDPOINT=up, OTEL_EXPORTER_OTLP_PROTOCOL="grpc"
    )
    assert proc.returncode == 1 and checks(proc)["otlp"]["detail"].startswith("[E_TELEMETRY_CONFIG]")
    assert "otlp" not in checks(gdn(tmp_path, "doctor", str(app), "--json"))  # export off: nothing to check
