"""The OpenTelemetry SDK as the instrumentation tests use it: in-memory spans and metrics, instrumented per test.

``with Otel() as otel:`` instruments jsclient with its own providers (spans end in memory, synchronously)
and uninstruments at the end, so each test sees only its own spans.  The ``otel`` fixture (tests/conftest.py)
wraps that.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jsclient.instrumentation import JsclientInstrumentor


class Otel:
    """Providers of the SDK with in-memory export, and the instrumentor switched on with them."""

    def __init__(self, **instrument: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("tests")
        self._instrument = instrument

    def __enter__(self) -> Otel:
        JsclientInstrumentor().instrument(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **self._instrument
        )
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        JsclientInstrumentor().uninstrument()

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        """The finished spans, oldest first (those named ``name`` only, if given)."""
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        """The one finished span named ``name``."""
        found = self.spans(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r} among {[s.name for s in self.spans()]}"
        return found[0]

    def ended(self, name: str, count: int = 1) -> list[ReadableSpan]:
        """The ``count`` spans named ``name``, once they have ended: a span of another thread (a callback's, a
        future's done-callback's) ends a little after what the test waited for, so wait for the span itself."""
        deadline = time.monotonic() + 10
        while len(self.spans(name)) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        found = self.spans(name)
        assert len(found) == count, f"{len(found)} spans named {name!r} among {[s.name for s in self.spans()]}"
        return found

    def finished(self, name: str) -> ReadableSpan:
        """The one span named ``name``, once it has ended (see :meth:`ended`)."""
        return self.ended(name)[0]

    def points(self, metric: str) -> list[Any]:
        """The data points of ``metric`` collected now (sums, histograms or gauges)."""
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        points.extend(m.data.data_points)
        return points

    def total(self, metric: str, **attributes: Any) -> float:
        """The sum of ``metric``'s points whose attributes include ``attributes``."""
        return sum(
            getattr(p, "value", None) if hasattr(p, "value") else p.count
            for p in self.points(metric)
            if all(p.attributes.get(k) == v for k, v in attributes.items())
        )
