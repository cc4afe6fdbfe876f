"""Every gdn command as a subprocess: output, failure paths and exit codes (CONTRACT §9)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from cli_testkit import ECHO_BUNDLE, env_for, gdn

from kit import write_bundle

COMMANDS = ["init", "validate", "run", "restart", "instance", "logs", "doctor", "schema"]


def test_top_level_help_lists_every_command_and_the_exit_codes(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "--help")
    assert proc.returncode == 0
    for command in COMMANDS:
        assert f"    {command} " in proc.stdout
    assert "130 interrupted" in proc.stdout


@pytest.mark.parametrize("command", [*COMMANDS, "instance list", "instance delete", "instance restart"])
def test_each_command_has_help_with_the_global_options(tmp_path: Path, command: str) -> None:
    proc = gdn(tmp_path, *command.split(), "--help")
    assert proc.returncode == 0
    assert "--state-root" in proc.stdout and "--no-color" in proc.stdout


def test_unknown_command_and_missing_action_exit_2(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "explode")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
    assert gdn(tmp_path, "instance").returncode == 2  # an action is required
    assert gdn(tmp_path, "init", "-t", "nope").returncode == 2


def test_global_options_work_before_and_after_the_command(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = tmp_path / "st"
    before = gdn(tmp_path, "--state-root", str(state), "run", str(bundle), "--input", "one")
    after = gdn(tmp_path, "run", str(bundle), "--input", "two", "--state-root", str(state))
    assert before.returncode == after.returncode == 0
    [workspace] = (state / "workspaces").iterdir()  # both runs used the bundle's one workspace
    assert workspace.name.startswith("cli-suite-default-")
    assert not (tmp_path / "home" / ".goondan").exists()


# --- init ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("template", ["default", "multi-agent", "minimal"])
def test_init_templates_validate_and_run_offline_at_once(tmp_path: Path, template: str) -> None:
    target = tmp_path / "My Project"
    proc = gdn(tmp_path, "init", str(target), "-t", template)
    assert proc.returncode == 0, proc.stderr
    docs = list(yaml.safe_load_all((target / "goondan.yaml").read_text()))
    assert docs[0]["kind"] == "Package" and docs[0]["metadata"]["name"] == "my-project"
    assert '  name: "my-project"' in (target / "goondan.yaml").read_text()  # quoted package name
    assert (target / ".gitignore").read_text().startswith(".env")
    assert gdn(tmp_path, "validate", str(target), "--strict").returncode == 0
    run = gdn(tmp_path, "run", str(target), "--input", "hello", "--state-root", str(tmp_path / "s"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()


def test_multi_agent_template_delegates_to_the_researcher(tmp_path: Path) -> None:
    gdn(tmp_path, "init", "team", "-t", "multi-agent", "-q")
    run = gdn(tmp_path, "run", "team", "--input", "research tides", "--state-root", "s")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("The researcher says: Notes on")


def test_init_refuses_an_existing_bundle_unless_forced(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", ECHO_BUNDLE)
    (tmp_path / "b" / "prompts").mkdir()
    (tmp_path / "b" / "prompts" / "assistant.md").write_text("mine\n")
    (tmp_path / "b" / "notes.txt").write_text("mine\n")
    before = (tmp_path / "b" / "goondan.yaml").read_text()
    proc = gdn(tmp_path, "init", "b")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"[E_INIT_EXISTS] {tmp_path / 'b'} already holds a bundle (goondan.yaml)")
    # the way out both ways: a new directory, or --force naming exactly what it overwrites
    assert "gdn init NEW_DIR" in proc.stderr
    assert "gdn init b --force to overwrite goondan.yaml, prompts/assistant.md" in proc.stderr
    assert "other files there are kept" in proc.stderr
    assert (tmp_path / "b" / "goondan.yaml").read_text() == before
    assert gdn(tmp_path, "init", "b", "--force", "-n", "renamed").returncode == 0
    assert 'name: "renamed"' in (tmp_path / "b" / "goondan.yaml").read_text()
    assert (tmp_path / "b" / "notes.txt").read_text() == "mine\n"
    help_text = gdn(tmp_path, "init", "--help").stdout
    assert "E_INIT_EXISTS" in help_text and "exit 2" in help_text


def test_init_rejects_an_invalid_package_name(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "init", "x", "--name", "Bad Name")
    assert proc.returncode == 2 and "[E_INVALID_ARGUMENT]" in proc.stderr
    assert not (tmp_path / "x" / "goondan.yaml").exists()


# --- run failure paths --------------------------------------------------------------------------


def test_run_errors_use_the_standard_format_and_exit_codes(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    both = gdn(tmp_path, "run", str(bundle), "--input", "a", "--input-file", "f")
    assert both.returncode == 2 and both.stderr.startswith("[E_INVALID_ARGUMENT]")
    missing_file = gdn(tmp_path, "run", str(bundle), "--input-file", "nope.txt")
    assert missing_file.returncode == 2
    missing_env = gdn(tmp_path, "run", str(bundle), "--input", "a", "--env-file", "nope.env")
    assert missing_env.returncode == 3 and "[E_ENV_FILE_NOT_FOUND]" in missing_env.stderr
    no_bundle = gdn(tmp_path, "run", str(tmp_path / "empty"), "--input", "a")
    assert no_bundle.returncode == 3
    bad_agent = gdn(tmp_path, "run", str(bundle), "--input", "a", "--agent", "ghost", "--state-root", "s")
    # an agent named on the command line that the swarm lacks is a usage error (CONTRACT §9)
    assert bad_agent.returncode == 2 and "[E_AGENT_NOT_FOUND]" in bad_agent.stderr
    assert "help: https://" in bad_agent.stderr and "Traceback" not in bad_agent.stderr


def test_json_errors_carry_code_message_and_exit_code(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    proc = gdn(tmp_path, "run", str(bundle), "--json", "--input", "a", "--agent", "ghost", "--state-root", "s")
    assert proc.returncode == 2
    err = json.loads(proc.stderr.strip().splitlines()[-1])
    assert err["code"] == "E_AGENT_NOT_FOUND" and err["exitCode"] == 2 and err["helpUrl"].endswith("E_AGENT_NOT_FOUND")


def test_dotenv_files_and_env_file_supply_value_sources(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    with (bundle / "goondan.yaml").open("a") as fh:
        fh.write(
            "---\napiVersion: goondan.ai/v1\nkind: Connection\nmetadata:\n  name: term\nspec:\n"
            '  connectorRef: { kind: Connector, name: cli, package: "@goondan/base" }\n'
            "  secrets:\n    token: { valueFrom: { env: SOME_KEY } }\n"
        )
    missing = gdn(tmp_path, "validate", str(bundle))
    assert missing.returncode == 4 and "[E_CONFIG_ENV_MISSING]" in missing.stdout and "SOME_KEY" in missing.stdout
    (tmp_path / "extra.env").write_text("export SOME_KEY='quoted'\n")
    assert gdn(tmp_path, "validate", str(bundle), "--env-file", "extra.env").returncode == 0
    (bundle / ".env.local").write_text("SOME_KEY=from-local\n")
    assert gdn(tmp_path, "validate", str(bundle)).returncode == 0


# --- schema -------------------------------------------------------------------------------------


def test_schema_is_a_json_schema_that_accepts_real_bundles_and_rejects_mistakes(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "schema")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    example = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "goondan.yaml"
    for doc in yaml.safe_load_all(example.read_text()):
        assert not list(validator.iter_errors(doc)), doc["kind"]
    bad_ref = {
        "apiVersion": "goondan.ai/v1",
        "kind": "Agent",
        "metadata": {"name": "a"},
        "spec": {"modelConfig": {"modelRef": 3}},
    }
    typo = {
        "apiVersion": "goondan.ai/v1",
        "kind": "Swarm",
        "metadata": {"name": "s"},
        "spec": {"entryAgent": "Agent/a", "agents": ["Agent/a"], "entryAgnet": "x"},
    }
    no_kind = {"apiVersion": "goondan.ai/v1", "metadata": {"name": "x"}}
    for doc in (bad_ref, typo, no_kind):
        assert list(validator.iter_errors(doc))
    conn = {
        "apiVersion": "goondan.ai/v1",
        "kind": "Connection",
        "metadata": {"name": "c"},
        "spec": {
            "connectorRef": {"kind": "Connector", "name": "cli", "package": "@goondan/base"},
            "secrets": {"t": {"valueFrom": {"env": "T"}}},
            "ingress": {"rules": [{"match": {"properties": {"n": 1}}, "route": {"agentRef": "Agent/a"}}]},
        },
    }
    assert not list(validator.iter_errors(conn))
    conn["spec"]["secrets"] = {"t": {"valueFrom": {"file": "x"}}}
    assert list(validator.iter_errors(conn))


def test_schema_for_one_kind_and_to_a_file(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "schema", "--kind", "Model", "-o", "model.json")
    assert proc.returncode == 0
    schema = json.loads((tmp_path / "model.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors({"provider": "scripted", "model": "m"}))
    assert list(validator.iter_errors({"provider": "scripted"}))


# --- doctor -------------------------------------------------------------------------------------


def test_doctor_reports_checks_and_fails_on_an_invalid_bundle(tmp_path: Path) -> None:
    good = write_bundle(tmp_path / "good", ECHO_BUNDLE)
    proc = gdn(tmp_path, "doctor", str(good))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith("Goondan Doctor")
    assert "python: Python 3." in proc.stdout
    as_json = gdn(tmp_path, "doctor", str(good), "--json")
    checks = {c["check"]: c for c in json.loads(as_json.stdout)["checks"]}
    assert checks["bundle"]["status"] == "ok"
    broken = write_bundle(tmp_path / "broken", (good / "goondan.yaml").read_text().replace("Model/echo", "Model/nope"))
    bad = gdn(tmp_path, "doctor", str(broken))
    assert bad.returncode == 1 and "FAIL" in bad.stdout and "gdn validate" in bad.stdout


# --- instances and logs --------------------------------------------------------------------------


def test_instance_list_and_delete(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = str(tmp_path / "state")
    empty = gdn(tmp_path, "instance", "list", "--state-root", state)
    assert empty.returncode == 0 and "No instances" in empty.stdout
    for key in ("alpha", "beta"):
        assert (
            gdn(tmp_path, "run", str(bundle), "--input", "hi", "--instance-key", key, "--state-root", state).returncode
            == 0
        )
    assert (
        gdn(
            tmp_path,
            "run",
            str(bundle),
            "--input",
            "hi",
            "--agent",
            "helper",
            "--instance-key",
            "alpha",
            "--state-root",
            state,
        ).returncode
        == 0
    )
    listing = gdn(tmp_path, "instance", "list", "--state-root", state)
    assert listing.stdout.splitlines()[0].split() == [
        "WORKSPACE",
        "BUNDLE",
        "AGENT",
        "INSTANCE",
        "KEY",
        "STATUS",
        "UPDATED",
        "RUN",
    ]
    rows = gdn(tmp_path, "instance", "list", "--json", "--state-root", state).stdout.splitlines()
    got = sorted((json.loads(r)["agentName"], json.loads(r)["instanceKey"]) for r in rows)
    assert got == [("helper", "alpha"), ("talker", "alpha"), ("talker", "beta")]
    only_helper = gdn(tmp_path, "instance", "list", "--agent", "helper", "--json", "--state-root", state)
    assert len(only_helper.stdout.splitlines()) == 1

    deleted = gdn(tmp_path, "instance", "delete", "alpha", "--agent", "talker", "--yes", "--state-root", state)
    assert deleted.returncode == 0 and "deleted talker@alpha" in deleted.stdout
    rows = gdn(tmp_path, "instance", "list", "--json", "--state-root", state).stdout.splitlines()
    assert sorted(json.loads(r)["agentName"] + "@" + json.loads(r)["instanceKey"] for r in rows) == [
        "helper@alpha",
        "talker@beta",
    ]
    missing = gdn(tmp_path, "instance", "delete", "nope", "--yes", "--state-root", state)
    assert missing.returncode == 1 and missing.stderr.startswith("[E_INSTANCE_NOT_FOUND]")


def test_logs_filter_by_instance_agent_and_trace(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = str(tmp_path / "state")
    gdn(tmp_path, "run", str(bundle), "--input", "a", "--instance-key", "k1", "--state-root", state)
    gdn(
        tmp_path, "run", str(bundle), "--input", "b", "--instance-key", "k2", "--agent", "helper", "--state-root", state
    )
    readable = gdn(tmp_path, "logs", "--state-root", state)
    assert readable.returncode == 0
    assert "talker@k1" in readable.stdout and "helper@k2" in readable.stdout and "turn.completed" in readable.stdout
    records = [json.loads(line) for line in gdn(tmp_path, "logs", "--json", "--state-root", state).stdout.splitlines()]
    assert {r["type"] for r in records} >= {"turn.started", "turn.completed"}
    by_agent = [
        json.loads(x)
        for x in gdn(tmp_path, "logs", "--json", "-a", "helper", "--state-root", state).stdout.splitlines()
    ]
    assert by_agent and {r["agentName"] for r in by_agent} == {"helper"}
    by_key = [
        json.loads(x) for x in gdn(tmp_path, "logs", "--json", "-i", "k1", "--state-root", state).stdout.splitlines()
    ]
    assert by_key and {r["instanceKey"] for r in by_key} == {"k1"}
    trace = by_key[0]["traceId"]
    by_trace = [
        json.loads(x)
        for x in gdn(tmp_path, "logs", "--json", "--trace", trace, "--state-root", state).stdout.splitlines()
    ]
    assert by_trace and {r["traceId"] for r in by_trace} == {trace}
    assert gdn(tmp_path, "logs", "--json", "-a", "helper", "-i", "k1", "--state-root", state).stdout == ""
    last = gdn(tmp_path, "logs", "--json", "-l", "1", "--state-root", state).stdout.splitlines()
    assert len(last) == 1


def test_logs_follow_prints_new_events_until_interrupted(tmp_path: Path) -> None:
    import signal
    import time

    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = str(tmp_path / "state")
    follower = subprocess.Popen(
        [sys.executable, "-m", "goondan", "logs", "--follow", "--json", "--state-root", state],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
    )
    try:
        time.sleep(0.5)
        assert gdn(tmp_path, "run", str(bundle), "--input", "late", "--state-root", state).returncode == 0
        assert follower.stdout is not None
        seen = []
        while not any(r.get("type") == "turn.completed" for r in seen):
            seen.append(json.loads(follower.stdout.readline()))
        follower.send_signal(signal.SIGINT)
        assert follower.wait(10) == 130
    finally:
        if follower.poll() is None:
            follower.kill()


# --- restart ------------------------------------------------------------------------------------


def test_restart_without_a_running_gdn_run_is_an_error(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "restart", "--state-root", str(tmp_path / "state"))
    assert proc.returncode == 1
    assert proc.stderr.startswith("[E_NO_ACTIVE_RUN]") and "suggestion: Start one with `gdn run`" in proc.stderr
    inst = gdn(tmp_path, "instance", "restart", "default", "--state-root", str(tmp_path / "state"))
    assert inst.returncode == 1 and "[E_NO_ACTIVE_RUN]" in inst.stderr


def test_restart_reaches_a_running_session(tmp_path: Path) -> None:
    import time

    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    state = str(tmp_path / "state")
    session = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", state],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path, GOONDAN_ISOLATION="process"),  # restart against the default isolation
    )
    try:
        assert session.stdin is not None and session.stdout is not None
        session.stdin.write("before\n")
        session.stdin.flush()
        assert session.stdout.readline() == "echo: before\n"
        registry = Path(state) / "runtime" / "runs"
        deadline = time.monotonic() + 10
        while not list(registry.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        [runs] = registry.glob("*.json")
        listing = gdn(tmp_path, "instance", "list", "--state-root", state)
        assert f"pid {session.pid}" in listing.stdout
        second = gdn(tmp_path, "run", str(bundle), "--state-root", state, stdin="x\n")
        assert second.returncode == 1 and "[E_RUN_ACTIVE]" in second.stderr
        assert f"gdn run {bundle} --input TEXT` (that process answers)" in second.stderr, second.stderr
        busy = gdn(tmp_path, "instance", "delete", "default", "--state-root", state)
        assert busy.returncode == 1 and "[E_RUN_ACTIVE]" in busy.stderr and "--force" in busy.stderr
        # a one-shot request goes through the running process, which owns the instance files
        via = gdn(tmp_path, "run", str(bundle), "--input", "via control", "--state-root", state)
        assert via.returncode == 0 and via.stdout == "echo: via control\n"
        via_json = gdn(tmp_path, "run", str(bundle), "--input", "j", "--json", "--state-root", state)
        assert json.loads(via_json.stdout)["text"] == "echo: j"
        ghost = gdn(tmp_path, "run", str(bundle), "--input", "x", "--agent", "ghost", "--state-root", state)
        assert ghost.returncode == 2 and "[E_AGENT_NOT_FOUND]" in ghost.stderr

        wrong = gdn(tmp_path, "restart", "--agent", "ghost", "--state-root", state)
        assert wrong.returncode == 2 and "[E_AGENT_NOT_FOUND]" in wrong.stderr
        proc = gdn(tmp_path, "restart", "--agent", "talker", "--fresh", "--state-root", state)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == 'agent "talker" restarted (fresh, state cleared)\n'
        whole = gdn(tmp_path, "instance", "restart", "default", "--state-root", state)
        assert whole.returncode == 0 and whole.stdout.startswith('swarm "default"')

        session.stdin.write("after\n")
        session.stdin.flush()
        assert session.stdout.readline() == "echo: after\n"
        session.stdin.close()
        assert session.wait(15) == 0
    finally:
        if session.poll() is None:
            session.kill()
    assert not runs.exists()  # the registration is removed on exit


# --- start-up cost ---------------------------------------------------------------------------------


def _imported(tmp_path: Path, *args: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "goondan", *args],
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=60,
    )
    return {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}


HEAVY = (
    "anthropic",
    "openai",
    "google.genai",
    "httpx",
    "cryptography",
    "goondan.runtime",
    "goondan.connectors",
    "http.server",
    "asyncio",
)


def test_help_and_validate_do_not_import_sdks_servers_or_the_runtime(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
    for args in (("--help",), ("validate", str(example))):
        modules = _imported(tmp_path, *args)
        assert "goondan.cli" in modules
        loaded = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
        assert loaded == [], (args, loaded)
    assert not any(m.startswith("goondan.bundle") for m in _imported(tmp_path, "--help"))


def test_watch_applies_an_edited_bundle_to_the_running_session(tmp_path: Path) -> None:
    import time

    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    session = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--watch", "--state-root", str(tmp_path / "s")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
    )
    try:
        assert session.stdin is not None and session.stdout is not None

        def ask(text: str) -> str:
            assert session.stdin is not None and session.stdout is not None
            session.stdin.write(text + "\n")
            session.stdin.flush()
            return session.stdout.readline()

        assert ask("one") == "echo: one\n"
        manifest = bundle / "goondan.yaml"
        manifest.write_text(manifest.read_text().replace('text: "echo: {{last}}"', 'text: "v2: {{last}}"'))
        deadline = time.monotonic() + 15
        reply = ""
        while time.monotonic() < deadline:
            reply = ask("two")
            if reply.startswith("v2"):
                break
            time.sleep(0.2)
        assert reply == "v2: two\n"
        session.stdin.close()
        assert session.wait(15) == 0
    finally:
        if session.poll() is None:
            session.kill()
