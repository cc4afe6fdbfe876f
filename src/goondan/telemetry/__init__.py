"""OpenTelemetry export of a swarm's traces (the ``otel`` extra).

Every turn, step, model call and tool call becomes a span with the trace and span ids of its
runtime-event records (goondan/_spans.py), sent over OTLP/HTTP to the receiver the standard
environment (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_SDK_DISABLED``, ...) or the bundle's ``Swarm.spec.telemetry.otlp`` names. The runtime
facade starts it (``start_telemetry``) and listens to the executor's runtime events, which every
executor forwards to the host: one exporter per runtime, none in agent processes.

Off (no endpoint anywhere) it costs one look at a few environment variables per runtime start:
nothing of OpenTelemetry is imported and no event is looked at.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from ..errors import GoondanError
from ._config import TelemetryConfig, telemetry_config

log = logging.getLogger("goondan.telemetry")


class Telemetry(Protocol):
    """What the runtime holds while export is on."""

    def on_event(self, record: Mapping[str, Any]) -> None: ...

    def shutdown(self, timeout_s: float = 3.0) -> None: ...


def start_telemetry(
    setting: Any, env: Mapping[str, str], *, swarm: str | None = None, where: str = "Swarm spec.telemetry"
) -> Telemetry | None:
    """The span exporter for a runtime, or None when export is off. ``setting`` is the parsed
    ``Swarm.spec.telemetry`` (or None). Without the ``otel`` extra installed, a bundle that asks
    for export fails with ``E_TELEMETRY_UNAVAILABLE``; export asked for only by the environment
    is skipped with a warning (the variables may be meant for other programs)."""
    config = telemetry_config(setting, env, where=where)
    if config is None:
        return None
    try:
        from ._export import SpanExport
    except ImportError as exc:
        message = f"OpenTelemetry export needs the otel extra, which is not installed ({exc})"
        suggestion = "pip install 'goondan-runtime[otel]'"
        if config.explicit:
            raise GoondanError("E_TELEMETRY_UNAVAILABLE", message, suggestion=suggestion) from None
        log.warning("%s; traces are not exported. %s", message, suggestion)
        return None
    try:
        return SpanExport(config, swarm=swarm)
    except ValueError as exc:  # the SDK checks its OTEL_BSP_* / OTEL_EXPORTER_* settings
        raise GoondanError(
            "E_TELEMETRY_CONFIG",
            f"the OpenTelemetry SDK refused its settings: {exc}",
            suggestion="Check the OTEL_BSP_* and OTEL_EXPORTER_OTLP_* environment variables.",
        ) from None


__all__ = ["Telemetry", "TelemetryConfig", "start_telemetry", "telemetry_config"]
