"""Whether and where spans go: the standard OTEL_* environment over Swarm.spec.telemetry."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import goondan
from goondan import ConfigError, GoondanError
from goondan.telemetry import telemetry_config
from goondan.telemetry._config import parse_pairs


def _setting(tmp_path: Path, telemetry: dict[str, Any]) -> Any:
    import otel_kit

    root = otel_kit.two_agent_bundle(tmp_path / "b", telemetry=telemetry)
    # export off while loading: the loader would refuse a header variable these tests leave unset
    bundle = goondan.load_bundle(root, env={"OTEL_SDK_DISABLED": "true"})
    return bundle.select_swarm(None).spec.telemetry


def test_export_is_off_without_an_endpoint_anywhere() -> None:
    assert telemetry_config(None, {}) is None
    assert telemetry_config(None, {"OTEL_SERVICE_NAME": "svc"}) is None


def test_a_base_endpoint_gets_the_traces_path_and_a_traces_endpoint_is_used_as_it_is() -> None:
    base = telemetry_config(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert base is not None and base.endpoint == "http://collector:4318/v1/traces"
    exact = telemetry_config(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom/path"})
    assert exact is not None and exact.endpoint == "http://c:4318/custom/path"
    default = telemetry_config(None, {"OTEL_TRACES_EXPORTER": "otlp"})
    assert default is not None and default.endpoint == "http://localhost:4318/v1/traces"


def test_sdk_disabled_or_exporter_none_turns_off_even_a_bundle_setting(tmp_path: Path) -> None:
    setting = _setting(tmp_path, {"otlp": {"endpoint": "http://localhost:4318"}})
    assert telemetry_config(setting, {}) is not None
    assert telemetry_config(setting, {"OTEL_SDK_DISABLED": "true"}) is None
    assert telemetry_config(setting, {"OTEL_TRACES_EXPORTER": "none"}) is None


def test_environment_wins_over_the_bundle_setting(tmp_path: Path) -> None:
    setting = _setting(
        tmp_path,
        {
            "otlp": {
                "endpoint": "https://cloud.example/api/public/otel",
                "serviceName": "from-bundle",
                "headers": {"Authorization": {"valueFrom": {"env": "OTLP_AUTH"}}, "X-Team": {"value": "a"}},
            }
        },
    )
    only_bundle = telemetry_config(setting, {"OTLP_AUTH": "Basic abc"})
    assert only_bundle is not None
    assert only_bundle.endpoint == "https://cloud.example/api/public/otel/v1/traces"
    assert only_bundle.headers == {"authorization": "Basic abc", "x-team": "a"}
    assert only_bundle.resource["service.name"] == "from-bundle"
    assert only_bundle.explicit
    env = {
        "OTLP_AUTH": "Basic abc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "OTEL_EXPORTER_OTLP_HEADERS": "X-Team=b%20c",
        "OTEL_SERVICE_NAME": "from-env",
    }
    both = telemetry_config(setting, env)
    assert both is not None
    assert both.endpoint == "http://127.0.0.1:4318/v1/traces"
    assert both.headers == {"authorization": "Basic abc", "x-team": "b c"}
    assert both.resource["service.name"] == "from-env"


def test_a_header_whose_variable_is_unset_names_the_variable_and_the_setting(tmp_path: Path) -> None:
    setting = _setting(
        tmp_path,
        {"otlp": {"endpoint": "http://localhost:4318", "headers": {"Authorization": {"valueFrom": {"env": "NOPE_X"}}}}},
    )
    with pytest.raises(ConfigError) as info:
        telemetry_config(setting, {})
    assert info.value.code == "E_CONFIG_ENV_MISSING"
    assert "NOPE_X" in info.value.message and "telemetry.otlp.headers.Authorization" in info.value.message


def test_grpc_protocol_is_refused_with_the_http_port_suggested() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(GoondanError) as info:
        telemetry_config(None, env)
    assert info.value.code == "E_TELEMETRY_CONFIG"
    assert "4318" in (info.value.suggestion or "")
    ok = telemetry_config(None, {**env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"})
    assert ok is not None  # the signal-specific variable wins


def test_a_service_name_in_resource_attributes_is_kept() -> None:
    config = telemetry_config(
        None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_RESOURCE_ATTRIBUTES": "service.name=svc,Team=Core"}
    )
    assert config is not None
    assert config.resource == {"service.name": "svc", "Team": "Core"}


def test_content_capture_is_off_unless_the_genai_variable_says_true() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    off = telemetry_config(None, env)
    on = telemetry_config(None, {**env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert off is not None and not off.capture_content
    assert on is not None and on.capture_content


_token = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@given(st.dictionaries(_token.filter(lambda s: s.strip() == s), _token.filter(lambda s: s.strip() == s), max_size=5))
def test_header_lists_round_trip_through_url_encoding(pairs: dict[str, str]) -> None:
    encoded = ",".join(f"{urllib.parse.quote(k, safe='')}={urllib.parse.quote(v, safe='')}" for k, v in pairs.items())
    assert parse_pairs(encoded, lower=False) == pairs


def test_gdn_validate_reports_an_unset_otlp_header_variable_at_its_line_unless_export_is_off(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    import otel_kit

    header = {"Authorization": {"valueFrom": {"env": "NOPE_OTLP_AUTH"}}}
    root = otel_kit.two_agent_bundle(
        tmp_path / "b", telemetry={"otlp": {"endpoint": "http://c:4318", "headers": header}}
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GOONDAN_", "NOPE_"))}

    def validate(**extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "goondan", "validate", str(root)]
        return subprocess.run(argv, env={**env, **extra}, capture_output=True, text=True, timeout=60)

    proc = validate()
    # was "Bundle is valid." (exit 0), and the service then failed to start on the same variable
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "[E_CONFIG_ENV_MISSING] required environment variable NOPE_OTLP_AUTH is not set" in proc.stdout
    assert "spec.telemetry.otlp.headers.Authorization (goondan.yaml:" in proc.stdout
    assert validate(NOPE_OTLP_AUTH="Basic x").returncode == 0
    assert validate(OTEL_SDK_DISABLED="true").returncode == 0  # the run never reads it then
