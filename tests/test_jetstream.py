"""JetStream core against a real nats-server: management, publish, acks, metadata."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import jsclient
from jsclient import errors
from jsclient.jetstream.api import ConsumerConfig, StreamConfig
from jsclient.server import NatsServer

pytestmark = pytest.mark.compat  # in the subset make test runs on every older server


def test_stream_lifecycle(js: jsclient.JetStream) -> None:
    info = js.add_stream(name="S1", subjects=["s1.>"], max_age=3600, duplicate_window=60.0)
    assert info.config.name == "S1" and info.config.max_age == 3600.0
    assert info.config.duplicate_window == 60.0
    assert info.created is not None and info.created.tzinfo is not None
    # Idempotent for the same config; an update changes it.
    js.add_stream(StreamConfig(name="S1", subjects=["s1.>"], max_age=3600, duplicate_window=60.0))
    updated = js.update_stream(name="S1", subjects=["s1.>", "other.s1"], max_msgs=10)
    assert updated.config.max_msgs == 10 and updated.config.subjects == ["s1.>", "other.s1"]
    assert js.stream_names() == ["S1"]
    assert [s.config.name for s in js.streams()] == ["S1"]
    assert js.stream_names(subject="other.s1") == ["S1"]
    assert js.stream_names(subject="nothing.here") == []
    assert js.delete_stream("S1") is True
    with pytest.raises(errors.StreamNotFoundError) as info_err:
        js.stream_info("S1")
    assert info_err.value.code == 404 and info_err.value.err_code == 10059


def test_stream_errors(js: jsclient.JetStream) -> None:
    js.add_stream(name="S2", subjects=["s2.>"])
    with pytest.raises(errors.StreamNameInUseError):
        js.add_stream(name="S2", subjects=["different.>"])
    with pytest.raises(errors.StreamSubjectOverlapError):
        js.add_stream(name="S3", subjects=["s2.x"])
    with pytest.raises(errors.StreamNotFoundError):
        js.delete_stream("missing")
    with pytest.raises(errors.StreamNotFoundError):
        js.update_stream(name="missing", subjects=["m"])


@pytest.mark.parametrize(
    "fields, fragment",
    [
        ({"name": "has.dot"}, "stream name"),
        ({"name": "has space"}, "stream name"),
        ({"name": ""}, "stream name"),
        ({"name": "ok", "retention": "forever"}, "retention"),
        ({"name": "ok", "storage": "tape"}, "storage"),
        ({"name": "ok", "max_age": -5}, "max_age"),
        ({"name": "ok", "num_replicas": 9}, "num_replicas"),
        ({"name": "ok", "subjects": "not-a-list"}, "subjects"),
        ({"name": "ok", "subjects": ["bad subject"]}, "stream subject"),
        ({"name": "ok", "bogus_field": 1}, "bogus_field"),
    ],
)
def test_invalid_stream_config_rejected_before_sending(
    nc: jsclient.Connection, js: jsclient.JetStream, fields: dict, fragment: str
) -> None:
    before = nc.stats()["out_msgs"]
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
        js.add_stream(**fields)
    assert nc.stats()["out_msgs"] == before and nc.is_connected


def test_stream_names_and_list_paginate_past_256(js: jsclient.JetStream) -> None:
    names = {f"P{i:03d}" for i in range(300)}
    for name in names:
        js.add_stream(name=name, subjects=[f"page.{name}"], storage="memory")
    assert set(js.stream_names()) == names
    listed = js.streams()
    assert {s.config.name for s in listed} == names and len(listed) == 300


def test_purge(js: jsclient.JetStream) -> None:
    js.add_stream(name="PURGE", subjects=["pg.*"])
    for i in range(10):
        js.publish("pg.a" if i % 2 else "pg.b", b"%d" % i)
    assert js.purge_stream("PURGE", subject="pg.a") == 5
    assert js.stream_info("PURGE").state.messages == 5
    assert js.purge_stream("PURGE", keep=2) == 3
    assert js.purge_stream("PURGE", seq=9) == 1  # below 9: only 7 is left there
    assert js.purge_stream("PURGE") == 1
    with pytest.raises(jsclient.InvalidArgumentError):
        js.purge_stream("PURGE", seq=3, keep=1)


def test_stream_info_subjects_filter(js: jsclient.JetStream) -> None:
    js.add_stream(name="SUBJ", subjects=["sj.>"])
    for i in range(30):
        js.publish(f"sj.{i % 3}", b"")
    info = js.stream_info("SUBJ", subjects_filter="sj.>")
    assert info.state.subjects == {"sj.0": 10, "sj.1": 10, "sj.2": 10}
    assert js.stream_info("SUBJ", subjects_filter="sj.1").state.subjects == {"sj.1": 10}


def test_get_and_delete_msg(js: jsclient.JetStream) -> None:
    js.add_stream(name="GET", subjects=["get.*"])
    js.publish("get.a", b"first", headers={"H": "1"})
    js.publish("get.b", b"second")
    js.publish("get.a", b"third")
    msg = js.get_msg("GET", seq=1)
    assert (msg.subject, msg.seq, msg.data) == ("get.a", 1, b"first")
    assert msg.hdrs is not None and b"H: 1" in msg.hdrs
    assert msg.time is not None and msg.time.tzinfo is not None
    assert js.get_msg("GET", last_by_subj="get.a").data == b"third"
    assert js.get_msg("GET", seq=2, next_by_subj="get.a").seq == 3
    assert js.delete_msg("GET", 2) is True
    with pytest.raises(errors.MessageNotFoundError):
        js.get_msg("GET", seq=2)
    with pytest.raises(jsclient.InvalidArgumentError):
        js.get_msg("GET")


def test_consumer_lifecycle(js: jsclient.JetStream) -> None:
    js.add_stream(name="C1", subjects=["c1.>"])
    info = js.add_consumer("C1", durable_name="dur", ack_policy="explicit", ack_wait=12.5, max_deliver=3)
    assert info.name == "dur" and info.config.ack_wait == 12.5 and info.stream_name == "C1"
    eph = js.add_consumer("C1", ConsumerConfig(ack_policy="none", inactive_threshold=5))
    assert eph.name and eph.name != "dur" and eph.config.inactive_threshold == 5.0
    named = js.add_consumer("C1", name="named", filter_subjects=["c1.a", "c1.b"], backoff=[0.5, 1.0], max_deliver=4)
    assert named.config.filter_subjects == ["c1.a", "c1.b"] and named.config.backoff == [0.5, 1.0]
    assert set(js.consumer_names("C1")) == {"dur", "named", eph.name}
    assert {c.name for c in js.consumers("C1")} == {"dur", "named", eph.name}
    assert js.consumer_info("C1", "dur").config.max_deliver == 3
    js.update_consumer("C1", durable_name="dur", ack_policy="explicit", ack_wait=12.5, max_deliver=5)
    assert js.consumer_info("C1", "dur").config.max_deliver == 5
    with pytest.raises(errors.ConsumerAlreadyExistsError):
        js.add_consumer("C1", durable_name="dur", ack_policy="explicit", max_deliver=9, action="create")
    with pytest.raises(errors.ConsumerDoesNotExistError):
        js.add_consumer("C1", durable_name="ghost", ack_policy="explicit", action="update")
    assert js.delete_consumer("C1", "dur") is True
    with pytest.raises(errors.ConsumerNotFoundError):
        js.consumer_info("C1", "dur")
    with pytest.raises(errors.StreamNotFoundError):
        js.add_consumer("NOSTREAM", durable_name="x")


@pytest.mark.parametrize(
    "fields, fragment",
    [
        ({"durable_name": "a.b"}, "durable_name"),
        ({"ack_policy": "sometimes"}, "ack_policy"),
        ({"deliver_policy": "by_start_sequence"}, "opt_start_seq"),
        ({"opt_start_seq": 5}, "opt_start_seq"),
        ({"filter_subject": "a", "filter_subjects": ["b"]}, "filter_subject"),
        ({"ack_wait": "soon"}, "ack_wait"),
        ({"name": "x", "durable_name": "y"}, "must match"),
    ],
)
def test_invalid_consumer_config_rejected(js: jsclient.JetStream, fields: dict, fragment: str) -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
        js.add_consumer("ANY", **fields)


def test_account_info(js: jsclient.JetStream) -> None:
    js.add_stream(name="ACC", subjects=["acc"])
    info = js.account_info()
    assert info.streams >= 1 and info.api.total > 0


def test_publish_ack_and_expectations(js: jsclient.JetStream) -> None:
    js.add_stream(name="PUB", subjects=["pub.>"], duplicate_window=60)
    ack = js.publish("pub.a", b"1", msg_id="id-1")
    assert (ack.stream, ack.seq, ack.duplicate) == ("PUB", 1, False)
    dup = js.publish("pub.a", b"1", msg_id="id-1")
    assert dup.duplicate and dup.seq == 1
    with pytest.raises(errors.WrongLastSequenceError):
        js.publish("pub.a", b"2", expected_last_seq=7)
    assert js.publish("pub.a", b"2", expected_last_seq=1).seq == 2
    with pytest.raises(errors.WrongLastSequenceError):
        js.publish("pub.b", b"x", expected_last_subject_seq=5)
    assert js.publish("pub.b", b"x", expected_last_subject_seq=0).seq == 3
    with pytest.raises(errors.WrongLastMsgIdError):
        js.publish("pub.a", b"3", expected_last_msg_id="nope")
    with pytest.raises(errors.StreamMismatchError):
        js.publish("pub.a", b"3", expected_stream="OTHER")
    assert js.publish("pub.a", b"3", expected_stream="PUB").stream == "PUB"
    assert js.stream_info("PUB").state.messages == 4


def test_publish_without_stream_is_a_clear_error(js: jsclient.JetStream) -> None:
    start = time.monotonic()
    with pytest.raises(errors.NoStreamResponseError, match=r"no\.stream\.here"):
        js.publish("no.stream.here", b"x")
    assert time.monotonic() - start < 5


def test_publish_async_without_stream_names_the_subject(js: jsclient.JetStream) -> None:
    fut = js.publish_async("no.stream.async", b"x")
    with pytest.raises(errors.NoStreamResponseError, match=r"'no\.stream\.async'"):
        fut.result(timeout=5)


def test_publish_option_errors(js: jsclient.JetStream) -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="Nats-Msg-Id"):
        js.publish("x", b"", msg_id="")
    with pytest.raises(jsclient.InvalidArgumentError, match="Expected-Last-Sequence"):
        js.publish("x", b"", expected_last_seq=-1)
    with pytest.raises(jsclient.BadSubjectError):
        js.publish("bad subject", b"")


def test_publish_async_100k_every_future_resolved(js: jsclient.JetStream) -> None:
    js.add_stream(name="ASYNC", subjects=["async.>"], storage="memory")
    futures = [js.publish_async("async.x", b"%d" % i) for i in range(100_000)]
    js.publish_async_completed(timeout=120)
    acks = [f.result(timeout=0) for f in futures]
    assert sorted(a.seq for a in acks) == list(range(1, 100_001))
    assert js.stream_info("ASYNC").state.messages == 100_000
    assert js.publish_async_pending == 0


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "5", True])
def test_publish_async_bad_timeout_rejected_before_sending(js: jsclient.JetStream, timeout: object) -> None:
    js.add_stream(name="BADTIMEOUT", subjects=["badtimeout"], storage="memory")
    with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
        js.publish_async("badtimeout", b"x", timeout=timeout)  # type: ignore[arg-type]
    assert js.publish_async_pending == 0
    assert js.publish_async("badtimeout", b"y").result(timeout=5).seq == 1  # nothing else went out
    assert js.stream_info("BADTIMEOUT").state.messages == 1


@pytest.mark.parametrize("timeout", [-1, float("nan"), "5", True])
def test_publish_bad_timeout_rejected_before_sending(
    nc: jsclient.Connection, js: jsclient.JetStream, timeout: object
) -> None:
    """js.publish calls the core's request, past the public request()'s checks: it checks its timeout itself."""
    js.add_stream(name="BADTIMEOUT", subjects=["badtimeout"], storage="memory")
    before = nc.stats()["out_msgs"]
    with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
        js.publish("badtimeout", b"x", timeout=timeout)  # type: ignore[arg-type]
    assert nc.stats()["out_msgs"] == before and nc.is_connected
    assert js.publish("badtimeout", b"y", timeout=5).seq == 1  # nothing else went out
    assert js.stream_info("BADTIMEOUT").state.messages == 1


def test_publish_async_window_blocks_then_times_out(server: NatsServer) -> None:
    with jsclient.connect(server.url) as nc:
        nc.subscribe("silent.stream")  # takes the publish, never acks
        nc.flush()
        js = nc.jetstream(publish_async_max_pending=2)
        first = [js.publish_async("silent.stream", b"", timeout=0.3) for _ in range(2)]
        third = js.publish_async("silent.stream", b"", timeout=1)  # blocks until a slot frees
        assert any(f.done() for f in first)
        for fut in [*first, third]:
            with pytest.raises(jsclient.TimeoutError):
                fut.result(timeout=10)
        js.publish_async_completed(timeout=5)
        holders = [js.publish_async("silent.stream", b"", timeout=5) for _ in range(2)]
        with pytest.raises(jsclient.TimeoutError, match="publish_async_max_pending=2"):
            js.publish_async("silent.stream", b"", timeout=0.2)  # the window stays full
        assert not any(f.done() for f in holders)


def test_publish_async_stream_deleted_midway_resolves_every_future(js: jsclient.JetStream) -> None:
    js.add_stream(name="GONE", subjects=["gone.>"], storage="memory")
    futures = []
    deleter = threading.Timer(0.05, lambda: js.conn.jetstream().delete_stream("GONE"))
    deleter.start()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        futures.append(js.publish_async("gone.x", b"x", timeout=2))
    deleter.join()
    js.publish_async_completed(timeout=30)
    outcomes = []
    for fut in futures:
        exc = fut.exception(timeout=0)
        outcomes.append(type(exc) if exc else "ok")
    assert all(o == "ok" or issubclass(o, jsclient.Error) for o in outcomes)
    assert errors.NoStreamResponseError in outcomes, set(outcomes)


def test_jetstream_not_enabled() -> None:
    with (
        NatsServer(jetstream=False) as server,
        jsclient.connect(server.url) as nc,
        pytest.raises(errors.JetStreamNotEnabledError),
    ):
        nc.jetstream().account_info()


def test_domain_targets_domain_api() -> None:
    with NatsServer(domain="hub") as server, jsclient.connect(server.url) as nc:
        hub = nc.jetstream(domain="hub")
        assert hub.prefix == "$JS.hub.API"
        assert hub.account_info().domain == "hub"
        hub.add_stream(name="HUB", subjects=["hub.>"])
        assert hub.publish("hub.x", b"").domain == "hub"
        with pytest.raises(errors.JetStreamNotEnabledError):
            nc.jetstream(domain="elsewhere", timeout=1).account_info()


def test_api_timeout_is_jsclient_timeout(nc: jsclient.Connection) -> None:
    nc.subscribe("$JS.slow.API.>")  # a responder that never answers
    nc.flush()
    with pytest.raises(jsclient.TimeoutError):
        nc.jetstream(domain="slow", timeout=0.2).account_info()


# -- acks ------------------------------------------------------------------------


def _push_consumer(
    js: jsclient.JetStream, nc: jsclient.Connection, stream: str, **cfg: object
) -> jsclient.Subscription:
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    js.add_consumer(stream, durable_name="acks", deliver_subject=inbox, **cfg)
    return sub


def wait_for(predicate, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def test_ack_nak_term_in_progress_effects(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="ACKS", subjects=["acks.>"])
    for i in range(4):
        js.publish("acks.x", b"%d" % i)
    sub = _push_consumer(js, nc, "ACKS", ack_policy="explicit", ack_wait=30, max_deliver=5)
    msgs = [sub.next_msg(timeout=5) for _ in range(4)]
    assert [m.metadata.sequence.stream for m in msgs] == [1, 2, 3, 4]
    assert all(m.metadata.stream == "ACKS" and m.metadata.consumer == "acks" for m in msgs)
    msgs[0].ack()
    msgs[0].ack()  # a second ack sends nothing
    msgs[0].nak()  # nor does a nak after the terminal ack
    assert msgs[0].is_acked
    msgs[1].term(reason="bad data")
    msgs[2].in_progress()
    msgs[2].ack_sync(timeout=5)
    msgs[3].nak()
    redelivered = sub.next_msg(timeout=5)
    assert redelivered.metadata.sequence.stream == 4 and redelivered.metadata.num_delivered == 2
    redelivered.ack()
    assert wait_for(lambda: js.consumer_info("ACKS", "acks").ack_floor.stream_seq == 4)
    info = js.consumer_info("ACKS", "acks")
    assert info.num_ack_pending == 0 and info.num_redelivered == 0
    assert info.delivered.consumer_seq == 5  # 4 deliveries + 1 redelivery, nothing more


def test_double_ack_is_sent_once(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="ONCE", subjects=["once"])
    js.publish("once", b"x")
    sub = _push_consumer(js, nc, "ONCE", ack_policy="explicit")
    msg = sub.next_msg(timeout=5)
    before = nc.stats()["out_msgs"]
    msg.ack()
    msg.ack()
    msg.term()
    msg.in_progress()
    assert nc.stats()["out_msgs"] == before + 1


def test_nak_with_delay(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="DELAY", subjects=["delay"])
    js.publish("delay", b"x")
    sub = _push_consumer(js, nc, "DELAY", ack_policy="explicit")
    first = sub.next_msg(timeout=5)
    sent = time.monotonic()
    first.nak(delay=0.5)
    again = sub.next_msg(timeout=5)
    assert time.monotonic() - sent >= 0.4
    assert again.metadata.num_delivered == 2
    with pytest.raises(jsclient.InvalidArgumentError):
        again.nak(delay=-1)


def test_ack_on_core_message_is_a_clear_error(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("plain")
    nc.publish("plain", b"x", reply="some.reply")
    msg = sub.next_msg(timeout=2)
    with pytest.raises(errors.BadAckSubjectError, match="not a JetStream message"):
        msg.ack()
    with pytest.raises(errors.BadAckSubjectError):
        _ = msg.metadata


def test_ack_on_closed_connection_raises(server: NatsServer) -> None:
    nc = jsclient.connect(server.url)
    js = nc.jetstream()
    js.add_stream(name="CLOSED", subjects=["closed"])
    js.publish("closed", b"x")
    sub = _push_consumer(js, nc, "CLOSED", ack_policy="explicit")
    msg = sub.next_msg(timeout=5)
    js.delete_stream("CLOSED")
    nc.close()
    with pytest.raises(jsclient.ConnectionClosedError):
        msg.ack()
    assert not msg.is_acked


# -- interop ---------------------------------------------------------------------


def test_interop_streams_both_ways(server: NatsServer, js: jsclient.JetStream) -> None:
    import nats

    js.add_stream(name="INTEROP", subjects=["interop.js.>"])
    for i in range(5):
        js.publish("interop.js.from_jsclient", b"j%d" % i, headers={"Src": "jsclient"})

    async def peer() -> list[tuple[int, bytes, str | None]]:
        nc = await nats.connect(server.url)
        pjs = nc.jetstream()
        for i in range(5):
            await pjs.publish("interop.js.from_natspy", b"n%d" % i, headers={"Src": "nats-py"})
        read = []
        for seq in range(1, 6):
            msg = await pjs.get_msg("INTEROP", seq)
            read.append((msg.seq, msg.data, (msg.headers or {}).get("Src")))
        await nc.close()
        return read

    read_by_peer = asyncio.run(peer())
    assert read_by_peer == [(i + 1, b"j%d" % i, "jsclient") for i in range(5)]
    for seq in range(6, 11):
        msg = js.get_msg("INTEROP", seq=seq)
        assert msg.subject == "interop.js.from_natspy" and msg.data == b"n%d" % (seq - 6)
        assert msg.hdrs is not None and b"Src: nats-py" in msg.hdrs
