"""A Spark Python worker's OpenTelemetry setup, as a user's would be there (tests/test_instrumentation_spark.py).

Spark starts its Python workers itself; a user instruments them with ``opentelemetry-instrument``'s
``sitecustomize`` or one of their own on the workers' ``PYTHONPATH``.  This one does that when
``JSCLIENT_OTEL_FILE`` names a file: an SDK tracer provider and meter provider whose exporters append JSON
lines there (each finished span; each export of the worker's counters, cumulative, with its pid), and jsclient
instrumented with them.  Both export only when flushed (their schedules are an hour long), so what the file
holds is what the instrumentation flushed at the end of each task.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any


def _append(path: str, records: list[dict[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as out:  # one write per record: appends of workers do not mix
        for record in records:
            out.write(json.dumps(record) + "\n")
            out.flush()


def _setup(path: str) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        MetricsData,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from jsclient.instrumentation import JsclientInstrumentor

    class Spans(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            _append(path, [{
                "record": "span", "pid": os.getpid(), "name": s.name, "kind": s.kind.name,
                "trace_id": s.context.trace_id if s.context else None,
                "span_id": s.context.span_id if s.context else None,
                "parent_span_id": s.parent.span_id if s.parent else None,
                "attributes": dict(s.attributes or {}),
            } for s in spans])
            return SpanExportResult.SUCCESS

    class Sums(MetricExporter):
        def export(
            self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            points = [
                {"name": m.name, "attributes": dict(p.attributes or {}), "value": p.value}
                for resource in metrics_data.resource_metrics
                for scope in resource.scope_metrics
                for m in scope.metrics
                for p in m.data.data_points
                if hasattr(p, "value")
            ]
            _append(path, [{"record": "metrics", "pid": os.getpid(), "points": points}])
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            pass

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Spans(), schedule_delay_millis=3_600_000))
    reader = PeriodicExportingMetricReader(Sums(), export_interval_millis=3_600_000)
    JsclientInstrumentor().instrument(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )


if os.environ.get("JSCLIENT_OTEL_FILE"):
    _setup(os.environ["JSCLIENT_OTEL_FILE"])
