"""Instrumented jsclient under a failing exporter and across ``os.fork()``, against a real nats-server.

What is proven is work done, never time taken: a number of publishes, deliveries and requests complete while
an exporter raises on every span, and while another exporter's export is held on an Event that only the test
releases.  The fork test follows tests/test_faults.py: requests are in flight when the process forks.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import jsclient
from jsclient.instrumentation import JsclientInstrumentor
from jsclient.server import NatsServer

from .otelkit import Otel

pytestmark = pytest.mark.timeout(120)


class RaisingExporter(SpanExporter):
    """Fails every export, as an exporter whose collector is down may."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()  # called from every thread that ends a span

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.calls += 1
        raise ConnectionRefusedError("the collector is down")


class HeldExporter(SpanExporter):
    """Blocks in its first export until the test releases it, as an exporter stuck on a slow network may."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        self.entered.set()
        self.release.wait(60)
        return SpanExportResult.SUCCESS


def ids(context: Any) -> tuple[int, int] | None:
    """(trace id, span id) of a span context, or None."""
    return None if context is None else (context.trace_id, context.span_id)


class Countdown:
    """Set once ``count`` calls have been made."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, *_: Any) -> None:
        with self._lock:
            self.left -= 1
            if self.left == 0:
                self.done.set()


def test_an_exporter_that_raises_or_blocks_never_breaks_or_stalls_publishes_deliveries_or_the_reader(
    server: NatsServer, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="opentelemetry")  # the SDK logs each failed export and dropped span
    at_once, batched, held = RaisingExporter(), RaisingExporter(), HeldExporter()
    provider = otel.tracer_provider
    provider.add_span_processor(SimpleSpanProcessor(at_once))  # runs on the thread that ends the span
    provider.add_span_processor(BatchSpanProcessor(batched, max_export_batch_size=1))
    provider.add_span_processor(BatchSpanProcessor(held, max_queue_size=8, max_export_batch_size=1))
    count = 300
    try:
        with jsclient.connect(server.url) as nc:
            delivered = Countdown(count + 1)
            nc.subscribe("load.cb", callback=delivered)
            pulled = nc.subscribe("load.pull")
            nc.subscribe("load.svc", callback=lambda m: m.respond(m.data))
            nc.flush()
            nc.publish("load.first", b"")  # its span wakes the held exporter's worker, which then blocks
            assert held.entered.wait(30), "the held exporter was never called"

            for i in range(count):
                nc.publish("load.cb", b"%d" % i)
                nc.publish("load.pull", b"%d" % i)
            futures = [nc.request_async("load.svc", b"%d" % i, timeout=30) for i in range(count)]
            replies = [nc.request("load.svc", b"%d" % i, timeout=30).data for i in range(count)]
            nc.publish("load.cb", b"last")  # delivered in order: once it is, every earlier callback's span ended
            assert [pulled.next_msg(timeout=30).data for _ in range(count)] == [b"%d" % i for i in range(count)]
            assert [f.result(timeout=30).data for f in futures] == [b"%d" % i for i in range(count)]
            assert replies == [b"%d" % i for i in range(count)]
            assert delivered.done.wait(30)

            assert not held.release.is_set() and held.calls == 1, "all of that ran while one export was held"
            processed = otel.spans("process load.cb")
            assert len(processed) >= count
            assert len(otel.spans("receive load.pull")) == count
            assert len(otel.spans("request load.svc")) >= count  # the async ones end on the events thread
            assert at_once.calls >= len(processed) + 2 * count  # it raised on every one of those spans' ends
    finally:
        held.release.set()
        provider.shutdown()  # each batch processor's worker exports what it holds, then ends
    assert batched.calls > 0 and held.calls > 1


def test_after_fork_the_child_reports_to_its_own_provider_and_the_parent_goes_on(
    server: NatsServer, otel: Otel
) -> None:
    """gunicorn's post_fork pattern: the child instruments again with providers of its own.  Its connection
    (``reconnect_after_fork``) and a new one both work there and are traced there; the parent's instrumentation
    and its requests in flight at the fork are untouched, and the child's request is answered by the parent's
    responder inside the child's trace."""
    gate = threading.Event()
    with jsclient.connect(server.url, name="responder") as responder, jsclient.connect(
        server.url, name="caller", reconnect_after_fork=True
    ) as nc:
        responder.subscribe("fork.echo", callback=lambda m: (gate.wait(30), m.respond(m.data)))
        responder.flush()
        futures = [nc.request_async("fork.echo", b"%d" % i, timeout=60) for i in range(20)]
        parents_spans = len(otel.spans())
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 9
            try:
                os.close(read_end)
                code = child(server.url, nc, otel, parents_spans, write_end)
            except BaseException:  # noqa: BLE001 - the exit code says what happened
                code = 8
            finally:
                os._exit(code)
        os.close(write_end)
        gate.set()
        with os.fdopen(read_end) as pipe:
            report = pipe.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, f"child: {report}"
        child_request = json.loads(report)
        assert [f.result(timeout=60).data for f in futures] == [b"%d" % i for i in range(20)]

        with otel.tracer.start_as_current_span("parent after the fork") as root:
            assert nc.request("fork.echo", b"parent", timeout=10).data == b"parent"
        # The responder's callbacks run in order: the one for the parent's last request has begun, so the one
        # for the child's request has ended.
        by_child = [s for s in otel.spans("process fork.echo") if ids(s.parent) == tuple(child_request)]
        assert len(by_child) == 1, "the parent's responder did not continue the child's trace"
        after = [s for s in otel.spans("request fork.echo") if ids(s.parent) == ids(root.get_span_context())]
        assert len(after) == 1, "the parent's instrumentation stopped at the fork"


def child(url: str, nc: jsclient.Connection, parents: Otel, parents_spans: int, report: int) -> int:
    """The forked child's checks: an exit code (0: all held) and the ids of its request span on ``report``."""
    JsclientInstrumentor().uninstrument()  # what the parent instrumented with: its providers, its exporter
    with Otel() as own:
        with own.tracer.start_as_current_span("child"):
            if nc.request("fork.echo", b"child", timeout=30).data != b"child":
                return 2
        request = own.span("request fork.echo")
        assert request.context is not None
        os.write(report, json.dumps([request.context.trace_id, request.context.span_id]).encode())
        os.close(report)
        with jsclient.connect(url, name="child") as fresh:
            done = threading.Event()
            fresh.subscribe("fork.child", callback=lambda m: done.set())
            fresh.flush()
            fresh.publish("fork.child", b"")
            if not done.wait(10):
                return 3
            fresh.flush()
        names = {s.name for s in own.spans()}
        if not {"child", "request fork.echo", "publish fork.child"} <= names:
            return 4
        if len(parents.spans()) != parents_spans:
            return 5  # the inherited copy of the parent's exporter got a span of the child's
    return 0
