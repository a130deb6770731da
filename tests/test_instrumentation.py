"""jsclient.instrumentation on core NATS, against a real nats-server, with the SDK's in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import jsclient
from jsclient.connection import Connection
from jsclient.instrumentation import JsclientInstrumentor
from jsclient.server import NatsServer
from jsclient.subscription import Subscription

from .otelkit import Otel

pytestmark = pytest.mark.timeout(60)


def hex_id(span_id: int) -> str:
    return format(span_id, "016x")


def test_import_jsclient_imports_no_opentelemetry() -> None:
    code = (
        "import sys, jsclient, jsclient.jetstream, jsclient.micro\n"
        "print(any(m.startswith('opentelemetry') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_publish_is_a_producer_span_whose_context_travels_in_the_headers(nc: jsclient.Connection, otel: Otel) -> None:
    sub = nc.subscribe("orders.*")
    nc.flush()
    nc.publish("orders.new", b"12345")
    msg = sub.next_msg(timeout=5)
    span = otel.span("publish orders.new")
    assert span.kind is SpanKind.PRODUCER
    assert span.attributes is not None
    assert dict(span.attributes) | {"server.port": 0} == {
        "messaging.system": "nats", "messaging.operation.name": "publish", "messaging.operation.type": "send",
        "messaging.destination.name": "orders.new", "messaging.message.body.size": 5,
        "server.address": "127.0.0.1", "server.port": 0,
    }
    assert span.context is not None
    assert msg.headers["traceparent"].startswith(f"00-{span.context.trace_id:032x}-{hex_id(span.context.span_id)}-")


def test_a_traceparent_the_caller_set_is_kept_and_the_callers_headers_are_not_changed(
    nc: jsclient.Connection, otel: Otel
) -> None:
    sub = nc.subscribe("keep")
    nc.flush()
    theirs = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x": "1"}
    mine = {"x": "2"}
    with otel.tracer.start_as_current_span("root"):
        nc.publish("keep", b"", headers=theirs)
        nc.publish("keep", b"", headers=mine)
    assert sub.next_msg(timeout=5).headers["traceparent"] == theirs["traceparent"]
    second = sub.next_msg(timeout=5).headers
    assert second["x"] == "2" and "traceparent" in second
    assert mine == {"x": "2"}, "the caller's mapping was changed"


def test_request_parents_the_responders_process_span_and_ends_with_the_reply(
    nc: jsclient.Connection, otel: Otel
) -> None:
    nc.subscribe("svc.echo", queue="workers", callback=lambda m: m.respond(m.data))
    nc.flush()
    with otel.tracer.start_as_current_span("root") as root:
        assert nc.request("svc.echo", b"hi", timeout=5).data == b"hi"
    request = otel.span("request svc.echo")
    process = otel.finished("process svc.echo")  # it ends on the callback's thread, after the reply went
    assert request.kind is SpanKind.CLIENT and process.kind is SpanKind.CONSUMER
    assert request.parent is not None and request.parent.span_id == root.get_span_context().span_id
    assert process.parent is not None and request.context is not None
    assert process.parent.span_id == request.context.span_id
    assert process.attributes is not None and process.attributes["messaging.consumer.group.name"] == "workers"


def test_a_failed_request_ends_its_span_with_the_error(nc: jsclient.Connection, otel: Otel) -> None:
    with pytest.raises(jsclient.NoRespondersError):
        nc.request("nobody.home", b"", timeout=5)
    nc.subscribe("silent")
    nc.flush()
    with pytest.raises(jsclient.TimeoutError):
        nc.request("silent", b"", timeout=0.2)
    for name, error in (("request nobody.home", "NoRespondersError"), ("request silent", "TimeoutError")):
        span = otel.span(name)
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None and span.attributes["error.type"] == error
    assert otel.total("messaging.client.operation.duration", **{"error.type": "TimeoutError"}) == 1


def test_request_async_ends_its_span_when_the_future_resolves(nc: jsclient.Connection, otel: Otel) -> None:
    gate = threading.Event()
    nc.subscribe("slow.svc", callback=lambda m: (gate.wait(5), m.respond(b"late")))
    nc.flush()
    future = nc.request_async("slow.svc", b"", timeout=5)
    assert otel.spans("request slow.svc") == []
    gate.set()
    assert future.result(timeout=5).data == b"late"
    nc.flush()
    assert otel.finished("request slow.svc").status.status_code is StatusCode.UNSET  # ends on the events thread


def test_next_msg_gives_a_receive_span_linked_to_the_producer_and_none_for_a_timeout(
    nc: jsclient.Connection, otel: Otel
) -> None:
    sub = nc.subscribe("jobs.>")
    nc.flush()
    with pytest.raises(jsclient.TimeoutError):
        sub.next_msg(timeout=0.05)
    nc.publish("jobs.a.1", b"x")
    sub.next_msg(timeout=5)
    producer = otel.span("publish jobs.a.1")
    receive = otel.span("receive jobs.a.1")
    assert receive.kind is SpanKind.CONSUMER and receive.attributes is not None
    assert receive.attributes["messaging.destination.template"] == "jobs.>"
    assert producer.context is not None
    assert [link.context.span_id for link in receive.links] == [producer.context.span_id]
    assert len(otel.spans()) == 2
    assert otel.total("messaging.client.consumed.messages") == 1
    assert otel.total("messaging.client.sent.messages") == 1


def test_iteration_gives_receive_spans_too(nc: jsclient.Connection, otel: Otel) -> None:
    sub = nc.subscribe("it")
    nc.flush()
    for i in range(3):
        nc.publish("it", b"%d" % i)
    taken = [m for _, m in zip(range(3), sub, strict=False)]
    assert len(taken) == 3 and len(otel.spans("receive it")) == 3


def test_spans_can_be_named_by_the_subscriptions_pattern(server: NatsServer) -> None:
    with Otel(span_name="{operation} {pattern}") as otel, jsclient.connect(server.url) as nc:
        done = threading.Event()
        nc.subscribe("user.*.events", callback=lambda m: done.set())
        nc.flush()
        nc.publish("user.4711.events", b"")
        assert done.wait(5)
        otel.finished("process user.*.events")  # it ends after the callback returns
    assert sorted(s.name for s in otel.spans()) == ["process user.*.events", "publish user.4711.events"]
    assert otel.total("messaging.client.consumed.messages", **{"messaging.destination.name": "user.*.events"}) == 1


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"tracer_provider": object()}, "tracer_provider"),
        ({"meter_provider": "prometheus"}, "meter_provider"),
        ({"span_name": "{operation} {queue}"}, "queue"),
        ({"span_name": "{operation"}, "span_name"),
        ({"span_name": ""}, "span_name"),
        ({"spanname": "{subject}"}, "spanname"),
    ],
)
def test_a_bad_option_is_refused_by_name_and_nothing_is_instrumented(keywords: dict[str, object], named: str) -> None:
    before = Connection.__dict__["publish"], Subscription.__dict__["next_msg"]
    with pytest.raises(jsclient.InvalidArgumentError, match=named):
        JsclientInstrumentor().instrument(**keywords)
    assert (Connection.__dict__["publish"], Subscription.__dict__["next_msg"]) == before
    assert not JsclientInstrumentor().is_instrumented_by_opentelemetry


def test_uninstrument_restores_the_methods_and_the_bytes_on_the_wire(nc: jsclient.Connection) -> None:
    before = {name: Connection.__dict__[name] for name in ("publish", "request", "subscribe")}
    sub = nc.subscribe("plain")
    nc.flush()
    with Otel() as otel:
        assert Connection.__dict__["publish"] is not before["publish"]
        with otel.tracer.start_as_current_span("root"):
            nc.publish("plain", b"traced")
        assert sub.next_msg(timeout=5).header is not None
    assert {name: Connection.__dict__[name] for name in before} == before
    with otel.tracer.start_as_current_span("root"):
        nc.publish("plain", b"untraced")
    msg = sub.next_msg(timeout=5)
    assert msg.header is None and msg.data == b"untraced"
    assert [s.name for s in otel.spans() if s.name != "root"] == ["publish plain", "receive plain"]


def test_a_connection_made_before_instrument_is_traced(server: NatsServer) -> None:
    with jsclient.connect(server.url) as nc:
        sub = nc.subscribe("early")
        nc.flush()
        with Otel() as otel:
            nc.publish("early", b"")
            sub.next_msg(timeout=5)
        assert {s.name for s in otel.spans()} == {"publish early", "receive early"}
