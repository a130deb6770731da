"""Push subscribe workflow and automatic status management (ADR-15) on a real server."""

from __future__ import annotations

import threading
import time

import pytest

import jsclient
from jsclient import errors
from jsclient.jetstream.api import ConsumerConfig, ConsumerInfo
from jsclient.jetstream.bind import check_bound_consumer
from jsclient.server import NatsServer

from .conftest import ErrorLog
from .proxy import FrameProxy

pytestmark = pytest.mark.compat  # in the subset make test runs on every older server


@pytest.fixture
def js(js: jsclient.JetStream) -> jsclient.JetStream:
    """The shared context, with this module's stream."""
    js.add_stream(name="ORDERS", subjects=["orders.>"])
    return js


def publish(js: jsclient.JetStream, n: int, subject: str = "orders.new") -> None:
    for i in range(n):
        js.publish(subject, b"%d" % i)


# -- option checks before any request ------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"queue": "q", "idle_heartbeat": 1.0}, "queue subscriptions cannot use idle_heartbeat"),
        ({"queue": "q", "flow_control": True, "idle_heartbeat": 1.0}, "queue subscriptions cannot use"),
        ({"queue": "q", "config": ConsumerConfig(flow_control=True)}, "flow_control"),
        ({"config": ConsumerConfig(max_waiting=5)}, "max_waiting"),
        ({"config": ConsumerConfig(max_batch=5)}, "max_batch"),
        ({"config": ConsumerConfig(max_expires=5)}, "max_expires"),
        ({"flow_control": True}, "flow_control needs idle_heartbeat"),
        ({"durable": "a", "config": ConsumerConfig(durable_name="b")}, "durable"),
        ({"durable": "bad.name"}, "durable"),
        ({"heartbeat_alarm": 1.0}, "heartbeat_alarm needs idle_heartbeat"),
        ({"idle_heartbeat": 1.0, "heartbeat_alarm": 0.5}, "must exceed"),
        ({"idle_heartbeat": -1}, "idle_heartbeat"),
        ({"idle_heartbeat": 0.05}, "at least 0.1"),
        ({"callback": "nope"}, "callback"),
    ],
)
def test_option_checks_before_any_request(
    nc: jsclient.Connection, js: jsclient.JetStream, kwargs: dict, fragment: str
) -> None:
    before = nc.stats()["out_msgs"]
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
        js.subscribe("orders.new", **kwargs)
    assert nc.stats()["out_msgs"] == before
    assert nc.num_subscriptions == 0


def test_neither_subject_nor_stream(js: jsclient.JetStream) -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="subject or a stream"):
        js.subscribe()


def test_stream_lookup(js: jsclient.JetStream) -> None:
    with pytest.raises(errors.StreamNotFoundError, match="no matching stream"):
        js.subscribe("unknown.subject")
    sub = js.subscribe("orders.*")
    assert sub.stream == "ORDERS"


# -- binding checks (real consumers) --------------------------------------------------


def test_duplicate_subscription_on_bound_durable(js: jsclient.JetStream) -> None:
    first = js.subscribe("orders.new", durable="dur")
    with pytest.raises(errors.JetStreamSubscribeError, match="duplicate subscription"):
        js.subscribe("orders.new", durable="dur")
    first.unsubscribe()


def test_non_queue_subscription_on_queue_consumer(js: jsclient.JetStream) -> None:
    js.subscribe("orders.new", queue="workers")
    with pytest.raises(errors.JetStreamSubscribeError, match="created for queue group 'workers'"):
        js.subscribe("orders.new", durable="workers")


def test_queue_subscription_with_other_group(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_consumer("ORDERS", durable_name="grp", deliver_subject=nc.new_inbox(), deliver_group="alpha")
    with pytest.raises(errors.JetStreamSubscribeError, match=r"'alpha'"):
        js.subscribe("orders.new", durable="grp", queue="beta")


def test_queue_subscription_on_consumer_without_group(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_consumer("ORDERS", durable_name="nogroup", deliver_subject=nc.new_inbox())
    with pytest.raises(errors.JetStreamSubscribeError, match="without a deliver group"):
        js.subscribe("orders.new", durable="nogroup", queue="q")


def test_filter_subject_mismatch(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_consumer("ORDERS", durable_name="filtered", deliver_subject=nc.new_inbox(), filter_subject="orders.a")
    with pytest.raises(errors.JetStreamSubscribeError, match="does not match"):
        js.subscribe("orders.b", durable="filtered")


def test_pull_consumer_for_push_subscription(js: jsclient.JetStream) -> None:
    js.add_consumer("ORDERS", durable_name="puller", ack_policy="explicit")
    with pytest.raises(errors.JetStreamSubscribeError, match="pull consumer"):
        js.subscribe("orders.new", durable="puller")


def test_config_differences_are_named(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_consumer("ORDERS", durable_name="cfg", deliver_subject=nc.new_inbox(), max_deliver=3, ack_wait=10)
    with pytest.raises(errors.JetStreamSubscribeError, match=r"max_deliver=5.*changes not applied"):
        js.subscribe("orders.new", durable="cfg", config=ConsumerConfig(max_deliver=5))
    with pytest.raises(errors.JetStreamSubscribeError, match="ack_wait"):
        js.subscribe("orders.new", durable="cfg", config=ConsumerConfig(ack_wait=11))
    sub = js.subscribe("orders.new", durable="cfg", config=ConsumerConfig(max_deliver=3, ack_wait=10))
    assert sub.consumer == "cfg"


def test_binding_to_missing_consumer(js: jsclient.JetStream) -> None:
    with pytest.raises(errors.ConsumerNotFoundError, match="cannot bind"):
        js.subscribe("orders.new", stream="ORDERS", consumer="ghost")


def _info(**cfg: object) -> ConsumerInfo:
    return ConsumerInfo(stream_name="S", name="c", config=ConsumerConfig(**cfg))


@pytest.mark.parametrize(
    "info, queue, fragment",
    [
        (_info(deliver_subject="x", deliver_group="q", flow_control=True), "q", "flow control"),
        (_info(deliver_subject="x", deliver_group="q", idle_heartbeat=1.0), "q", "heartbeats"),
    ],
)
def test_queue_consumer_with_flow_control_or_heartbeat(info: ConsumerInfo, queue: str, fragment: str) -> None:
    """The server refuses to create such consumers, so the check runs on a built ConsumerInfo."""
    with pytest.raises(errors.JetStreamSubscribeError, match=fragment):
        check_bound_consumer(info, None, queue, ConsumerConfig(), pull=False)


# -- queues, creation, deletion ---------------------------------------------------------


def test_queue_members_share_one_consumer_named_after_the_queue(js: jsclient.JetStream) -> None:
    got: list[list[bytes]] = [[], []]
    lock = threading.Lock()

    def member(i: int):  # type: ignore[no-untyped-def]
        def cb(m: jsclient.Msg) -> None:
            with lock:
                got[i].append(m.data)

        return cb

    a = js.subscribe("orders.new", queue="workers", callback=member(0))
    b = js.subscribe("orders.new", queue="workers", callback=member(1))
    assert a.consumer == b.consumer == "workers"
    assert js.consumer_names("ORDERS") == ["workers"]
    publish(js, 200)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(got[0]) + len(got[1]) < 200:
        time.sleep(0.02)
    assert sorted(got[0] + got[1]) == sorted(b"%d" % i for i in range(200))
    assert got[0] and got[1]
    a.unsubscribe()
    b.unsubscribe()
    assert js.consumer_names("ORDERS") == ["workers"]  # a queue group's consumer stays


def test_library_created_consumer_is_deleted_bound_one_kept(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    created = js.subscribe("orders.new", durable="mine")
    eph = js.subscribe("orders.new")
    assert set(js.consumer_names("ORDERS")) == {"mine", eph.consumer}
    created.unsubscribe()
    eph.drain(timeout=5)
    assert js.consumer_names("ORDERS") == []
    js.add_consumer("ORDERS", durable_name="theirs", deliver_subject=nc.new_inbox())
    bound = js.subscribe("orders.new", durable="theirs")
    bound.unsubscribe()
    assert js.consumer_names("ORDERS") == ["theirs"]


def test_creation_failure_leaves_no_subscription(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    js.add_stream(name="ONE", subjects=["one.>"], max_consumers=1)
    first = js.subscribe("one.x")
    assert nc.num_subscriptions == 1
    with pytest.raises(errors.MaximumConsumersError):
        js.subscribe("one.x")  # the server refuses a second consumer
    assert nc.num_subscriptions == 1
    first.unsubscribe()
    assert nc.num_subscriptions == 0


def test_messages_metadata_and_auto_ack_with_callback(js: jsclient.JetStream) -> None:
    publish(js, 20)
    got: list[int] = []
    done = threading.Event()

    def cb(m: jsclient.Msg) -> None:
        got.append(m.metadata.sequence.stream)
        if len(got) == 20:
            done.set()

    sub = js.subscribe("orders.new", durable="auto", callback=cb)
    assert done.wait(10)
    assert got == list(range(1, 21))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and sub.consumer_info().ack_floor.stream_seq < 20:
        time.sleep(0.05)
    assert sub.consumer_info().num_ack_pending == 0


def test_manual_ack_leaves_acks_to_the_user(js: jsclient.JetStream, error_log: ErrorLog) -> None:
    publish(js, 5)
    seen: list[jsclient.Msg] = []
    done = threading.Event()

    def cb(m: jsclient.Msg) -> None:
        seen.append(m)
        if m.data == b"2":
            raise RuntimeError("callback failed on 2")
        if len(seen) == 5:
            done.set()

    sub = js.subscribe("orders.new", durable="manual", callback=cb, manual_ack=True)
    assert done.wait(10)
    time.sleep(0.2)
    assert sub.consumer_info().num_ack_pending == 5
    for m in seen:
        m.ack()


def test_callback_exception_is_reported_and_not_acked(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    log = ErrorLog()
    conn = jsclient.connect(nc.options.servers[0], error_cb=log)
    try:
        ctx = conn.jetstream()
        publish(js, 3)
        seen: list[bytes] = []

        def cb(m: jsclient.Msg) -> None:
            seen.append(m.data)
            if m.data == b"1":
                raise RuntimeError("bad message 1")

        sub = ctx.subscribe("orders.new", durable="raising", callback=cb, config=ConsumerConfig(ack_wait=30))
        log.wait_for(RuntimeError)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(seen) < 3:
            time.sleep(0.02)
        time.sleep(0.2)
        info = sub.consumer_info()
        assert seen == [b"0", b"1", b"2"]
        assert info.num_ack_pending == 1  # the message whose callback raised
    finally:
        conn.close()


def test_ack_policy_none_sends_no_acks(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    publish(js, 3)
    sub = js.subscribe("orders.new", config=ConsumerConfig(ack_policy="none"))
    msgs = [sub.next_msg(timeout=5) for _ in range(3)]
    before = nc.stats()["out_msgs"]
    for m in msgs:
        m.ack()
        m.nak()
    assert nc.stats()["out_msgs"] == before


def test_iteration(js: jsclient.JetStream) -> None:
    publish(js, 5)
    sub = js.subscribe("orders.new")
    got = []
    for m in sub:
        got.append(m.data)
        m.ack()
        if len(got) == 5:
            break
    assert got == [b"%d" % i for i in range(5)]


def test_a_push_consumer_over_its_pending_limit_raises_no_slow_consumer_and_gets_the_drops_again(
    server: NatsServer,
) -> None:
    """A plain core subscription's ``next_msg`` raises SlowConsumerError where it dropped messages (issue 59); a
    JetStream push subscription's does not: it takes through the delivery port, which passes the gap, and the
    messages it dropped unacked come again after ``ack_wait``.  The error callback still hears of the drops."""
    log = ErrorLog()
    nc = jsclient.connect(server.url, error_cb=log)
    try:
        js = nc.jetstream()
        js.add_stream(name="SLOWPUSH", subjects=["slow.push"])
        publish(js, 30, "slow.push")
        sub = js.subscribe("slow.push", config=ConsumerConfig(ack_wait=1.0), pending_msgs_limit=10)
        log.wait_for(jsclient.SlowConsumerError, timeout=30)  # nobody reads yet: the push overran the queue
        seen: set[int] = set()
        while len(seen) < 30:
            msg = sub.next_msg(timeout=30)
            seen.add(int(msg.data))
            msg.ack()
        assert seen == set(range(30))
        js.delete_stream("SLOWPUSH")
    finally:
        nc.close()


# -- heartbeats ----------------------------------------------------------------------------


def test_heartbeat_alarm_when_server_paused() -> None:
    log = ErrorLog()
    with NatsServer() as server:
        nc = jsclient.connect(server.url, error_cb=log)
        try:
            js = nc.jetstream()
            js.add_stream(name="HB", subjects=["hb"])
            sub = js.subscribe("hb", idle_heartbeat=0.1)
            time.sleep(0.5)  # heartbeats flowing: no alarm
            assert not any(isinstance(e, errors.HeartbeatsMissedError) for e in log.errors)
            server.pause()
            try:
                with pytest.raises(errors.HeartbeatsMissedError):
                    sub.next_msg(timeout=5)
                log.wait_for(errors.HeartbeatsMissedError, timeout=2)
            finally:
                server.resume()
            # Raised once; the subscription stays usable.
            js.publish("hb", b"after")
            assert sub.next_msg(timeout=5).data == b"after"
        finally:
            nc.close()


def test_a_custom_heartbeat_alarm_fires_once_per_silence() -> None:
    """heartbeat_alarm=0.5 (not the default 3 x 0.1): one report for each silence, however long it lasts."""
    log = ErrorLog()

    def missed() -> list[Exception]:
        return [e for e in log.errors if isinstance(e, errors.HeartbeatsMissedError)]

    with NatsServer() as server:
        nc = jsclient.connect(server.url, error_cb=log)
        try:
            js = nc.jetstream()
            js.add_stream(name="HBA", subjects=["hba"])
            js.subscribe("hba", callback=lambda m: None, idle_heartbeat=0.1, heartbeat_alarm=0.5)
            for silence in (1, 2):
                time.sleep(0.5)  # heartbeats flowing
                assert len(missed()) == silence - 1
                server.pause()
                try:
                    log.wait_for(errors.HeartbeatsMissedError, timeout=5)
                    time.sleep(2.0)  # four alarm periods more of the same silence
                finally:
                    server.resume()
                assert len(missed()) == silence, missed()
            assert "for 0.5 s" in str(missed()[0])
        finally:
            nc.close()


def test_no_alarm_without_heartbeats(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    sub = js.subscribe("orders.new")
    with pytest.raises(jsclient.TimeoutError):
        sub.next_msg(timeout=0.5)


def test_heartbeats_are_never_delivered(js: jsclient.JetStream) -> None:
    sub = js.subscribe("orders.new", idle_heartbeat=0.1)
    time.sleep(0.35)
    with pytest.raises(jsclient.TimeoutError):
        sub.next_msg(timeout=0.2)
    assert sub._core().received >= 2  # heartbeats did arrive, and were swallowed


# -- flow control --------------------------------------------------------------------------


def test_flow_control_slow_reader_50k(server: NatsServer, nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    payload = b"x" * 1024
    for i in range(50_000):
        js.publish_async("orders.fc", payload + b"%d" % i)
    js.publish_async_completed(timeout=60)
    # A second connection taps the deliver subject (flow-control requests) and $JS.FC (our answers),
    # from before the consumer exists, so it sees every request.
    deliver = nc.new_inbox()
    tap = jsclient.connect(server.url)
    requests = tap.subscribe(deliver, pending_msgs_limit=200_000, pending_bytes_limit=1 << 30)
    answers = tap.subscribe("$JS.FC.>", pending_msgs_limit=10_000)
    tap.flush()
    sub = js.subscribe(
        "orders.fc", idle_heartbeat=1.0, flow_control=True,
        config=ConsumerConfig(ack_policy="none", deliver_subject=deliver),
        pending_msgs_limit=100_000, pending_bytes_limit=1 << 30,
    )
    try:
        for i in range(50_000):
            msg = sub.next_msg(timeout=30)
            assert msg.data == payload + b"%d" % i
            if i % 5000 == 0:
                time.sleep(0.2)  # a slow reader
        # A flow-control request after the last message is answered when it reaches the head.
        with pytest.raises(jsclient.TimeoutError):
            sub.next_msg(timeout=1.5)
        time.sleep(0.3)
        fc_subjects = []
        while True:
            try:
                m = requests.next_msg(timeout=0.2)
            except jsclient.TimeoutError:
                break
            if m.status == 100 and m.reply and "flow" in m.headers.description.lower():
                fc_subjects.append(m.reply)
        answered = []
        while True:
            try:
                answered.append(answers.next_msg(timeout=0.2).subject)
            except jsclient.TimeoutError:
                break
        assert fc_subjects, "the server sent no flow-control request"
        assert sorted(answered) == sorted(set(fc_subjects))
        assert len(answered) == len(set(answered)) == sub.flow_control_answers
    finally:
        tap.close()


# -- injected faults (a frame-rewriting proxy: the real server will not produce these) -----


def test_gap_reported_as_message_gap_error(server: NatsServer) -> None:
    """The proxy drops the 3rd delivery to the deliver subject."""
    seen = {"n": 0}

    def drop_third(frame: bytes) -> bytes:
        if frame.startswith(b"MSG orders.gap "):
            seen["n"] += 1
            if seen["n"] == 3:
                return b""
        return frame

    log = ErrorLog()
    with FrameProxy(server.host_port, drop_third) as proxy:
        nc = jsclient.connect(proxy.url, error_cb=log)
        try:
            js = nc.jetstream()
            js.add_stream(name="GAP", subjects=["orders.gap"])
            sub = js.subscribe("orders.gap")
            publish(js, 5, "orders.gap")
            got = [sub.next_msg(timeout=5).metadata.sequence.consumer for _ in range(4)]
            assert got == [1, 2, 4, 5]
            gap = log.wait_for(errors.MessageGapError)
            assert isinstance(gap, errors.MessageGapError)
            assert (gap.expected, gap.received) == (3, 4)
            js.delete_stream("GAP")
        finally:
            nc.close()


def test_unknown_and_error_statuses_are_raised(server: NatsServer) -> None:
    """The proxy injects a 499 status and a 409 before the 2nd delivery."""
    state = {"n": 0}

    def inject(frame: bytes) -> bytes:
        if frame.startswith(b"MSG orders.st "):
            state["n"] += 1
            if state["n"] == 2:
                sid = frame.split()[2]
                head = b"NATS/1.0 499 Something New\r\n\r\n"
                conflict = b"NATS/1.0 409 Consumer Deleted\r\n\r\n"
                fake = b"HMSG x %s %d %d\r\n%s\r\n" % (sid, len(head), len(head), head)
                fake += b"HMSG x %s %d %d\r\n%s\r\n" % (sid, len(conflict), len(conflict), conflict)
                return fake + frame
        return frame

    with FrameProxy(server.host_port, inject) as proxy:
        nc = jsclient.connect(proxy.url)
        try:
            js = nc.jetstream()
            js.add_stream(name="ST", subjects=["orders.st"])
            sub = js.subscribe("orders.st")
            publish(js, 2, "orders.st")
            assert sub.next_msg(timeout=5).data == b"0"
            with pytest.raises(errors.JetStreamStatusError) as unknown:
                sub.next_msg(timeout=5)
            assert unknown.value.code == 499 and unknown.value.description == "Something New"
            with pytest.raises(errors.ConsumerDeletedError):
                sub.next_msg(timeout=5)
            assert sub.next_msg(timeout=5).data == b"1"  # nothing lost
            js.delete_stream("ST")
        finally:
            nc.close()


def test_drain_reports_a_failed_consumer_delete(server: NatsServer) -> None:
    log = ErrorLog()
    with jsclient.connect(server.url, error_cb=log) as conn:
        ctx = conn.jetstream()
        ctx.add_stream(name="DRAINFAIL", subjects=["drainfail"])
        ctx.publish("drainfail", b"x")
        sub = ctx.subscribe("drainfail", durable="made-here")
        assert sub.next_msg(timeout=5).data == b"x"
        ctx.delete_stream("DRAINFAIL")  # the consumer cannot be deleted any more
        sub.drain(timeout=5)  # does not raise: the failure goes to the error callback
        log.wait_for(errors.StreamNotFoundError)
