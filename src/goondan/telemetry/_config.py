"""Whether and where spans are exported: the standard ``OTEL_*`` environment over the bundle's
``Swarm.spec.telemetry`` setting. Pure (no OpenTelemetry import): deciding that export is off must
cost nothing, since it is what every run without the ``otel`` extra does."""

from __future__ import annotations

import dataclasses
import logging
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ..bundle import resolve_value_source
from ..errors import GoondanError

log = logging.getLogger("goondan.telemetry")

TRACES_PATH = "v1/traces"
DEFAULT_ENDPOINT = "http://localhost:4318/"
DEFAULT_SERVICE_NAME = "goondan"
_TRUE = ("true", "1", "yes", "on")


@dataclasses.dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """Resolved export settings. ``endpoint`` is the full traces URL; ``explicit`` says the bundle
    asked for export (a missing ``otel`` extra is then an error, not a warning)."""

    endpoint: str
    headers: dict[str, str]
    resource: dict[str, str]  # OTEL_RESOURCE_ATTRIBUTES with service.name settled
    capture_content: bool
    explicit: bool


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in _TRUE


def parse_pairs(value: str, *, lower: bool = True) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS`` / ``OTEL_RESOURCE_ATTRIBUTES``: ``k1=v1,k2=v2``, both sides
    URL-encoded (W3C Baggage style); ``lower`` folds the keys (HTTP header names)."""
    pairs: dict[str, str] = {}
    for item in value.split(","):
        name, sep, raw = item.partition("=")
        name = urllib.parse.unquote(name).strip()
        if sep and name:
            pairs[name.lower() if lower else name] = urllib.parse.unquote(raw).strip()
    return pairs


def traces_url(base: str) -> str:
    """A base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``, the bundle's ``endpoint``) → its traces URL."""
    trimmed = base.rstrip("/")
    return trimmed if trimmed.endswith("/" + TRACES_PATH) else f"{trimmed}/{TRACES_PATH}"


def _check_protocol(env: Mapping[str, str]) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = env.get(name, "").strip()
        if value:
            if value != "http/protobuf":
                raise GoondanError(
                    "E_TELEMETRY_CONFIG",
                    f"{name}={value} is not supported: goondan exports traces as OTLP over HTTP (http/protobuf)",
                    suggestion="Unset it (or set http/protobuf) and point OTEL_EXPORTER_OTLP_ENDPOINT at the "
                    "receiver's OTLP/HTTP port, usually 4318.",
                )
            return


def telemetry_config(
    setting: Any, env: Mapping[str, str], *, where: str = "Swarm spec.telemetry"
) -> TelemetryConfig | None:
    """The export settings, or None when export is off: ``OTEL_SDK_DISABLED=true`` or
    ``OTEL_TRACES_EXPORTER=none``, or neither an ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`` nor
    ``OTEL_TRACES_EXPORTER=otlp`` nor ``setting`` (the parsed ``Swarm.spec.telemetry``) asks for it.
    Environment values win over the bundle's. Raises ``E_TELEMETRY_CONFIG`` for settings that
    cannot work, ``E_CONFIG_ENV_MISSING`` for a header whose variable is unset."""
    if _flag(env, "OTEL_SDK_DISABLED"):
        return None
    exporters = [e.strip() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if "none" in exporters:
        return None
    otlp = getattr(setting, "otlp", None)
    traces_env = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    base_env = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if otlp is None and not traces_env and not base_env and "otlp" not in exporters:
        return None
    unsupported = [e for e in exporters if e != "otlp"]
    if unsupported:
        log.warning("OTEL_TRACES_EXPORTER=%s: only otlp is supported; exporting over OTLP/HTTP", ",".join(unsupported))
    _check_protocol(env)
    if traces_env:
        endpoint = traces_env  # the signal URL, used as it is
    elif base_env:
        endpoint = traces_url(base_env)
    elif otlp is not None:
        endpoint = traces_url(str(otlp.endpoint))
    else:
        endpoint = traces_url(DEFAULT_ENDPOINT)
    if not endpoint.startswith(("http://", "https://")):
        raise GoondanError(
            "E_TELEMETRY_CONFIG",
            f"the OTLP traces endpoint {endpoint!r} is not an http(s) URL",
            suggestion="Set OTEL_EXPORTER_OTLP_ENDPOINT to the receiver's base URL, e.g. http://localhost:4318.",
        )
    headers: dict[str, str] = {}
    if otlp is not None:
        for name, source in otlp.headers.items():
            value = resolve_value_source(source, env, required=True, path=f"{where}.otlp.headers.{name}")
            headers[name.lower()] = str(value)
    headers.update(parse_pairs(env.get("OTEL_EXPORTER_OTLP_HEADERS", "")))
    headers.update(parse_pairs(env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "")))
    resource = parse_pairs(env.get("OTEL_RESOURCE_ATTRIBUTES", ""), lower=False)
    service = (
        env.get("OTEL_SERVICE_NAME", "").strip()
        or resource.get("service.name")
        or (str(otlp.service_name) if otlp is not None and otlp.service_name else DEFAULT_SERVICE_NAME)
    )
    resource["service.name"] = service
    return TelemetryConfig(
        endpoint=endpoint,
        headers=headers,
        resource=resource,
        capture_content=_flag(env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
        explicit=otlp is not None,
    )


__all__ = ["DEFAULT_SERVICE_NAME", "TelemetryConfig", "parse_pairs", "telemetry_config", "traces_url"]
