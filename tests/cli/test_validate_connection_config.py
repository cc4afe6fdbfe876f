"""A Connection's config is checked against its Connector's ``CONFIG_SCHEMA`` by ``gdn validate``.

Before, a misspelt value (``replyMode: strem``) failed only when ``gdn run`` started the connector,
and a misspelt key (``prot``) was never reported at all. Each test runs the real ``gdn`` on a bundle
written to ``tmp_path``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def webhook_connection(*config_lines: str) -> str:
    lines = "".join(f"    {line}\n" for line in config_lines)
    return (
        "apiVersion: goondan.ai/v1\nkind: Connection\nmetadata:\n  name: http\nspec:\n"
        '  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }\n'
        f"  config:\n{lines}"
    )


def validate_json(tmp_path: Path, bundle: Path, **env: str) -> tuple[int, dict[str, Any]]:
    proc = gdn(tmp_path, "validate", str(bundle), "--format", "json", **env)
    return proc.returncode, json.loads(proc.stdout)


def line_of(bundle: Path, text: str) -> int:
    lines = (bundle / "goondan.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_a_misspelt_webhook_reply_mode_is_E_CONNECTOR_CONFIG_at_its_line_with_the_closest_mode(
    tmp_path: Path,
) -> None:
    b = write_bundle(
        tmp_path / "b", ECHO_BUNDLE, webhook_connection('port: { value: "18080" }', "replyMode: { value: strem }")
    )
    code, report = validate_json(tmp_path, b)
    assert code == 4, report
    (error,) = report["errors"]
    assert error["code"] == "E_CONNECTOR_CONFIG"
    assert "Connection/http" in error["message"] and "'strem'" in error["message"]
    assert error["path"].endswith("spec.config.replyMode")
    assert (error["file"], error["line"]) == ("goondan.yaml", line_of(b, "replyMode:"))
    assert error["suggestion"].startswith("did you mean 'stream'?")


def test_an_unknown_connection_config_key_is_reported_with_the_key_it_was_meant_to_be(tmp_path: Path) -> None:
    b = write_bundle(tmp_path / "b", ECHO_BUNDLE, webhook_connection('prot: { value: "18080" }'))
    code, report = validate_json(tmp_path, b)
    assert code == 4, report
    (error,) = report["errors"]
    assert error["code"] == "E_CONNECTOR_CONFIG" and "config.prot" in error["message"]
    assert error["line"] == line_of(b, "prot:")
    assert "did you mean 'port'?" in error["suggestion"] and "replyMode" in error["suggestion"]


def test_connection_config_the_connector_accepts_stays_valid(tmp_path: Path) -> None:
    # values arrive as strings from the environment, enum settings are read case-insensitively
    b = write_bundle(
        tmp_path / "b",
        ECHO_BUNDLE,
        webhook_connection(
            "port: { valueFrom: { env: HOOK_PORT } }", "replyMode: { value: Stream }", "path: { value: /in }"
        ),
    )
    code, report = validate_json(tmp_path, b, HOOK_PORT="18080")
    assert (code, report["errors"]) == (0, [])


def test_a_bad_value_read_from_the_environment_is_reported_without_showing_it(tmp_path: Path) -> None:
    b = write_bundle(tmp_path / "b", ECHO_BUNDLE, webhook_connection("replyMode: { valueFrom: { env: HOOK_MODE } }"))
    code, report = validate_json(tmp_path, b, HOOK_MODE="sekrit-mode")
    assert code == 4, report
    assert [e["code"] for e in report["errors"]] == ["E_CONNECTOR_CONFIG"]
    assert "sekrit-mode" not in json.dumps(report)


USER_CONNECTOR = """\
apiVersion: goondan.ai/v1
kind: Connector
metadata:
  name: poller
spec:
  entry: ./poller.py
  events:
    - name: tick
"""

POLLER = """\
CONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "interval": {"type": "integer", "minimum": 1},
        "mode": {"enum": ["fast", "slow"]},
    },
}


async def run(ctx):
    pass
"""


def poller_connection(*config_lines: str) -> str:
    lines = "".join(f"    {line}\n" for line in config_lines)
    return (
        "apiVersion: goondan.ai/v1\nkind: Connection\nmetadata:\n  name: ticks\nspec:\n"
        f"  connectorRef: Connector/poller\n  config:\n{lines}"
    )


def test_a_user_connectors_literal_config_schema_is_the_judge_with_string_values_read_as_declared(
    tmp_path: Path,
) -> None:
    good = write_bundle(
        tmp_path / "good",
        ECHO_BUNDLE,
        USER_CONNECTOR,
        poller_connection('interval: { value: "30" }', "mode: { value: slow }"),
        files={"poller.py": POLLER},
    )
    code, report = validate_json(tmp_path, good)
    assert (code, report["errors"]) == (0, [])
    bad = write_bundle(
        tmp_path / "bad",
        ECHO_BUNDLE,
        USER_CONNECTOR,
        poller_connection('interval: { value: "0" }', "mode: { value: fats }", "intreval: { value: x }"),
        files={"poller.py": POLLER},
    )
    code, report = validate_json(tmp_path, bad)
    assert code == 4, report
    by_key = {e["path"].rsplit(".", 1)[-1]: e for e in report["errors"]}
    assert set(by_key) == {"interval", "mode", "intreval"}, report
    assert all(e["code"] == "E_CONNECTOR_CONFIG" for e in by_key.values())
    assert "did you mean 'fast'?" in by_key["mode"]["suggestion"]
    assert "did you mean 'interval'?" in by_key["intreval"]["suggestion"]


def test_gdn_run_rejects_a_misspelt_connection_config_before_starting_anything(tmp_path: Path) -> None:
    b = write_bundle(
        tmp_path / "b", ECHO_BUNDLE, webhook_connection('port: { value: "9" }', "replyMode: { value: strem }")
    )
    proc = gdn(tmp_path, "run", str(b), timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "[E_CONNECTOR_CONFIG]" in proc.stderr and "did you mean 'stream'?" in proc.stderr
    assert "Starting" not in proc.stdout + proc.stderr


def test_a_plain_string_where_a_value_source_belongs_suggests_the_mapping_without_echoing_the_value(
    tmp_path: Path,
) -> None:
    text = webhook_connection("replyMode: stream") + "  secrets:\n    signingSecret: hunter2-secret\n"
    b = write_bundle(tmp_path / "b", ECHO_BUNDLE, text)
    code, report = validate_json(tmp_path, b)
    assert code == 4, report
    suggestions = {e["path"].rsplit(".", 1)[-1]: e["suggestion"] for e in report["errors"]}
    assert suggestions["replyMode"].startswith('write replyMode: {value: "..."}'), suggestions
    assert suggestions["signingSecret"].startswith('write signingSecret: {value: "..."}'), suggestions
    assert "hunter2" not in json.dumps(report)


def test_the_schema_is_read_without_importing_the_connector_constants_folded(tmp_path: Path) -> None:
    # `{"enum": list(MODES)}` with `MODES = ("fast", "slow")` reads as a literal: a user connector's
    # schema is checked, and the built-in webhook's is read without importing the connector runtime
    poller = POLLER.replace('{"enum": ["fast", "slow"]}', '{"enum": list(MODES)}')
    b = write_bundle(
        tmp_path / "b",
        ECHO_BUNDLE,
        USER_CONNECTOR,
        poller_connection("mode: { value: fats }"),
        webhook_connection("replyMode: { value: strem }").replace("name: http", "name: hook"),
        files={"poller.py": 'MODES = ("fast", "slow")\n' + poller},
    )
    script = (
        "import sys, json\nfrom goondan.bundle import validate_bundle\n"
        f"report = validate_bundle({str(b)!r}, env={{}})\n"
        "print(json.dumps([[e.path, e.suggestion] for e in report.errors]))\n"
        "print('goondan.connectors' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    errors, imported = proc.stdout.splitlines()
    suggestions = {path.rsplit(".", 1)[-1]: hint for path, hint in json.loads(errors)}
    assert suggestions == {"mode": "did you mean 'fast'?", "replyMode": "did you mean 'stream'?"}, errors
    assert imported == "False"
