"""jsclient.instrumentation on JetStream, against a real nats-server, with the SDK's in-memory exporter."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import jsclient
from jsclient.connection import Connection
from jsclient.headers import Headers
from jsclient.instrumentation.jetstream import ApiCall, api_call
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.direct import DirectBatch
from jsclient.jetstream.handles import Consumer, ConsumerMessages
from jsclient.jetstream.ordered import OrderedSubscription
from jsclient.jetstream.pull import MessageStream, PullSubscription
from jsclient.jetstream.push import PushSubscription
from jsclient.jetstream.reads import Reads
from jsclient.message import Msg

from .otelkit import Otel

pytestmark = pytest.mark.timeout(60)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


def traceparent(span: ReadableSpan) -> str:
    """The span's ``traceparent`` without its flags (whose random-id bit depends on the SDK)."""
    return f"00-{trace_id(span):032x}-{span_id(span):016x}-"


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None




def eventually(check: Any) -> None:
    """Wait for ``check()`` to hold (what a callback's thread records after its span ended)."""
    deadline = time.monotonic() + 5
    while not check():
        assert time.monotonic() < deadline, "it never held"
        time.sleep(0.01)


def stored_headers(js: jsclient.JetStream, stream: str, seq: int) -> Headers | None:
    hdrs = js.get_msg(stream, seq).hdrs
    return Headers.parse(hdrs) if hdrs else None


# -- publishing ------------------------------------------------------------------------------------------------
def test_js_publish_is_a_producer_span_with_the_acks_stream_and_sequence_and_its_context_is_stored(
    js: jsclient.JetStream, otel: Otel
) -> None:
    js.add_stream(name="ORDERS", subjects=["orders.>"])
    ack = js.publish("orders.new", b"12345", msg_id="m-1")
    span = otel.span("publish orders.new")
    assert span.kind is SpanKind.PRODUCER
    assert attrs(span) | {"server.port": 0} == {
        "messaging.system": "nats", "messaging.operation.name": "publish", "messaging.operation.type": "send",
        "messaging.destination.name": "orders.new", "messaging.message.body.size": 5,
        "messaging.message.id": "m-1", "messaging.nats.stream": "ORDERS", "messaging.nats.sequence": ack.seq,
        "server.address": "127.0.0.1", "server.port": 0,
    }
    stored = stored_headers(js, "ORDERS", ack.seq)
    assert stored is not None and stored["traceparent"].startswith(traceparent(span))
    assert stored["Nats-Msg-Id"] == "m-1"
    # The same id as a header of the caller's: a duplicate, said so.
    again = js.publish("orders.new", b"12345", headers={"Nats-Msg-Id": "m-1"})
    assert again.duplicate
    second = otel.spans("publish orders.new")[1]
    assert attrs(second)["messaging.nats.duplicate"] is True and attrs(second)["messaging.message.id"] == "m-1"
    assert "messaging.nats.duplicate" not in attrs(span)
    assert otel.total("messaging.client.operation.duration", **{"messaging.operation.name": "publish"}) == 2
    assert otel.total("messaging.client.sent.messages", **{"messaging.destination.name": "orders.new"}) == 2


def test_js_publish_keeps_a_callers_traceparent_and_never_changes_the_callers_headers(
    js: jsclient.JetStream, otel: Otel
) -> None:
    js.add_stream(name="KEEP", subjects=["keep.>"])
    theirs = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    mine = Headers({"x": "1"})
    kept = js.publish("keep.a", b"", headers=theirs)
    added = js.publish("keep.b", b"", headers=mine, msg_id="id-b")
    assert theirs == {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    assert mine == Headers({"x": "1"})
    first = stored_headers(js, "KEEP", kept.seq)
    assert first is not None and first["traceparent"] == theirs["traceparent"]
    second = stored_headers(js, "KEEP", added.seq)
    assert second is not None and second["x"] == "1"
    assert second["traceparent"].startswith(traceparent(otel.span("publish keep.b")))


def test_a_refused_js_publish_ends_its_span_with_the_servers_error_code(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="STRICT", subjects=["strict.>"])
    with pytest.raises(jsclient.WrongLastSequenceError):
        js.publish("strict.a", b"", expected_last_seq=99)
    span = otel.span("publish strict.a")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "WrongLastSequenceError"
    assert attrs(span)["messaging.nats.jetstream.error_code"] == 10071
    assert otel.total("messaging.client.operation.duration", **{"error.type": "WrongLastSequenceError"}) == 1


def test_publish_async_spans_end_when_the_ack_arrives_or_the_publish_fails(
    js: jsclient.JetStream, otel: Otel
) -> None:
    js.add_stream(name="ASYNC", subjects=["async.>"])
    ack = js.publish_async("async.a", b"abc", msg_id="a-1").result(timeout=5)
    refused = js.publish_async("async.b", b"", expected_last_seq=99)
    with pytest.raises(jsclient.WrongLastSequenceError):
        refused.result(timeout=5)
    good = otel.ended("publish async.a")[0]
    assert good.kind is SpanKind.PRODUCER and good.status.status_code is StatusCode.UNSET
    assert attrs(good)["messaging.nats.stream"] == "ASYNC" and attrs(good)["messaging.nats.sequence"] == ack.seq
    assert attrs(good)["messaging.message.id"] == "a-1"
    stored = stored_headers(js, "ASYNC", ack.seq)
    assert stored is not None and stored["traceparent"].startswith(traceparent(good))
    bad = otel.ended("publish async.b")[0]
    assert bad.status.status_code is StatusCode.ERROR
    assert attrs(bad)["messaging.nats.jetstream.error_code"] == 10071
    publishes = {"messaging.operation.name": "publish"}
    eventually(lambda: otel.total("messaging.client.operation.duration", **publishes) == 2)


@pytest.mark.needs_server("2.12")
def test_publish_batch_is_one_span_whose_context_every_member_carries(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="ATOM", subjects=["atom.>"], allow_atomic=True)
    pair = ("atom.a", b"1")
    mapping = {"subject": "atom.a", "data": b"22", "headers": {"x": "y"}}
    ack = js.publish_batch([pair, mapping])
    span = otel.span("publish atom.a")
    assert attrs(span)["messaging.batch.message_count"] == 2
    assert attrs(span)["messaging.nats.stream"] == "ATOM" and attrs(span)["messaging.nats.sequence"] == ack.seq
    assert otel.total("messaging.client.sent.messages") == 2  # each member once (not again as encoded frames)
    # A span of the commit's own would end on the events thread, before this later publish's does.
    js.publish_async("atom.b", b"").result(timeout=5)
    otel.ended("publish atom.b")
    assert [s.name for s in otel.spans() if s.name.startswith("request")] == [], "the commit has a span of its own"
    for seq in (1, 2):
        stored = stored_headers(js, "ATOM", seq)
        assert stored is not None and stored["traceparent"].startswith(traceparent(span))
    assert stored is not None and stored["x"] == "y"
    assert pair == ("atom.a", b"1") and mapping == {"subject": "atom.a", "data": b"22", "headers": {"x": "y"}}


# -- the trace: js.publish -> pull fetch -> ack ------------------------------------------------------
def test_js_publish_pull_fetch_and_ack_are_one_trace(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="WORK", subjects=["work.>"])
    psub = js.pull_subscribe("work.>", durable="w")
    with otel.tracer.start_as_current_span("producer") as root:
        js.publish("work.1", b"a")
        js.publish("work.2", b"b")
    msgs = psub.fetch(5, timeout=1)
    for msg in msgs:
        msg.ack()
    published = {s.name.split()[1]: s for s in otel.spans() if s.name.startswith("publish")}
    assert sorted(published) == ["work.1", "work.2"]
    receives = otel.spans("receive work.>")
    taken = sum(attrs(r)["messaging.batch.message_count"] for r in receives)
    assert taken == 2 and all(r.kind is SpanKind.CONSUMER for r in receives)
    assert attrs(receives[0]) | {"messaging.batch.message_count": 0} == {
        "messaging.system": "nats", "messaging.operation.name": "receive", "messaging.operation.type": "receive",
        "messaging.destination.name": "work.>", "messaging.batch.message_count": 0,
        "messaging.nats.stream": "WORK", "messaging.nats.consumer": "w", "messaging.consumer.group.name": "w",
    }
    assert {link.context.span_id for r in receives for link in r.links} == {span_id(p) for p in published.values()}
    for subject, producer in published.items():
        assert trace_id(producer) == root.get_span_context().trace_id
        ack = otel.span(f"ack {subject}")
        assert ack.kind is SpanKind.CLIENT and attrs(ack)["messaging.operation.type"] == "settle"
        assert trace_id(ack) == trace_id(producer) and parent_id(ack) == span_id(producer)
        assert attrs(ack)["messaging.nats.stream_sequence"] == int(subject.split(".")[1])
    assert otel.total("messaging.client.consumed.messages", **{"messaging.operation.name": "receive"}) == 2


def test_a_fetch_that_finds_nothing_gives_no_span(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="IDLE", subjects=["idle.>"])
    psub = js.pull_subscribe("idle.>", durable="i")
    assert psub.fetch(1, timeout=0.2) == []
    assert otel.spans("receive idle.>") == []


# -- deliveries ------------------------------------------------------------------------------------------------
def test_pull_messages_gives_a_receive_span_per_message(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="FLOW", subjects=["flow.>"])
    psub = js.pull_subscribe("flow.>", durable="f")
    js.publish("flow.1", b"1")
    js.publish("flow.2", b"22")
    with psub.messages(max_messages=10) as stream:
        taking = iter(stream)
        assert [next(taking).subject, next(taking).subject] == ["flow.1", "flow.2"]
    second = otel.span("receive flow.2")
    assert second.kind is SpanKind.CONSUMER and attrs(second)["messaging.message.body.size"] == 2
    assert attrs(second)["messaging.nats.consumer"] == "f" and attrs(second)["messaging.nats.stream_sequence"] == 2
    assert attrs(second)["messaging.destination.template"] == "FLOW"
    assert [link.context.span_id for link in second.links] == [span_id(otel.span("publish flow.2"))]
    assert len(otel.spans("receive flow.1")) == 1


def test_push_next_msg_and_iteration_give_receive_spans_with_the_delivery(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="PUSH", subjects=["push.>"])
    sub = js.subscribe("push.>", durable="pd")
    js.publish("push.a", b"x")
    js.publish("push.b", b"yy")
    sub.next_msg(timeout=5)
    next(iter(sub))
    first, second = otel.span("receive push.a"), otel.span("receive push.b")
    assert first.kind is SpanKind.CONSUMER
    assert attrs(first) == {
        "messaging.system": "nats", "messaging.operation.name": "receive", "messaging.operation.type": "receive",
        "messaging.destination.name": "push.a", "messaging.destination.template": "push.>",
        "messaging.message.body.size": 1, "messaging.nats.stream": "PUSH", "messaging.nats.consumer": "pd",
        "messaging.consumer.group.name": "pd", "messaging.nats.stream_sequence": 1,
        "messaging.nats.consumer_sequence": 1, "messaging.nats.delivered": 1,
    }
    assert attrs(second)["messaging.nats.stream_sequence"] == 2
    assert [link.context.span_id for link in first.links] == [span_id(otel.span("publish push.a"))]


def test_a_push_callback_runs_in_a_process_span_parented_by_the_publish(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="CB", subjects=["cb.>"])
    done = threading.Event()
    js.subscribe("cb.>", callback=lambda m: done.set())
    js.publish("cb.1", b"x")
    assert done.wait(5)
    process = otel.ended("process cb.1")[0]
    producer = otel.span("publish cb.1")
    assert process.kind is SpanKind.CONSUMER and parent_id(process) == span_id(producer)
    assert attrs(process)["messaging.destination.template"] == "cb.>"
    assert attrs(process)["messaging.nats.stream"] == "CB" and attrs(process)["messaging.nats.stream_sequence"] == 1
    assert attrs(process)["messaging.nats.delivered"] == 1
    assert attrs(process)["messaging.consumer.group.name"] == attrs(process)["messaging.nats.consumer"]
    auto_ack = otel.ended("ack cb.1")[0]  # after the callback returned: in the message's trace
    assert parent_id(auto_ack) == span_id(producer)
    assert [s.name for s in otel.spans() if s.name.startswith("process")] == ["process cb.1"]


def test_ordered_deliveries_are_traced_and_each_message_counted_once(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="ORD", subjects=["ord.>"])
    js.publish("ord.1", b"1")
    js.publish("ord.2", b"2")
    taker = js.subscribe("ord.>", ordered=True)
    taker.next_msg(timeout=5)
    got: list[str] = []
    done = threading.Event()

    def handle(msg: jsclient.Msg) -> None:
        got.append(msg.subject)
        if len(got) == 2:
            done.set()

    js.subscribe("ord.>", ordered=True, callback=handle)
    assert done.wait(5)
    processed = otel.ended("process ord.1") + otel.ended("process ord.2")
    assert [parent_id(p) for p in processed] == [span_id(otel.span(f"publish ord.{i}")) for i in (1, 2)]
    assert attrs(processed[1])["messaging.nats.stream_sequence"] == 2
    receive = otel.span("receive ord.1")  # the taker's; the callback thread's takes have none
    assert attrs(receive)["messaging.nats.stream"] == "ORD"
    assert otel.spans("receive ord.2") == []
    eventually(lambda: otel.total("messaging.client.consumed.messages") == 3)


def test_consume_gives_process_spans_only_and_messages_gives_receive_spans(
    js: jsclient.JetStream, otel: Otel, nc: jsclient.Connection
) -> None:
    js.add_stream(name="CON", subjects=["con.>"])
    consumer = js.create_consumer("CON", durable_name="c")
    js.publish("con.1", b"1")
    js.publish("con.2", b"2")
    seen: list[str] = []
    done = threading.Event()

    def handle(msg: jsclient.Msg) -> None:
        msg.ack()
        seen.append(msg.subject)
        if len(seen) == 2:
            done.set()

    with consumer.consume(handle):
        assert done.wait(5)
    for subject in ("con.1", "con.2"):
        process = otel.ended(f"process {subject}")[0]
        assert parent_id(process) == span_id(otel.span(f"publish {subject}"))
        assert attrs(process)["messaging.nats.consumer"] == "c"
        ack = otel.ended(f"ack {subject}")[0]  # in the callback: the process span's child, linked to the producer
        assert parent_id(ack) == span_id(process)
        assert [link.context.span_id for link in ack.links] == [span_id(otel.span(f"publish {subject}"))]
    assert [s.name for s in otel.spans() if s.name.startswith("receive")] == []
    eventually(lambda: otel.total("messaging.client.consumed.messages") == 2)
    # messages(): a receive span per message, also for those a drain hands out after the pulls stopped.
    for i in (3, 4, 5):
        js.publish(f"con.{i}", b"")
    reading = consumer.messages(max_messages=10)
    taking = iter(reading)
    next(taking)
    eventually(lambda: consumer.info().num_pending == 0)  # the server sent the other two
    nc.flush()  # and they are here
    reading.drain()
    assert [m.subject for m in taking] == ["con.4", "con.5"]
    for i in (3, 4, 5):
        assert attrs(otel.span(f"receive con.{i}"))["messaging.nats.stream_sequence"] == i


# -- settling --------------------------------------------------------------------------------------------------
def test_acks_naks_terms_and_ack_sync_are_settle_spans(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="SET", subjects=["set.>"])
    psub = js.pull_subscribe("set.>", durable="s")
    for i in range(1, 5):
        js.publish(f"set.{i}", b"")
    msgs = psub.fetch(4, timeout=5)
    while len(msgs) < 4:
        msgs += psub.fetch(4 - len(msgs), timeout=5)
    with otel.tracer.start_as_current_span("handler") as handler:
        msgs[0].ack()
        msgs[0].ack()  # sends nothing: no span
        msgs[1].nak()
        msgs[2].in_progress()
        msgs[2].term("poison")
        msgs[3].ack_sync(timeout=5)
    settled = {"ack set.1": "ack", "nak set.2": "nak", "in_progress set.3": "in_progress", "term set.3": "term",
               "ack set.4": "ack"}
    for name, op in settled.items():
        span = otel.span(name)
        assert span.kind is SpanKind.CLIENT and parent_id(span) == handler.get_span_context().span_id
        assert attrs(span)["messaging.operation.name"] == op and attrs(span)["messaging.operation.type"] == "settle"
        assert attrs(span)["messaging.nats.consumer"] == "s"
        assert [link.context.span_id for link in span.links] == [span_id(otel.span(f"publish {name.split()[1]}"))]
    assert [s.name for s in otel.spans() if s.name.startswith("request")] == [], "ack_sync's request was traced"
    again = psub.fetch(1, timeout=5)  # the nak'd one, delivered a second time
    again[0].ack()
    assert attrs(otel.spans("ack set.2")[0])["messaging.nats.delivered"] == 2


# -- direct gets and API calls ---------------------------------------------------------------------------------
def test_direct_gets_and_get_msg_are_one_client_span_each(js: jsclient.JetStream, otel: Otel) -> None:
    js.add_stream(name="READ", subjects=["read.>"], allow_direct=True)
    a = js.publish("read.a", b"1")
    b = js.publish("read.b", b"22")
    js.direct_get("READ", a.seq)
    js.direct_get("READ", last_by_subj="read.b")
    js.get_msg("READ", b.seq)
    with pytest.raises(jsclient.MessageNotFoundError):
        js.direct_get("READ", 99)
    assert [m.seq for m in js.direct_get_batch("READ", "read.>", max_messages=10)] == [1, 2]
    by_seq, last, missing, batch = otel.spans("jetstream DIRECT.GET")
    assert by_seq.kind is SpanKind.CLIENT
    assert attrs(by_seq) | {"server.port": 0} == {
        "messaging.system": "nats", "messaging.operation.name": "DIRECT.GET", "messaging.nats.stream": "READ",
        "messaging.nats.sequence": 1, "messaging.destination.name": "read.a", "messaging.message.body.size": 1,
        "server.address": "127.0.0.1", "server.port": 0,
    }
    assert attrs(last)["messaging.nats.sequence"] == 2 and attrs(last)["messaging.destination.name"] == "read.b"
    assert missing.status.status_code is StatusCode.ERROR and attrs(missing)["error.type"] == "MessageNotFoundError"
    assert attrs(batch)["messaging.batch.message_count"] == 2 and attrs(batch)["messaging.nats.sequence"] == 2
    get = otel.span("jetstream STREAM.MSG.GET")
    assert attrs(get)["messaging.nats.sequence"] == 2 and attrs(get)["messaging.message.body.size"] == 2
    assert [s.name for s in otel.spans() if s.name.startswith("request")] == []


def test_api_calls_are_client_spans_named_by_operation_with_the_servers_error_code(
    js: jsclient.JetStream, otel: Otel
) -> None:
    js.add_stream(name="API1", subjects=["api.>"])
    js.stream_info("API1")
    with pytest.raises(jsclient.StreamNotFoundError):
        js.stream_info("NOPE")
    js.add_consumer("API1", durable_name="dur")
    create = otel.span("jetstream STREAM.CREATE")
    assert create.kind is SpanKind.CLIENT
    assert attrs(create) | {"server.port": 0} == {
        "messaging.system": "nats", "messaging.operation.name": "STREAM.CREATE", "messaging.nats.stream": "API1",
        "server.address": "127.0.0.1", "server.port": 0,
    }
    found, missing = otel.spans("jetstream STREAM.INFO")
    assert found.status.status_code is StatusCode.UNSET
    assert missing.status.status_code is StatusCode.ERROR and attrs(missing)["messaging.nats.stream"] == "NOPE"
    assert attrs(missing)["error.type"] == "StreamNotFoundError"
    assert attrs(missing)["messaging.nats.jetstream.error_code"] == 10059
    consumer = otel.span("jetstream CONSUMER.CREATE")
    assert attrs(consumer)["messaging.nats.consumer"] == "dur"
    ordered = js.subscribe("api.>", ordered=True)
    name = ordered.consumer
    ordered.unsubscribe()  # deletes its consumer without waiting for the answer (request_async)
    deleted = otel.ended("jetstream CONSUMER.DELETE")[0]
    assert attrs(deleted)["messaging.nats.consumer"] == name and attrs(deleted)["messaging.nats.stream"] == "API1"
    assert [s.name for s in otel.spans() if s.name.startswith("request")] == [], "one API call gave two spans"
    assert otel.total("jsclient.jetstream.api.errors", **{"messaging.nats.jetstream.error_code": 10059}) == 1


@pytest.mark.parametrize(
    ("subject", "call"),
    [
        ("$JS.API.INFO", ApiCall("INFO", None, None)),
        ("$JS.API.STREAM.INFO.INFO", ApiCall("STREAM.INFO", "INFO", None)),
        ("$JS.hub.API.STREAM.MSG.GET.S", ApiCall("STREAM.MSG.GET", "S", None)),
        ("$JS.API.CONSUMER.CREATE.S", ApiCall("CONSUMER.CREATE", "S", None)),
        ("$JS.API.CONSUMER.CREATE.S.C.orders.>", ApiCall("CONSUMER.CREATE", "S", "C")),
        ("$JS.API.CONSUMER.DURABLE.CREATE.S.C", ApiCall("CONSUMER.DURABLE.CREATE", "S", "C")),
        ("$JS.API.DIRECT.GET.S.a.b", ApiCall("DIRECT.GET", "S", None)),
        ("$JS.API.SOMETHING.NEW.S", ApiCall("SOMETHING", None, None)),
        ("$JS.ACK.API.C.1.2.3.4.5", None),
        ("orders.new", None),
    ],
)
def test_api_subjects_are_read_into_a_bounded_operation_and_names(subject: str, call: ApiCall | None) -> None:
    assert api_call(subject) == call


# -- off -------------------------------------------------------------------------------------------------------
def test_uninstrument_restores_every_method_and_js_publish_sends_no_headers(
    nc: jsclient.Connection, js: jsclient.JetStream
) -> None:
    owners = (Connection, JetStream, Reads, DirectBatch, PushSubscription, OrderedSubscription, PullSubscription,
              MessageStream, ConsumerMessages, Consumer, Msg)
    before = {(owner, name): value for owner in owners for name, value in vars(owner).items()}
    js.add_stream(name="PLAIN", subjects=["plain.>"])
    sub = nc.subscribe("plain.>")
    nc.flush()
    with Otel() as otel:
        changed = {key for key, value in before.items() if vars(key[0]).get(key[1]) is not value}
        assert {(JetStream, "publish"), (Msg, "ack"), (PullSubscription, "fetch"), (Connection, "request")} <= changed
        with otel.tracer.start_as_current_span("root"):
            traced = js.publish("plain.a", b"x")
    after = {(owner, name): value for owner in owners for name, value in vars(owner).items()}
    assert after.keys() == before.keys() and all(after[key] is before[key] for key in before)
    with otel.tracer.start_as_current_span("root"):
        untraced = js.publish("plain.b", b"x")
    assert sub.next_msg(timeout=5).header is not None
    plain = sub.next_msg(timeout=5)
    assert plain.subject == "plain.b" and plain.header is None and plain.data == b"x"
    assert js.get_msg("PLAIN", traced.seq).hdrs is not None and js.get_msg("PLAIN", untraced.seq).hdrs is None
    assert [s.name for s in otel.spans() if s.name != "root"] == ["publish plain.a"]
