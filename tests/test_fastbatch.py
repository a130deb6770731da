"""Fast-ingest batch publish (ADR-50, js.publish_stream) against the bundled nats-server 2.15.

Three tests use the frame proxy (tests/proxy.py) to lose what a real server and a loopback socket
never lose on demand: one published message (a real gap, seen by the real server), and the
server's flow acks (so the publisher must ping). Each says so.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

import jsclient
from jsclient import errors
from jsclient.server import NatsServer
from tests.proxy import FrameProxy

pytestmark = pytest.mark.needs_server("2.14")  # fast-ingest batches


@pytest.fixture
def fast(js: jsclient.JetStream) -> jsclient.JetStream:
    js.add_stream(name="FAST", subjects=["fast.>"], allow_batched=True, allow_direct=True)
    return js


def _stored(js: jsclient.JetStream, stream: str = "FAST") -> list[bytes]:
    return [m.data for m in js.direct_get_batch(stream, "fast.>", max_messages=100_000)]


def test_every_message_is_stored_in_order(fast: jsclient.JetStream) -> None:
    one = fast.publish_stream([("fast.one", b"solo")])
    assert (one.stream, one.seq, one.count) == ("FAST", 1, 1)
    ack = fast.publish_stream(("fast.many", b"%d" % i) for i in range(20_000))  # a generator streams
    assert (ack.count, ack.seq, ack.gaps, ack.errors) == (20_000, 20_001, [], [])
    assert _stored(fast) == [b"solo"] + [b"%d" % i for i in range(20_000)]


def test_headers_ids_and_binary_payloads_are_kept(fast: jsclient.JetStream) -> None:
    payloads = [b"\x00\xff\r\n" * i for i in range(1, 6)]
    entries: list[object] = [
        {"subject": "fast.h", "data": p, "headers": {"K": f" v{i} "}, "msg_id": f"id-{i}"}
        for i, p in enumerate(payloads)
    ]
    ack = fast.publish_stream(entries)
    assert ack.count == 5
    stored = list(fast.direct_get_batch("FAST", "fast.h", max_messages=10))
    assert [m.data for m in stored] == payloads
    assert [(m.headers["K"], m.headers["Nats-Msg-Id"]) for m in stored] == [(f" v{i} ", f"id-{i}") for i in range(5)]
    again = fast.publish_stream([*entries[:2], ("fast.h", b"new")])  # the ids are deduplicated as usual
    assert again.count == 3
    assert [m.data for m in fast.direct_get_batch("FAST", "fast.h", max_messages=10)] == [*payloads, b"new"]


def test_a_refused_message_ends_a_fail_batch_and_is_reported_in_an_ok_one(fast: jsclient.JetStream) -> None:
    def batch(tag: str) -> list[object]:
        bad = {"subject": f"fast.{tag}", "data": b"3", "headers": {"Nats-Expected-Last-Sequence": "1"}}
        return [(f"fast.{tag}", b"1"), (f"fast.{tag}", b"2"), bad, (f"fast.{tag}", b"4")]

    with pytest.raises(jsclient.FastBatchError) as info:
        fast.publish_stream(batch("f"))
    error = info.value
    assert error.ack is not None and error.ack.count == 2 and error.sent >= 3
    assert [seq for seq, _ in error.errors] == [3] and isinstance(error.errors[0][1], errors.WrongLastSequenceError)
    assert error.err_code == 10071 and "2 of" in str(error)
    assert _stored(fast) == [b"1", b"2"]  # the first count, in order; nothing after the refusal
    ack = fast.publish_stream(batch("o"), gaps="ok")
    assert [seq for seq, _ in ack.errors] == [3] and ack.count == 4
    assert _stored(fast) == [b"1", b"2", b"1", b"2", b"4"]


def _lose_one_publish(pattern: bytes) -> object:
    """An upstream filter that drops the first client frame whose first line matches ``pattern``."""
    lost: list[bytes] = []

    def drop(frame: bytes) -> bytes:
        if not lost and re.search(pattern, frame.split(b"\r\n", 1)[0]):
            lost.append(frame)
            return b""
        return frame

    drop.lost = lost  # type: ignore[attr-defined]
    return drop


@pytest.mark.parametrize("gaps", ["fail", "ok"])
def test_a_lost_message_is_a_gap(server: NatsServer, gaps: str) -> None:
    """The proxy loses batch message 5 on its way to the server (as a leader change could): a real gap."""
    drop = _lose_one_publish(rb"\.5\.1\.\$FI ")
    with (
        FrameProxy(server.host_port, upstream_filter=drop) as proxy,  # type: ignore[arg-type]
        jsclient.connect(proxy.url) as nc,
    ):
        js = nc.jetstream()
        js.add_stream(name="GAP", subjects=["gap"], allow_batched=True, allow_direct=True)
        messages = [("gap", b"%d" % i) for i in range(1, 11)]
        if gaps == "fail":
            with pytest.raises(jsclient.FastBatchError) as info:
                js.publish_stream(messages, gaps="fail", flow=2)
            assert info.value.gaps == [(5, 6)]
            stored = [m.data for m in js.direct_get_batch("GAP", "gap", max_messages=100)]
            assert stored == [b"1", b"2", b"3", b"4"]  # nothing after the gap
            assert info.value.ack is None or info.value.ack.count == 4
        else:
            ack = js.publish_stream(messages, gaps="ok", flow=2)
            assert ack.gaps == [(5, 6)] and ack.count == 10  # the last batch sequence, the lost one included
            stored = [m.data for m in js.direct_get_batch("GAP", "gap", max_messages=100)]
            assert stored == [b"%d" % i for i in range(1, 11) if i != 5]
        assert drop.lost  # type: ignore[attr-defined]
        js.delete_stream("GAP")


def test_lost_flow_acks_are_asked_for_again(server: NatsServer) -> None:
    """The proxy loses the server's flow acks once past the start: the publisher must ping (operation 4)."""
    dropped: list[bytes] = []

    def lose_acks(frame: bytes) -> bytes:
        if b'"type":"ack"' in frame and b'"seq":0' not in frame and len(dropped) < 3:
            dropped.append(frame)
            return b""
        return frame

    with FrameProxy(server.host_port, lose_acks) as proxy, jsclient.connect(proxy.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="PING", subjects=["ping"], allow_batched=True)
        ack = js.publish_stream((("ping", b"%d" % i) for i in range(50)), flow=4, outstanding_acks=1, timeout=10)
        assert ack.count == 50 and len(dropped) == 3
        assert re.search(rb"\.\d+\.4\.\$FI ", bytes(proxy.sent))  # it pinged
        js.delete_stream("PING")


def test_a_silent_server_times_out() -> None:
    with NatsServer() as own, jsclient.connect(own.url, allow_reconnect=False) as nc:
        js = nc.jetstream()
        js.add_stream(name="SILENT", subjects=["silent"], allow_batched=True)
        js.publish_stream([("silent", b"1"), ("silent", b"2")])  # healthy first

        def forever() -> Iterator[tuple[str, bytes]]:
            i = 0
            while True:
                if i == 3:
                    own.pause()
                yield ("silent", b"%d" % i)
                i += 1

        start = time.monotonic()
        try:
            with pytest.raises(jsclient.TimeoutError, match="no answer from the stream for 2 s"):
                js.publish_stream(forever(), flow=2, outstanding_acks=1, timeout=2)
        finally:
            own.resume()
        assert time.monotonic() - start < 8


def test_bad_input_is_named_and_what_went_before_is_stored(fast: jsclient.JetStream) -> None:
    sent = fast.conn.stats()["out_msgs"]
    for kwargs, fragment in (
        ({"gaps": "maybe"}, "gaps must be 'ok' or 'fail'"),
        ({"flow": 0}, "flow must be an int from 1 to 65535"),
        ({"outstanding_acks": 4}, "outstanding_acks must be 1, 2 or 3"),
    ):
        with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
            fast.publish_stream([("fast.x", b"1")], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(jsclient.InvalidArgumentError, match="at least one message"):
        fast.publish_stream([])
    with pytest.raises(jsclient.InvalidArgumentError, match="batch message 0"):
        fast.publish_stream([("bad subject", b"1")])
    assert fast.conn.stats()["out_msgs"] == sent  # nothing went out
    entries = [("fast.ok", b"1"), ("fast.ok", b"2"), ("fast.*", b"3"), ("fast.ok", b"4")]
    with pytest.raises(jsclient.InvalidArgumentError, match=r"batch message 2.*2 earlier message\(s\) stored"):
        fast.publish_stream(entries)
    assert _stored(fast) == [b"1", b"2"]
    # A payload that is not bytes-like is a BadPayloadError (a TypeError): it ends the batch the same way.
    with pytest.raises(jsclient.BadPayloadError, match=r"batch message 1.*1 earlier message\(s\) stored"):
        fast.publish_stream([("fast.ok", b"5"), ("fast.ok", "text")])
    assert _stored(fast) == [b"1", b"2", b"5"]
    with pytest.raises(jsclient.BadPayloadError, match="batch message 0"):
        fast.publish_stream([("fast.ok", 7)])


def test_a_stream_without_batches_is_named(js: jsclient.JetStream) -> None:
    js.add_stream(name="NOFAST", subjects=["nofast"])
    with pytest.raises(jsclient.BatchNotEnabledError) as info:
        js.publish_stream([("nofast", b"1"), ("nofast", b"2")])
    assert info.value.err_code == 10205
    assert js.stream_info("NOFAST").state.messages == 0


def test_a_batch_no_stream_stores_raises_no_stream_response(js: jsclient.JetStream) -> None:
    """The first message's answer is the 503 no-responders status, mapped as any publish's (not a decode error)."""
    with pytest.raises(jsclient.NoStreamResponseError, match="no stream answered a publish"):
        js.publish_stream([("nowhere.fast", b"1"), ("nowhere.fast", b"2")])
    assert js.conn.is_connected


@pytest.mark.needs_server("2.10")  # no server at all: the module's mark does not apply
def test_the_flow_ack_wire_form() -> None:
    """The answers the publisher reads, as ADR-50 writes them (the live tests above see the real ones)."""
    from jsclient.jetstream.fastbatch import _DECODER

    ack = _DECODER.decode(json.dumps({"type": "ack", "seq": 10, "msgs": 15}).encode())
    gap = _DECODER.decode(b'{"type":"gap","last_seq":10,"seq":15}')
    assert (ack.type, ack.seq, ack.msgs) == ("ack", 10, 15) and (gap.last_seq, gap.seq) == (10, 15)


def test_a_bad_first_entry_sends_nothing(server: NatsServer) -> None:
    with FrameProxy(server.host_port) as proxy, jsclient.connect(proxy.url) as nc:
        nc.flush()
        before = bytes(proxy.sent)
        with pytest.raises(jsclient.InvalidArgumentError, match="batch message 0"):
            nc.jetstream().publish_stream([("bad subject", b"1")])
        nc.flush()
        assert b"SUB " not in bytes(proxy.sent)[len(before):]  # not even the control channel's subscription
