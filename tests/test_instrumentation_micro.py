"""jsclient.instrumentation on services (ADR-32), against a real nats-server: a SERVER span per handled request."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import jsclient
from jsclient import micro
from jsclient.server import NatsServer

from .otelkit import Otel

pytestmark = pytest.mark.timeout(60)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


def _echo(request: micro.Request) -> None:
    request.respond(b"echo:" + request.data)


def _fail(request: micro.Request) -> None:
    raise ValueError("no such order")


def test_request_service_handler_and_reply_are_one_trace(nc: jsclient.Connection, otel: Otel) -> None:
    svc = micro.add_service(nc, name="orders", version="1.2.3")
    svc.add_group("orders").add_endpoint("create", _echo)
    nc.flush()
    with otel.tracer.start_as_current_span("root") as root:
        assert nc.request("orders.create", b"hi", timeout=5).data == b"echo:hi"
    svc.stop()  # drains: the handler has returned, its span has ended
    request = otel.span("request orders.create")
    served = otel.span("process orders.create")  # one span: none of the core's beside it for the hand-over
    assert request.kind is SpanKind.CLIENT and served.kind is SpanKind.SERVER
    assert request.context is not None and served.context is not None
    assert served.parent is not None and served.parent.span_id == request.context.span_id
    assert served.context.trace_id == root.get_span_context().trace_id
    assert served.status.status_code is StatusCode.UNSET
    assert attrs(served) == {
        "messaging.system": "nats", "messaging.operation.name": "process", "messaging.operation.type": "process",
        "messaging.destination.name": "orders.create", "messaging.destination.template": "orders.create",
        "messaging.message.body.size": 2, "messaging.consumer.group.name": "q",
        "messaging.nats.service.name": "orders", "messaging.nats.service.endpoint": "create",
        "messaging.nats.service.version": "1.2.3", "messaging.nats.service.id": svc.id,
    }
    assert otel.total("messaging.process.duration", **{"messaging.destination.name": "orders.create"}) == 1


def test_an_error_answer_and_a_raising_handler_end_the_server_span_with_the_service_error(
    nc: jsclient.Connection, otel: Otel
) -> None:
    svc = micro.add_service(nc, name="billing", version="0.1.0", queue_group="")
    svc.add_endpoint("refuse", lambda r: r.respond_error(409, "already paid"))
    svc.add_endpoint("crash", _fail)
    nc.flush()
    assert nc.request("refuse", b"", timeout=5).headers[micro.ERROR_CODE_HEADER] == "409"
    assert nc.request("crash", b"", timeout=5).headers[micro.ERROR_CODE_HEADER] == "500"
    svc.stop()
    refused, crashed = otel.span("process refuse"), otel.span("process crash")
    assert refused.status.status_code is StatusCode.ERROR and refused.status.description == "already paid"
    assert attrs(refused)["error.type"] == "409" and attrs(refused)["messaging.nats.service.error.code"] == 409
    assert crashed.status.status_code is StatusCode.ERROR
    assert attrs(crashed)["error.type"] == "ValueError" and attrs(crashed)["messaging.nats.service.error.code"] == 500
    assert "messaging.consumer.group.name" not in attrs(refused)
    assert otel.total("messaging.process.duration", **{"error.type": "409"}) == 1
    assert otel.total("messaging.process.duration", **{"error.type": "ValueError"}) == 1


def test_endpoints_added_before_and_after_instrument_are_traced_on_a_service_made_before(server: NatsServer) -> None:
    with jsclient.connect(server.url) as nc:
        svc = micro.add_service(nc, name="early", version="1.0.0")
        svc.add_endpoint("before", _echo)
        with Otel() as otel:
            svc.add_endpoint("after", _echo)
            nc.flush()
            with otel.tracer.start_as_current_span("root"):
                nc.request("after", b"", timeout=5)
                nc.request("before", b"", timeout=5)
            svc.stop()
    served = {s.name: s for s in otel.spans() if s.kind is SpanKind.SERVER}
    # The dispatch seam reaches the endpoint added before instrument() too (jsclient.instrumentation.dispatch).
    assert sorted(served) == ["process after", "process before"]
    for name in ("after", "before"):
        request = otel.span(f"request {name}")
        assert request.context is not None and served[f"process {name}"].parent is not None
        assert served[f"process {name}"].parent.span_id == request.context.span_id
