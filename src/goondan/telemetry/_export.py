"""The OpenTelemetry side: spans assembled from runtime events (goondan/_spans.py) become SDK
``ReadableSpan`` objects with the records' own trace and span ids, handed to a
``BatchSpanProcessor`` in front of the OTLP/HTTP exporter.

Imported only when export is on (goondan.telemetry.start_telemetry): it imports the SDK, which
costs about 80 ms. The tracer API is not used: a tracer makes its own ids, and ours must be the ones
``runtime-events.jsonl`` holds so that a trace in the backend and ``gdn logs`` name the same spans.

The listener runs on the host's event loop for every runtime event of every agent process (the
executors forward them there), so it only assembles spans and queues them; the batch processor's
thread does the HTTP. That thread's failures are logged once by us instead of once per batch by
the exporter (its own log records are filtered while it exports for us), and never reach a turn.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from .._spans import Span, SpanAssembler
from ._config import TelemetryConfig

log = logging.getLogger("goondan.telemetry")

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
# loggers of the OTLP/HTTP exporter whose per-batch complaints we replace with one warning
_EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.exporter.otlp.common.http")
_exporting = threading.local()


class _OwnExportFilter(logging.Filter):
    """Drops the exporter's log records while it exports for us (other exporters in the same
    process keep theirs): a receiver that is down would otherwise log on every batch. A warning
    among them ("Transient error ..., retrying in 1s") is the first sign that an attempt failed,
    long before the export returns: it is noted on the exporter so a shutdown stops waiting."""

    def filter(self, record: logging.LogRecord) -> bool:
        owner = getattr(_exporting, "active", None)
        if owner is None:
            return True
        if record.levelno >= logging.WARNING:
            owner.attempt_failed = True
        return False


_FILTER = _OwnExportFilter()


class _QueueFullOnce(logging.Filter):
    """The batch processor warns for every span it drops when its queue (2,048 spans by default,
    ``OTEL_BSP_MAX_QUEUE_SIZE``) is full, from the thread recording events; once is enough."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Queue full"):
            return True
        if self.seen:
            return False
        self.seen = True
        return True


_QUEUE_FULL = _QueueFullOnce()
_PROCESSOR_LOGGER = "opentelemetry.sdk._shared_internal"


class _OnceLoggingExporter(SpanExporter):
    def __init__(self, inner: OTLPSpanExporter, endpoint: str) -> None:
        self._inner = inner
        self._endpoint = endpoint
        self._warned = False
        self._shut = False
        # set by the log filter when an attempt fails and the exporter is about to retry
        self.attempt_failed = False

    @property
    def warned(self) -> bool:
        return self._warned

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        _exporting.active = self
        self.attempt_failed = False  # about this export, not one that failed earlier
        try:
            result = self._inner.export(spans)
        except Exception as exc:  # an exporter bug must not kill the processor's thread
            result = SpanExportResult.FAILURE
            self._warn(f"{type(exc).__name__}: {exc}")
        else:
            if result is not SpanExportResult.SUCCESS:
                self._warn("the receiver did not accept them or could not be reached")
        finally:
            _exporting.active = None
        return result

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "could not export spans to %s (%s); turns go on, spans of failed exports are dropped "
                "and this is not logged again",
                self._endpoint,
                why,
            )

    def shutdown(self) -> None:
        if not self._shut:  # called early to cut a retry short, then again by the processor
            self._shut = True
            self._inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _version() -> str:
    try:
        return metadata.version("goondan-runtime")
    except metadata.PackageNotFoundError:
        return "0"


class SpanExport:
    """Turns runtime events into exported spans. :meth:`on_event` is the runtime-event listener;
    :meth:`shutdown` flushes what is queued (bounded) and stops the processor's thread."""

    def __init__(self, config: TelemetryConfig, *, swarm: str | None = None) -> None:
        attributes: dict[str, Any] = dict(config.resource)
        if swarm:
            attributes.setdefault("goondan.swarm.name", swarm)
        self.config = config
        self._resource = Resource.create(attributes)
        self._scope = InstrumentationScope("goondan", _version())
        for name in _EXPORTER_LOGGERS:
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)
        processor_logger = logging.getLogger(_PROCESSOR_LOGGER)
        if _QUEUE_FULL not in processor_logger.filters:
            processor_logger.addFilter(_QUEUE_FULL)
        inner = OTLPSpanExporter(endpoint=config.endpoint, headers=config.headers)
        self._exporter = _OnceLoggingExporter(inner, config.endpoint)
        self._processor = BatchSpanProcessor(self._exporter)
        self._assembler = SpanAssembler(capture_content=config.capture_content)
        self._closed = False
        self._failed = False

    def on_event(self, record: Mapping[str, Any]) -> None:
        if self._closed:
            return
        try:
            for span in self._assembler.feed(record):
                self._processor.on_end(self._readable(span))
        except Exception:
            if not self._failed:  # a record we cannot read must not break the runtime
                self._failed = True
                log.exception("could not turn a runtime event into a span (not logged again)")

    def _readable(self, span: Span) -> ReadableSpan:
        context = SpanContext(int(span.trace_id, 16), int(span.span_id, 16), is_remote=False, trace_flags=_SAMPLED)
        parent = (
            SpanContext(int(span.trace_id, 16), int(span.parent_span_id, 16), is_remote=False, trace_flags=_SAMPLED)
            if span.parent_span_id
            else None
        )
        attributes: dict[str, Any] = dict(span.attributes)
        status = Status(StatusCode.UNSET)
        if span.error_type is not None:
            attributes["error.type"] = span.error_type
            status = Status(StatusCode.ERROR, span.error_message or span.error_type)
        return ReadableSpan(
            name=span.name,
            context=context,
            parent=parent,
            resource=self._resource,
            attributes=attributes,
            kind=_KINDS[span.kind],
            status=status,
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self._scope,
        )

    def shutdown(self, timeout_s: float = 3.0) -> None:
        """Export what is queued, waiting at most ``timeout_s``, then stop; an export still
        retrying is cut short. A receiver that refused or could not be reached is not waited for:
        once an attempt failed (the exporter would now back off 1, 2, 4 s ...) the wait ends, so a
        one-shot ``gdn run`` against a collector that is down exits at once instead of ~3 s later.
        A receiver that accepts and never answers is waited for up to the bound and then named in
        a warning (its spans would otherwise vanish without a word). Spans still open (a turn that
        never ended) are not sent."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        self._exporter.attempt_failed = False  # a receiver that was down earlier may be back
        worker = threading.Thread(target=self._processor.force_flush, name="goondan-otel-flush", daemon=True)
        worker.start()
        while worker.is_alive() and not self._exporter.attempt_failed and time.monotonic() < deadline:
            worker.join(min(0.02, max(0.0, deadline - time.monotonic())))
        if worker.is_alive() and not self._exporter.attempt_failed and not self._exporter.warned:
            log.warning(
                "could not export the last spans to %s: the receiver did not answer within %.1f s; they are dropped",
                self.config.endpoint,
                timeout_s,
            )
        # from here an export fails at once (an export still in its retry back-off wakes up), so
        # the processor's own last flush cannot hold the process either
        self._exporter.shutdown()
        # but a request already sent to a receiver that never answers runs to the exporter's own
        # timeout (10 s), and the processor's shutdown joins its thread: it is waited for only
        # within what is left of the bound (both threads are daemons and die with the process)
        closer = threading.Thread(target=self._processor.shutdown, name="goondan-otel-shutdown", daemon=True)
        closer.start()
        closer.join(max(0.1, deadline - time.monotonic()))


__all__ = ["SpanExport"]
