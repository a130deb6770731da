"""The instrumented table: jsclient's rows with OpenTelemetry switched on, beside the same rows without.

``jsclient-otel-drop``: a real SDK TracerProvider whose one span processor drops every span (what spans cost
to make), and an SDK MeterProvider with a reader (what the metrics cost to record).  ``jsclient-otel-batch``:
the same, spans going through a BatchSpanProcessor into an in-memory exporter (what a deployment pays, less
the exporter's own network I/O).  Each runs in a fresh process, as every client does; OpenTelemetry is
imported there only.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from benchmarks import clients, js_clients
from benchmarks.clients import run_main
from benchmarks.common import Figure
from benchmarks.report import OTEL_BATCH, OTEL_DROP

#: The work that benchmarks.clients measures; benchmarks.js_clients measures the rest.
CORE = ("publish", "next_msg", "request")


def work(row: str) -> str:
    """``otel_js_publish`` -> ``js_publish``."""
    return row.removeprefix("otel_")


def instrument(client: str) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from jsclient.instrumentation import JsclientInstrumentor

    tracer_provider = TracerProvider()
    if client == OTEL_BATCH:
        tracer_provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    else:
        tracer_provider.add_span_processor(SpanProcessor())  # the base class: on_end does nothing
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    JsclientInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)


def measure(client: str, row: str, url: str, n: int) -> Figure:
    what = work(row)
    if client != "jsclient":
        instrument(client)
    return (clients.jsclient_row if what in CORE else js_clients.jsclient_row)(what, url, n)


CLIENTS: dict[str, Callable[[str, str, int], Figure]] = {
    name: partial(measure, name) for name in ("jsclient", OTEL_DROP, OTEL_BATCH)
}

if __name__ == "__main__":
    run_main(CLIENTS)
