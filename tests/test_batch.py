"""Atomic batch publish (ADR-50) against the bundled nats-server: all stored or none."""

from __future__ import annotations

from typing import Any

import pytest

import jsclient
from jsclient.server import NatsServer

pytestmark = [pytest.mark.needs_server("2.12"), pytest.mark.compat]  # atomic batches


@pytest.fixture
def atomic(js: jsclient.JetStream) -> jsclient.JetStream:
    js.add_stream(name="ATOM", subjects=["atom.>"], allow_atomic=True, allow_direct=True, duplicate_window=60)
    return js


def test_commit_stores_every_message_in_order(atomic: jsclient.JetStream) -> None:
    ack = atomic.publish_batch(
        [("atom.a", b"1"), {"subject": "atom.b", "data": b"2", "headers": {"K": " v "}}, ("atom.a", b"3")]
    )
    assert (ack.stream, ack.seq, ack.count) == ("ATOM", 3, 3) and ack.batch
    stored = list(atomic.direct_get_batch("ATOM", "atom.>", max_messages=10))
    assert [(m.subject, m.data) for m in stored] == [("atom.a", b"1"), ("atom.b", b"2"), ("atom.a", b"3")]
    assert stored[1].headers["K"] == " v "
    assert stored[2].headers["Nats-Batch-Commit"] == "1"  # the server marks the committing message


def test_a_batch_of_one_and_of_a_thousand(atomic: jsclient.JetStream) -> None:
    assert atomic.publish_batch([("atom.one", b"x")]).count == 1
    ack = atomic.publish_batch([(f"atom.{i % 7}", b"%d" % i) for i in range(1000)])
    assert (ack.count, ack.seq) == (1000, 1001)
    assert atomic.stream_info("ATOM").state.messages == 1001


def test_context_manager_commits_or_sends_nothing(atomic: jsclient.JetStream) -> None:
    with atomic.atomic_batch() as batch:
        batch.add("atom.x", b"1")
        batch.add("atom.y", b"2", msg_id="m-2")
    assert batch.ack is not None and batch.ack.count == 2
    with pytest.raises(RuntimeError, match="changed my mind"), atomic.atomic_batch() as batch:
        batch.add("atom.x", b"never")
        raise RuntimeError("changed my mind")
    assert batch.ack is None
    assert atomic.stream_info("ATOM").state.messages == 2


def test_a_duplicate_msg_id_refuses_the_whole_batch(atomic: jsclient.JetStream) -> None:
    atomic.publish("atom.d", b"first", msg_id="dup")
    with pytest.raises(jsclient.BatchDuplicateMsgIdError) as info:
        atomic.publish_batch([("atom.d", b"a"), {"subject": "atom.d", "data": b"b", "msg_id": "dup"}, ("atom.d", b"c")])
    assert info.value.err_code == 10201
    assert atomic.stream_info("ATOM").state.messages == 1  # none of the three


def test_a_stream_without_allow_atomic_is_named(js: jsclient.JetStream) -> None:
    js.add_stream(name="PLAIN", subjects=["plain.>"])
    with pytest.raises(jsclient.BatchNotEnabledError, match="atomic publish is disabled"):
        js.publish_batch([("plain.a", b"1"), ("plain.b", b"2")])
    assert js.stream_info("PLAIN").state.messages == 0


def test_bad_batches_raise_before_anything_is_sent(atomic: jsclient.JetStream, nc: jsclient.Connection) -> None:
    sent = nc.stats()["out_msgs"]
    cases: list[tuple[object, str]] = [
        ([], "at least one message"),
        ([(f"atom.{i}", b"x") for i in range(1001)], "at most 1000 messages"),
        ([("atom.ok", b"1"), ("bad subject", b"2")], "whitespace"),
        ([("atom.ok", "text")], "bytes"),
        ([{"subject": "atom.a", "data": b"1", "ttl": 5}], "unknown key"),
        ([("atom.a", b"1", "extra")], "pair or a mapping"),
        ([{"subject": "atom.a", "headers": {"Nats-Expected-Last-Msg-Id": "x"}}], "cannot be used"),
        ([{"subject": "atom.a", "msg_id": ""}], "msg_id"),
        ([("atom.big", b"x" * (nc.max_payload + 1))], "max_payload"),
    ]
    for messages, words in cases:
        with pytest.raises(jsclient.Error, match=words):
            atomic.publish_batch(messages)  # type: ignore[arg-type]
    with pytest.raises(jsclient.InvalidArgumentError, match="batch_id"):
        atomic.publish_batch([("atom.a", b"1")], batch_id="x" * 65)
    nc.flush()
    assert nc.stats()["out_msgs"] == sent and nc.is_connected
    assert atomic.stream_info("ATOM").state.messages == 0


def test_an_interrupted_batch_is_never_committed(server: NatsServer, atomic: jsclient.JetStream) -> None:
    """Members sent, commit never sent (the publisher died): the server abandons the batch; nothing is stored.

    The members go out as raw frames, as a publisher that died before its commit leaves them.
    """
    from jsclient.jetstream.batch import member_frame

    with jsclient.connect(server.url) as other:
        frames = b"".join(member_frame(b"atom.lost", b"", b"dead-batch", i, b"x") for i in range(1, 4))
        other.publish_encoded(frames, messages=3, payload_bytes=3)
        other.flush()
    # The same id again from 1 is a gap in the dead batch: the server abandons it whole, and says so.
    with pytest.raises(jsclient.BatchIncompleteError) as info:
        atomic.publish_batch([("atom.ok", b"1"), ("atom.ok", b"2")], batch_id="dead-batch")
    assert info.value.retriable
    assert atomic.stream_info("ATOM").state.messages == 0  # neither the dead members nor the collided batch
    assert atomic.publish_batch([("atom.ok", b"1"), ("atom.ok", b"2")]).count == 2


def test_members_leave_from_the_publishing_thread_and_the_flusher_sends_the_rest(
    server: NatsServer, atomic: jsclient.JetStream
) -> None:
    """A batch's member frames go to the socket from the thread that publishes them, before the call goes on
    (``publish_encoded(send_now=True)``), unless the flusher is sending at that moment: a large block wakes no
    other thread.  So does its commit, a lone async request with headers.  Frames queued without it are sent
    by the flusher.

    Which thread calls a socket's ``sendall`` is seen with a profile hook (``sys.setprofile``), which replaces
    nothing: the client and the server are the real ones."""
    import socket
    import sys
    import threading
    import time

    senders: list[str] = []  # a thread's name, with " in publish_encoded" (or request_async) during that call

    def watch(frame: Any, event: str, arg: object) -> None:
        if event == "c_call" and getattr(arg, "__name__", "") == "sendall" and isinstance(
            getattr(arg, "__self__", None), socket.socket
        ):
            inside = ""
            while frame is not None and not inside:
                if frame.f_code.co_name in ("publish_encoded", "request_async"):
                    inside = " in " + frame.f_code.co_name
                frame = frame.f_back
            senders.append(threading.current_thread().name + inside)

    def sent_during(action: object) -> list[str]:
        senders.clear()
        sys.setprofile(watch)
        try:
            action()  # type: ignore[operator]
        finally:
            sys.setprofile(None)
        time.sleep(0.2)  # what the flusher was woken for has gone by now
        return list(senders)

    here = threading.current_thread().name
    threading.setprofile(watch)  # the connections' threads, started from here on, are watched too
    try:
        with jsclient.connect(server.url) as nc:
            js = nc.jetstream()
            js.publish_batch([("atom.t", b"x")])
            members_first = []
            for _ in range(10):
                members_first.append(sent_during(lambda: js.publish_batch([("atom.t", b"x" * 100)] * 500)))
            # The members left before publish_encoded returned, from here, not when the commit was waited for.
            assert sum(1 for who in members_first if f"{here} in publish_encoded" in who) >= 6, members_first
            # The commit, a lone request, left from here too, before request_async returned.
            assert sum(1 for who in members_first if f"{here} in request_async" in who) >= 6, members_first

        with jsclient.connect(server.url) as other:
            sub = other.subscribe("enc.>")
            other.flush()
            time.sleep(0.1)  # the flusher back asleep after sending the PING (it would hold the send lock a moment)
            frames = b"".join(b"PUB enc.%d 1\r\nx\r\n" % i for i in range(1000))
            now = sent_during(lambda: [other.publish_encoded(frames, messages=1000, payload_bytes=1000, send_now=True)
                                       for _ in range(10)])
            assert now.count(f"{here} in publish_encoded") >= 6, now
            later = sent_during(lambda: [other.publish_encoded(frames, messages=1000, payload_bytes=1000)
                                         for _ in range(10)])
            assert [sub.next_msg(timeout=5).subject for _ in range(20_000)][-1] == "enc.999"
            assert not [who for who in later if who.startswith(here)] and "jsclient-flusher" in later, later
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]


#: Where the link breaks (the frame the proxy cuts at, and whether it forwards that frame), what the call may
#: end with ("ack" for a BatchAck), and how many of the batch's messages the stream then holds.
CUTS = {
    # The members after 399 are lost.  The commit is lost with the link (no answer: interrupted), or it was
    # still buffered and goes out on the new link, where the server finds the gap and abandons the batch.
    "member 400": (b"Nats-Batch-Sequence: 400\r\n", False, {"BatchInterruptedError", "BatchIncompleteError"}, 0),
    # Every member arrived, the commit did not: no answer ever comes, and the server drops the idle batch.
    "commit lost": (b"Nats-Batch-Commit: 1\r\n", False, {"BatchInterruptedError"}, 0),
    # The commit arrived and the batch was stored.  Its ack goes to the old link, or, sent after the
    # reconnect, reaches the new one: interrupted, or the real ack.
    "commit in": (b"Nats-Batch-Commit: 1\r\n", True, {"BatchInterruptedError", "ack"}, 1000),
}


@pytest.mark.parametrize("where", list(CUTS))
def test_a_batch_cut_by_a_connection_loss_is_never_reported_committed(
    server: NatsServer, atomic: jsclient.JetStream, where: str
) -> None:
    """The link breaks during a batch of 1,000 (tests/proxy.py cuts it on a client frame: a real server will
    not drop a client mid-batch on demand).  The call returns an ack only for a batch stored; without an
    answer it raises BatchInterruptedError (a ConnectionLostError and a TimeoutError: "commit lost" gets it
    every time, and got a bare timeout before); nothing goes out twice; and the reconnected connection
    commits the next batch."""
    from tests.proxy import Cut, FrameProxy

    marker, forward, outcomes, stored = CUTS[where]
    cut = []

    def upstream(frame: bytes) -> bytes:
        if not cut and marker in frame:
            cut.append(frame)
            return Cut(frame if forward else b"")
        return frame

    host, port = server.url.split("//")[1].rsplit(":", 1)
    with FrameProxy((host, int(port)), upstream_filter=upstream) as proxy, jsclient.connect(
        proxy.url, reconnect_time_wait=0.1
    ) as nc:
        js = nc.jetstream(timeout=3)
        try:
            outcome = type(js.publish_batch([("atom.cut", b"%d" % i) for i in range(1000)])).__name__
        except jsclient.BatchInterruptedError as exc:
            assert isinstance(exc, jsclient.ConnectionLostError) and isinstance(exc, TimeoutError)
            assert "connection broke during an atomic batch" in str(exc)
            outcome = type(exc).__name__
        except jsclient.BatchIncompleteError as exc:
            outcome = type(exc).__name__
        assert outcome.replace("BatchAck", "ack") in outcomes
        assert cut and nc.reconnects >= 1  # the failure path ran: the link broke inside the batch
        assert proxy.sent.count(b"Nats-Batch-Sequence: 1\r\n") == 1  # nothing went out twice
        assert atomic.stream_info("ATOM").state.messages == stored
        assert js.publish_batch([("atom.ok", b"1"), ("atom.ok", b"2")]).count == 2

