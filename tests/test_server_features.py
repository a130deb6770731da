"""JetStream of server 2.11 to 2.15 against the bundled nats-server: new config fields, API levels,
per-message TTL, consumer pause/reset/unpin, counters and schedules.

Only the API-level tests use the frame proxy (tests/proxy.py): it makes the server under test
announce itself as a 2.10 or a 2.11 in INFO (no api_lvl, as those do), which a newer server does not do
on demand.  On an older server under test, a test of a newer feature must be refused before sending
(``needs_server``); tests/test_compat.py checks every feature on the real release.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import jsclient
from jsclient.jetstream import api, features
from jsclient.jetstream.api import ConsumerConfig, StreamConfig
from jsclient.server import NatsServer
from tests.proxy import FrameProxy


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _wait_for(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    assert check(), "condition not met in time"  # type: ignore[operator]


# -- models ----------------------------------------------------------------------------------------


@pytest.mark.needs_server("2.14")
def test_every_new_field_round_trips_through_update(js: jsclient.JetStream) -> None:
    """Create with every 2.11-2.15 field set, read back, update an unrelated field: nothing else changes."""
    first = js.add_stream(
        name="NEWA", subjects=["newa.>"], allow_msg_ttl=True, subject_delete_marker_ttl=60, allow_atomic=True,
        allow_msg_schedules=True, allow_batched=True, metadata={"owner": "tests"},
    )
    second = js.add_stream(name="NEWB", subjects=["newb.>"], allow_msg_counter=True, persist_mode="async")
    assert (first.config.allow_msg_ttl, first.config.subject_delete_marker_ttl) == (True, 60.0)
    assert (first.config.allow_atomic, first.config.allow_msg_schedules, first.config.allow_batched) == (True,) * 3
    assert (second.config.allow_msg_counter, second.config.persist_mode) == (True, "async")
    for before in (first.config, second.config):
        read = js.stream_info(str(before.name)).config
        assert read == before and read.unknown_fields == {}  # 2.15 sends nothing this version does not know
        after = js.update_stream(read, description="changed").config
        assert after.description == "changed"
        assert api.replace(after, description=before.description) == before

    pause = (_now() + dt.timedelta(hours=1)).replace(microsecond=0)
    made = js.add_consumer(
        "NEWA", durable_name="C", pause_until=pause, priority_groups=["jobs"], priority_policy="pinned_client",
        priority_timeout=30, metadata={"team": "a"},
    )
    cfg = made.config
    assert (cfg.pause_until, cfg.priority_groups, cfg.priority_policy, cfg.priority_timeout) == (
        pause, ["jobs"], "pinned_client", 30.0,
    )
    assert made.paused and made.pause_remaining is not None and 3500 < made.pause_remaining <= 3600
    assert made.priority_groups is not None and [g.group for g in made.priority_groups] == ["jobs"]
    assert made.priority_groups[0].pinned_ts is None  # nobody pinned yet (the server sends Go's zero time)
    after_consumer = js.update_consumer("NEWA", cfg, description="changed").config
    assert api.replace(after_consumer, description=cfg.description) == cfg


def test_a_field_this_version_does_not_know_goes_back_unchanged() -> None:
    """A reply from a newer server (hand-written: the bundled server sends only fields jsclient knows)."""
    reply = json.dumps({
        "type": "io.nats.jetstream.api.v1.stream_info_response",
        "config": {
            "name": "S", "subjects": ["s.>"], "retention": "limits", "storage": "file", "num_replicas": 1,
            "future_flag": True, "future_limits": {"a": 1},
            "sources": [{"name": "UP", "future_source_field": "x"}],
        },
        "state": {"messages": 0, "future_state": 7},
        "created": "2026-11-23T00:00:00Z",
    }).encode()
    info = api.decode_reply(reply, api.StreamInfo)
    assert info.config.unknown_fields == {"future_flag": True, "future_limits": {"a": 1}}
    assert info.config.sources is not api.msgspec.UNSET and info.config.sources[0].unknown_fields == {
        "future_source_field": "x"
    }
    sent = json.loads(api.encode_body(api.replace(info.config, description="d")))
    assert sent["future_flag"] is True and sent["future_limits"] == {"a": 1} and sent["description"] == "d"
    assert sent["sources"] == [{"name": "UP", "future_source_field": "x"}]
    body = json.loads(api.encode_body({"stream_name": "S", "config": info.config}))
    assert body["config"]["future_flag"] is True
    assert info.config.to_dict()["future_flag"] is True
    # A field the server sent never overrides one the caller set.
    assert json.loads(api.encode_body(api.replace(info.config, subjects=["t.>"])))["subjects"] == ["t.>"]


@pytest.mark.parametrize(
    "kind, fields, fragment",
    [
        (StreamConfig, {"name": "S", "allow_msg_countr": True}, "unknown StreamConfig field(s): allow_msg_countr"),
        (StreamConfig, {"name": "S", "subject_delete_marker_ttl": 0.5}, "subject_delete_marker_ttl must be at least"),
        (StreamConfig, {"name": "S", "persist_mode": "lazy"}, "persist_mode must be one of async, default"),
        (StreamConfig, {"name": "S", "allow_msg_ttl": "yes"}, "allow_msg_ttl must be True or False"),
        (StreamConfig, {"name": "S", "allow_msg_counter": True, "allow_msg_ttl": True}, "allow_msg_counter cannot"),
        (ConsumerConfig, {"priority_policy": "pinned_client"}, "priority_policy 'pinned_client' needs priority_groups"),
        (ConsumerConfig, {"priority_groups": ["g"]}, "priority_groups need a priority_policy"),
        (ConsumerConfig, {"priority_groups": ["g" * 17], "priority_policy": "overflow"}, "priority group 'ggggg"),
        (ConsumerConfig, {"priority_groups": ["a b"], "priority_policy": "overflow"}, "priority group 'a b'"),
        (ConsumerConfig, {"priority_groups": ["a+b"], "priority_policy": "overflow"}, "priority group 'a+b'"),
        (ConsumerConfig, {"priority_groups": ["a)"], "priority_policy": "overflow"}, "priority group 'a)'"),
        (ConsumerConfig, {"priority_policy": "first"}, "priority_policy must be one of"),
        (ConsumerConfig, {"priority_groups": ["g"], "priority_policy": "overflow", "priority_timeout": 5},
         "priority_timeout needs priority_policy pinned_client"),
        (ConsumerConfig, {"pause_until": dt.datetime(2030, 1, 1)}, "pause_until must be a timezone-aware"),
        (ConsumerConfig, {"ack_policy": "sometimes"}, "ack_policy must be one of"),
    ],
)
def test_bad_new_fields_are_named_before_sending(
    js: jsclient.JetStream, kind: type, fields: dict[str, object], fragment: str
) -> None:
    sent = js.conn.stats()["out_msgs"]
    with pytest.raises(jsclient.InvalidArgumentError, match=re.escape(fragment)):
        if kind is StreamConfig:
            js.add_stream(**fields)
        else:
            js.add_consumer("ANY", **fields)
    assert js.conn.stats()["out_msgs"] == sent
    assert js.api_level() == features.server_level(js.conn.server_info)  # the connection is healthy


# -- API levels (ADR-44) -----------------------------------------------------------------------------


def _announcing(version: str) -> Callable[[bytes], bytes]:
    """A proxy filter making INFO say ``version`` without api_lvl, as a 2.10 or 2.11 server's does."""

    def rewrite(frame: bytes) -> bytes:
        if not frame.startswith(b"INFO "):
            return frame
        info = json.loads(frame[5:])
        info.pop("api_lvl", None)
        info["version"] = version
        return b"INFO " + json.dumps(info).encode() + b"\r\n"

    return rewrite


_as_old_server = _announcing("2.10.22")


@pytest.fixture
def old_js() -> Iterator[tuple[jsclient.JetStream, FrameProxy]]:
    with (
        NatsServer() as server,
        FrameProxy(server.host_port, _as_old_server) as proxy,
        jsclient.connect(proxy.url) as nc,
    ):
        js = nc.jetstream()
        js.add_stream(name="OLD", subjects=["old.>"])
        js.add_consumer("OLD", durable_name="D")
        yield js, proxy


@pytest.mark.parametrize(
    "call, feature",
    [
        (lambda js: js.add_stream(name="T", allow_msg_ttl=True), "per-message TTL needs nats-server 2.11"),
        (lambda js: js.add_stream(name="T", allow_msg_counter=True), "message counters needs nats-server 2.12"),
        (lambda js: js.add_stream(name="T", allow_batched=True), "fast-ingest batch publish needs nats-server 2.14"),
        (lambda js: js.add_consumer("OLD", durable_name="P", pause_until=_now() + dt.timedelta(hours=1)),
         "consumer pause needs nats-server 2.11"),
        (lambda js: js.add_consumer("OLD", durable_name="G", priority_groups=["g"], priority_policy="overflow"),
         "priority groups needs nats-server 2.11"),
        (lambda js: js.publish("old.a", b"x", ttl=5), "per-message TTL needs"),
        (lambda js: js.publish("old.s", b"x", schedule="@hourly", schedule_target="old.t"), "message schedules needs"),
        (lambda js: js.counter_add("old.c", 1), "message counters needs"),
        (lambda js: js.pause_consumer("OLD", "D", _now() + dt.timedelta(minutes=1)), "consumer pause needs"),
        (lambda js: js.reset_consumer("OLD", "D"), "consumer reset needs nats-server 2.14"),
        (lambda js: js.unpin_consumer("OLD", "D", "g"), "priority groups needs"),
        (lambda js: js.pull_subscribe("old.>", "D", group="g"), "priority groups needs"),
        (lambda js: js.publish_stream([("old.a", b"1")]), "fast-ingest batch publish needs nats-server 2.14"),
        (lambda js: js.publish_batch([("old.a", b"1")]), "atomic batch publish needs nats-server 2.12"),
        (lambda js: js.atomic_batch(), "atomic batch publish needs"),
        (lambda js: js.counter_get("OLD", "old.c"), "message counters needs"),
        (lambda js: js.counter_get_many("OLD", ["old.c"]), "message counters needs"),
        (lambda js: js.direct_get_last_for_subjects("OLD", ["old.a"]), "multi-subject direct get needs nats-server"),
        (lambda js: js.direct_get("OLD", start_time=_now()), "get by start_time needs nats-server 2.11"),
        (lambda js: js.get_msg("OLD", start_time=_now()), "get by start_time needs"),
        (lambda js: js.direct_get_batch("OLD", "old.a", max_messages=2, start_time=_now()), "get by start_time needs"),
        (lambda js: js.create_key_value("oldkv", limit_marker_ttl=60), "per-message TTL needs"),
        (lambda js: js.add_stream(name="T", persist_mode="async"), "persist_mode async needs nats-server 2.12"),
        (lambda js: js.add_stream(name="T", subject_delete_marker_ttl=60), "subject delete markers needs"),
        (lambda js: js.add_consumer("OLD", durable_name="F", ack_policy="flow_control", deliver_subject="f"),
         "ack_policy flow_control needs nats-server 2.14"),
    ],
)
def test_a_feature_the_server_lacks_is_refused_before_sending(
    old_js: tuple[jsclient.JetStream, FrameProxy], call: object, feature: str
) -> None:
    js, proxy = old_js
    before = len(proxy.sent)
    with pytest.raises(jsclient.FeatureNotSupportedError, match=feature) as info:
        call(js)  # type: ignore[operator]
    assert "the connected server is 2.10.22 (API level 0)" in str(info.value)
    assert (info.value.code, info.value.err_code) == (412, 10185)
    assert len(proxy.sent) == before  # nothing went out
    assert js.publish("old.a", b"still fine").seq >= 1


def test_a_2_10_server_is_asked_for_one_message_at_a_time(
    old_js: tuple[jsclient.JetStream, FrameProxy]
) -> None:
    """Decided by the release before sending: a batch (which a 2.10 server ignores) is never asked for."""
    js, proxy = old_js
    js.add_stream(name="OLDD", subjects=["oldd.>"], allow_direct=True)
    for i in range(4):
        js.publish(f"oldd.{i}", b"%d" % i)
    before = len(proxy.sent)
    reading = js.direct_get_batch("OLDD", "oldd.>", max_messages=3, seq=2)
    assert [m.seq for m in reading] == [2, 3, 4] and reading.num_pending is None
    assert b'"batch"' not in bytes(proxy.sent[before:]) and bytes(proxy.sent[before:]).count(b"DIRECT.GET.OLDD") == 3
    js.delete_stream("OLDD")


def test_a_2_11_server_has_level_1_without_saying_so(server: NatsServer) -> None:
    """Its INFO has no api_lvl: the release says level 1, so 2.11 features go out and 2.12 ones are refused."""
    with (
        FrameProxy(server.host_port, _announcing("2.11.9")) as proxy,
        jsclient.connect(proxy.url) as nc,
    ):
        js = nc.jetstream()
        assert "api_lvl" not in nc.server_info and features.server_level(nc.server_info) == 1
        for feature in (features.MESSAGE_TTL, features.CONSUMER_PAUSE, features.PRIORITY_GROUPS,
                        features.BATCHED_DIRECT_GET, features.MULTI_LAST_DIRECT_GET, features.START_TIME_GET):
            assert js.require(feature) == 1
        before = len(proxy.sent)
        with pytest.raises(jsclient.FeatureNotSupportedError) as info:
            js.add_stream(name="L2", subjects=["l2"], allow_msg_counter=True)
        assert "message counters needs nats-server 2.12" in str(info.value)
        assert "the connected server is 2.11.9 (API level 1)" in str(info.value)
        with pytest.raises(jsclient.FeatureNotSupportedError, match="priority_policy prioritized needs nats-server 2"):
            js.add_consumer("ANY", durable_name="p", priority_groups=["g"], priority_policy="prioritized")
        assert len(proxy.sent) == before


@pytest.mark.parametrize(
    "info, level",
    [
        ({"version": "2.10.26"}, 0),
        ({"version": "2.11.11"}, 1),
        ({"version": "2.11.0-RC.2"}, 1),
        ({"version": "2.12.8", "api_lvl": 3}, 3),
        ({"version": "2.15.1", "api_lvl": 5}, 5),
        ({"version": "2.9.25"}, 0),
        ({"version": "3.0.0"}, 1),  # a future release without api_lvl: the least it has
        ({}, 0),
        ({"version": "unknown"}, 0),
        ({"version": "2.12.0", "api_lvl": True}, 1),  # not a level
    ],
)
def test_the_level_comes_from_what_the_server_supports(info: dict[str, object], level: int) -> None:
    assert features.server_level(info) == level


@pytest.mark.server_behaviour("2.12", "Nats-Required-Api-Level is checked from 2.12 on")
def test_a_jetstream_server_below_the_level_asked_answers_10185(nc: jsclient.Connection) -> None:
    """The header every level-needing call carries: the real server refuses a level it lacks."""
    reply = nc.request("$JS.API.INFO", b"", timeout=5, headers={"Nats-Required-Api-Level": "99"})
    with pytest.raises(jsclient.FeatureNotSupportedError) as info:
        api.check_error(reply.data)
    assert info.value.err_code == 10185
    ok = nc.request("$JS.API.INFO", b"", timeout=5, headers={"Nats-Required-Api-Level": "1"})
    api.check_error(ok.data)


# -- per-message TTL (ADR-43) -------------------------------------------------------------------------


@pytest.mark.needs_server("2.11")
def test_a_message_ttl_expires_it_and_leaves_a_marker(js: jsclient.JetStream) -> None:
    # Keeping one message per subject: otherwise the server raises a TTL to subject_delete_marker_ttl.
    js.add_stream(
        name="TTL", subjects=["ttl.>"], allow_msg_ttl=True, subject_delete_marker_ttl=60, allow_direct=True,
        max_msgs_per_subject=1,
    )
    js.publish("ttl.short", b"soon gone", ttl=1)
    js.publish_async("ttl.async", b"also gone", ttl=dt.timedelta(seconds=1)).result(5)
    js.publish("ttl.kept", b"kept", ttl="never")
    assert js.direct_get("TTL", last_by_subj="ttl.short").headers["Nats-TTL"] == "1"

    def markers() -> dict[str, jsclient.jetstream.direct.StoredMessage]:
        return {m.subject: m for m in js.direct_get_batch("TTL", "ttl.>", max_messages=20) if m.data == b""}

    _wait_for(lambda: set(markers()) == {"ttl.short", "ttl.async"})
    for marker in markers().values():
        assert marker.headers["Nats-Marker-Reason"] == "MaxAge"
    assert js.direct_get("TTL", last_by_subj="ttl.kept").data == b"kept"
    # A consumer sees the markers too: what was there is gone, and why.
    seen = js.subscribe("ttl.>", ordered=True)
    got = [seen.next_msg(timeout=5) for _ in range(3)]
    assert sorted((m.subject, m.data, (m.headers or {}).get("Nats-Marker-Reason")) for m in got) == [
        ("ttl.async", b"", "MaxAge"), ("ttl.kept", b"kept", None), ("ttl.short", b"", "MaxAge"),
    ]
    seen.unsubscribe()


@pytest.mark.needs_server("2.11")
def test_a_ttl_below_the_marker_ttl_is_raised_to_it(js: jsclient.JetStream) -> None:
    """The docs: with more than one message per subject, the server lifts a TTL to subject_delete_marker_ttl."""
    js.add_stream(name="FLOOR", subjects=["floor"], allow_msg_ttl=True, subject_delete_marker_ttl=60, allow_direct=True)
    js.publish("floor", b"x", ttl=1)
    assert js.direct_get("FLOOR", last_by_subj="floor").headers["Nats-TTL"] == "60"


@pytest.mark.needs_server("2.11")
def test_never_outlives_the_streams_max_age(js: jsclient.JetStream) -> None:
    js.add_stream(name="AGE", subjects=["age.>"], allow_msg_ttl=True, max_age=1)
    js.publish("age.never", b"stays", ttl="never")
    js.publish("age.plain", b"goes")
    _wait_for(lambda: js.stream_info("AGE").state.messages == 1)
    time.sleep(1.5)
    assert js.get_msg("AGE", last_by_subj="age.never").data == b"stays"


@pytest.mark.parametrize(
    "ttl", [0, 0.5, 1.5, -1, True, "soon", dt.timedelta(milliseconds=1500), float("inf"), float("nan"), 0.0, None]
)
def test_a_bad_ttl_is_named_before_sending(js: jsclient.JetStream, ttl: object) -> None:
    """Checked before the server's release is (a plain stream: the checks are the client's, on any server)."""
    js.add_stream(name="BADTTL", subjects=["badttl"])
    bad = [ttl] if ttl is not None else [[1], b"1", "1.5"]
    for value in bad:
        with pytest.raises(jsclient.InvalidArgumentError, match=r"^ttl must be"):
            js.publish("badttl", b"x", ttl=value)  # type: ignore[arg-type]
        with pytest.raises(jsclient.InvalidArgumentError, match=r"^ttl must be"):
            js.publish_async("badttl", b"x", ttl=value)  # type: ignore[arg-type]
    assert js.stream_info("BADTTL").state.messages == 0


@pytest.mark.needs_server("2.11")
@pytest.mark.parametrize("ttl, header", [(1.0, "1"), (60.0, "60"), (2, "2"), (dt.timedelta(seconds=3), "3"),
                                         ("never", "never"), ("NEVER", "never")])
def test_a_whole_second_ttl_is_taken_in_any_form(js: jsclient.JetStream, ttl: object, header: str) -> None:
    """1.0 is one second, as every other duration of the API takes it."""
    js.add_stream(name="WHOLE", subjects=["whole"], allow_msg_ttl=True)
    ack = js.publish("whole", b"x", ttl=ttl)  # type: ignore[arg-type]
    later = js.publish_async("whole", b"y", ttl=ttl).result(5)  # type: ignore[arg-type]
    for seq in (ack.seq, later.seq):
        assert js.get_msg("WHOLE", seq).hdrs == b"NATS/1.0\r\nNats-TTL: %s\r\n\r\n" % header.encode()


@pytest.mark.needs_server("2.11")
def test_a_ttl_on_a_stream_without_ttls_is_refused_by_code(js: jsclient.JetStream) -> None:
    js.add_stream(name="NOTTL", subjects=["nottl"])
    with pytest.raises(jsclient.MessageTTLError) as info:
        js.publish("nottl", b"x", ttl=5)
    assert info.value.err_code == 10166
    assert js.stream_info("NOTTL").state.messages == 0


# -- consumer pause, resume, reset, unpin ------------------------------------------------------------


@pytest.mark.needs_server("2.11")
def test_a_paused_consumer_delivers_nothing_and_misses_no_heartbeat(server: NatsServer) -> None:
    seen: list[BaseException] = []
    with jsclient.connect(server.url, error_cb=seen.append) as nc:
        _paused_consumer(nc.jetstream(), seen)


def _paused_consumer(js: jsclient.JetStream, seen: list[BaseException]) -> None:
    js.add_stream(name="PAUSE", subjects=["pause"])
    psub = js.pull_subscribe("pause", durable="p")
    paused = js.pause_consumer("PAUSE", "p", _now() + dt.timedelta(minutes=5))
    assert paused.paused and paused.pause_until is not None and paused.pause_remaining is not None
    assert js.consumer_info("PAUSE", "p").paused
    js.publish("pause", b"waits")
    # Heartbeats go on while paused: a fetch with a heartbeat ends empty, not with HeartbeatsMissedError.
    assert psub.fetch(1, timeout=1.5, heartbeat=0.2) == []
    stream = psub.messages(max_messages=5, expires=2.0, heartbeat=0.2)
    it = iter(stream)
    got: list[jsclient.Msg] = []
    reader = threading.Thread(target=lambda: got.append(next(it)))
    reader.start()
    time.sleep(2.5)  # several heartbeats, and one expired pull request
    assert got == [] and not [e for e in seen if isinstance(e, jsclient.HeartbeatsMissedError)]
    resumed = js.resume_consumer("PAUSE", "p")
    assert not resumed.paused and resumed.pause_until is None
    reader.join(10)
    assert [m.data for m in got] == [b"waits"]
    got[0].ack()
    stream.stop()
    with pytest.raises(jsclient.InvalidArgumentError, match="timezone-aware"):
        js.pause_consumer("PAUSE", "p", dt.datetime(2030, 1, 1))

    # A push consumer too: paused, its heartbeats keep the watchdog quiet.
    push = js.subscribe("pause", durable="push", idle_heartbeat=0.2, heartbeat_alarm=0.6)
    assert push.next_msg(timeout=2).data == b"waits"
    js.pause_consumer("PAUSE", "push", _now() + dt.timedelta(minutes=5))
    js.publish("pause", b"after")
    with pytest.raises(jsclient.TimeoutError):
        push.next_msg(timeout=2.0)
    assert not [e for e in seen if isinstance(e, jsclient.HeartbeatsMissedError)]
    js.resume_consumer("PAUSE", "push")
    assert push.next_msg(timeout=5).data == b"after"
    push.unsubscribe()
    js.delete_stream("PAUSE")


@pytest.mark.needs_server("2.14")
def test_reset_delivers_again_from_a_sequence(js: jsclient.JetStream) -> None:
    js.add_stream(name="RESET", subjects=["reset"])
    for i in range(5):
        js.publish("reset", b"%d" % i)
    psub = js.pull_subscribe("reset", durable="r")
    for m in psub.fetch(5, timeout=5):
        m.ack_sync()
    assert psub.fetch(1, timeout=0.5) == []
    reset = js.reset_consumer("RESET", "r", seq=3)
    assert reset.reset_seq == 3 and reset.name == "r"
    assert [m.data for m in psub.fetch(5, timeout=5)] == [b"2", b"3", b"4"]
    with pytest.raises(jsclient.InvalidArgumentError, match="seq must be an int >= 1"):
        js.reset_consumer("RESET", "r", seq=0)
    # Without a sequence: from just past the ack floor (3 and 4 are not acked yet).
    assert js.reset_consumer("RESET", "r").reset_seq == 3
    assert [m.data for m in psub.fetch(5, timeout=5)] == [b"2", b"3", b"4"]


@pytest.mark.needs_server("2.12")
def test_level_needing_calls_carry_the_required_level(server: NatsServer) -> None:
    """What makes a too-old JetStream server behind a newer one refuse rather than drop a field."""
    with FrameProxy(server.host_port) as proxy, jsclient.connect(proxy.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="LVL", subjects=["lvl"])
        assert b"Nats-Required-Api-Level" not in proxy.sent  # nothing asked of a plain stream
        js.add_stream(name="LVLC", subjects=["lvlc"], allow_msg_counter=True)
        js.add_consumer("LVL", durable_name="c", pause_until=_now() + dt.timedelta(minutes=1))
        sent = bytes(proxy.sent)
        assert b"STREAM.CREATE.LVLC" in sent and b"Nats-Required-Api-Level: 2\r\n" in sent
        assert b"CONSUMER.CREATE.LVL.c" in sent and b"Nats-Required-Api-Level: 1\r\n" in sent
        js.delete_stream("LVL")
        js.delete_stream("LVLC")


@pytest.mark.needs_server("2.11")
def test_unpin_releases_a_pinned_group(js: jsclient.JetStream) -> None:
    js.add_stream(name="PIN", subjects=["pin"])
    js.add_consumer("PIN", durable_name="w", priority_groups=["jobs"], priority_policy="pinned_client")
    js.unpin_consumer("PIN", "w", "jobs")
    with pytest.raises(jsclient.JetStreamAPIError) as info:
        js.unpin_consumer("PIN", "w", "other")
    assert info.value.code == 400
    with pytest.raises(jsclient.InvalidArgumentError, match="priority group"):
        js.unpin_consumer("PIN", "w", "no spaces")


# -- counters (ADR-49) --------------------------------------------------------------------------------


@pytest.mark.needs_server("2.12")
def test_counters_add_exactly_across_threads(js: jsclient.JetStream) -> None:
    js.add_stream(name="CNT", subjects=["cnt.>"], allow_msg_counter=True, allow_direct=True)

    def add_many(delta: int) -> None:
        for _ in range(100):
            js.counter_add("cnt.hits", delta)

    threads = [threading.Thread(target=add_many, args=(d,)) for d in (1, 2, 3, -1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert js.counter_get("CNT", "cnt.hits") == 500
    big = 10**40
    assert js.counter_add("cnt.big", big) == big and js.counter_add("cnt.big", -big - 1) == -1
    assert js.counter_get_many("CNT", ["cnt.>"]) == {"cnt.hits": 500, "cnt.big": -1}
    with pytest.raises(jsclient.MessageNotFoundError):
        js.counter_get("CNT", "cnt.never")


@pytest.mark.needs_server("2.12")
def test_counters_without_direct_get_and_bad_input(js: jsclient.JetStream) -> None:
    js.add_stream(name="CNTS", subjects=["cnts.>"], allow_msg_counter=True)
    assert js.counter_add("cnts.a", 7) == 7
    assert js.counter_get("CNTS", "cnts.a") == 7
    assert js.counter_get_many("CNTS", ["cnts.a", "cnts.none"]) == {"cnts.a": 7}
    with pytest.raises(jsclient.InvalidArgumentError, match="no wildcards"):
        js.counter_get_many("CNTS", ["cnts.*"])
    for bad in (1.5, True, "1", None):
        with pytest.raises(jsclient.InvalidArgumentError, match="a counter delta must be an int"):
            js.counter_add("cnts.a", bad)  # type: ignore[arg-type]
    assert js.counter_get("CNTS", "cnts.a") == 7
    js.add_stream(name="PLAINC", subjects=["plainc"])
    with pytest.raises(jsclient.CounterError) as info:
        js.counter_add("plainc", 1)
    assert info.value.err_code == 10168


# -- schedules (ADR-51) -------------------------------------------------------------------------------


@pytest.mark.needs_server("2.14")  # 2.12 takes '@at' schedules only
def test_schedules_publish_to_their_target(js: jsclient.JetStream) -> None:
    js.add_stream(name="SCH", subjects=["sch.>"], allow_msg_schedules=True, allow_msg_ttl=True, allow_direct=True)
    js.publish("sch.every", b"tick", schedule=dt.timedelta(seconds=1), schedule_target="sch.ticks")
    js.publish("sch.once", b"later", schedule=_now() + dt.timedelta(seconds=1), schedule_target="sch.done",
               headers={"Kind": "delayed"})
    js.publish("sch.cron", b"cron", schedule="* * * * * *", schedule_target="sch.cron_out",
               schedule_time_zone="Europe/Amsterdam", schedule_ttl=60)

    def subjects() -> list[str]:
        return [m.subject for m in js.direct_get_batch("SCH", "sch.>", max_messages=100)]

    _wait_for(lambda: subjects().count("sch.ticks") >= 2 and "sch.done" in subjects()
              and "sch.cron_out" in subjects())
    done = js.direct_get("SCH", last_by_subj="sch.done")
    assert done.data == b"later" and done.headers["Kind"] == "delayed"
    assert done.headers["Nats-Scheduler"] == "sch.once"
    cron = js.direct_get("SCH", last_by_subj="sch.cron_out")
    assert cron.headers["Nats-TTL"] in ("60", "1m0s", "1m")
    with pytest.raises(jsclient.MessageNotFoundError):
        js.direct_get("SCH", last_by_subj="sch.once")  # a one-off schedule is gone once it fired


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"schedule": "@hourly"}, "a schedule needs schedule_target"),
        ({"schedule": "@hourly", "schedule_target": "sch.s"}, "must differ from the schedule's own subject"),
        ({"schedule": "@sometimes", "schedule_target": "sch.t"}, "is not '@at <time>'"),
        ({"schedule": "* * * * *", "schedule_target": "sch.t"}, "a cron line of 6 fields"),
        ({"schedule": "@every 500ms", "schedule_target": "sch.t"}, "a duration of at least 1s"),
        ({"schedule": "@at tomorrow", "schedule_target": "sch.t"}, "RFC 3339"),
        ({"schedule": dt.datetime(2030, 1, 1), "schedule_target": "sch.t"}, "timezone-aware"),
        ({"schedule": dt.timedelta(milliseconds=10), "schedule_target": "sch.t"}, "interval must be at least 1 s"),
        ({"schedule": dt.timedelta(seconds=1.5), "schedule_target": "sch.t"}, "interval must be whole seconds"),
        ({"schedule": "@daily", "schedule_target": "sch.t", "schedule_ttl": 1.5}, "schedule_ttl must be whole"),
        ({"schedule": "@hourly", "schedule_target": "sch.*"}, "schedule_target"),
        ({"schedule": dt.timedelta(seconds=5), "schedule_target": "sch.t", "schedule_time_zone": "UTC"},
         "cron schedules only"),
        ({"schedule": "@daily", "schedule_target": "sch.t", "schedule_time_zone": "+02:00"}, "IANA zone"),
        ({"schedule": "@daily", "schedule_target": "sch.t", "schedule_ttl": 0}, "schedule_ttl must be"),
        ({"schedule_target": "sch.t"}, "schedule_target needs schedule"),
    ],
)
def test_a_bad_schedule_is_named_before_sending(
    js: jsclient.JetStream, kwargs: dict[str, object], fragment: str
) -> None:
    js.add_stream(name="SCHB", subjects=["sch.>"])  # a plain stream: the checks are the client's, on any server
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment.replace("*", r"\*").replace("+", r"\+")):
        js.publish("sch.s", b"x", **kwargs)  # type: ignore[arg-type]
    assert js.stream_info("SCHB").state.messages == 0


@pytest.mark.needs_server("2.12")
def test_a_schedule_on_a_stream_without_schedules_is_refused_by_code(js: jsclient.JetStream) -> None:
    js.add_stream(name="NOSCH", subjects=["nosch.>"])
    with pytest.raises(jsclient.ScheduleError) as info:
        js.publish("nosch.s", b"x", schedule=_now() + dt.timedelta(hours=1), schedule_target="nosch.t")  # '@at': 2.12
    assert info.value.err_code == 10188


# -- key-value TTLs (ADR-48) --------------------------------------------------------------------------


@pytest.mark.needs_server("2.11")
def test_a_key_with_a_ttl_expires_and_watchers_see_it_purged(js: jsclient.JetStream) -> None:
    kv = js.create_key_value("ttlkv", limit_marker_ttl=60)
    assert kv.status().limit_marker_ttl == 60.0
    watcher = kv.watch()
    assert watcher.next(timeout=2) is None  # no initial values
    kv.create("session", b"s1", ttl=1)
    kv.put("config", b"stays")
    assert kv.get("session").value == b"s1"
    with pytest.raises(jsclient.KeyExistsError):
        kv.create("session", b"again", ttl=1)
    updates = [watcher.next(timeout=5), watcher.next(timeout=5)]
    assert [(e.key, e.operation) for e in updates if e] == [("session", "PUT"), ("config", "PUT")]
    gone = watcher.next(timeout=10)  # the server's MaxAge marker
    assert gone is not None and (gone.key, gone.operation, gone.value) == ("session", "PURGE", b"")
    with pytest.raises(jsclient.KeyDeletedError) as info:
        kv.get("session")
    assert info.value.entry.operation == "PURGE"
    assert kv.keys() == ["config"]
    assert kv.create("session", b"s2") > 0  # a removed key can be created again
    watcher.stop()


@pytest.mark.needs_server("2.11")
def test_a_purge_marker_with_a_ttl_goes_away(js: jsclient.JetStream) -> None:
    kv = js.create_key_value("purgettl", limit_marker_ttl=1)
    kv.put("k", b"v")
    kv.purge("k", ttl=1)
    with pytest.raises(jsclient.KeyDeletedError):
        kv.get("k")

    def gone() -> bool:
        try:
            kv.get("k")
        except jsclient.KeyDeletedError:
            return False
        except jsclient.KeyNotFoundError:
            return True
        return False

    _wait_for(gone)
    assert kv.status().values == 0


@pytest.mark.needs_server("2.11")
def test_key_ttls_need_a_bucket_with_limit_markers(js: jsclient.JetStream) -> None:
    kv = js.create_key_value("plainkv")
    for bad in (0, 0.5, 1.5, "soon", True):
        with pytest.raises(jsclient.InvalidArgumentError, match="ttl must be"):
            kv.create("k", b"v", ttl=bad)  # type: ignore[arg-type]
        with pytest.raises(jsclient.InvalidArgumentError, match="ttl must be"):
            kv.purge("k", ttl=bad)  # type: ignore[arg-type]
    with pytest.raises(jsclient.InvalidArgumentError, match="limit_marker_ttl must be at least 1 s"):
        js.create_key_value("badkv", limit_marker_ttl=0.5)
    with pytest.raises(jsclient.InvalidArgumentError, match="limit_marker_ttl must be whole seconds"):
        js.create_key_value("badkv", limit_marker_ttl=1.5)
    assert kv.status().values == 0 and kv.status().limit_marker_ttl == 0.0
    assert "KV_badkv" not in js.stream_names()
    with pytest.raises(jsclient.MessageTTLError):  # last: a 2.10 server is refused here, before sending
        kv.create("k", b"v", ttl=5)
    assert js.create_key_value("wholekv", limit_marker_ttl=2.0).status().limit_marker_ttl == 2.0


@pytest.mark.needs_server("2.11")
def test_with_history_a_key_ttl_is_raised_to_the_marker_ttl(js: jsclient.JetStream) -> None:
    """The docs: with history above 1 the server lifts a key's TTL below limit_marker_ttl to it."""
    kv = js.create_key_value("histkv", history=2, limit_marker_ttl=60)
    kv.create("k", b"v", ttl=1)
    assert js.direct_get("KV_histkv", last_by_subj="$KV.histkv.k").headers["Nats-TTL"] == "60"


# -- priority groups (ADR-42) ---------------------------------------------------------------------------


@pytest.mark.needs_server("2.11")
def test_a_pinned_group_fails_over_and_the_old_pin_is_forgotten(js: jsclient.JetStream) -> None:
    js.add_stream(name="PINNED", subjects=["pinned"])
    js.add_consumer("PINNED", durable_name="w", ack_policy="explicit", priority_groups=["jobs"],
                    priority_policy="pinned_client", priority_timeout=1)
    first = js.pull_subscribe("pinned", "w", group="jobs")
    second = js.pull_subscribe("pinned", "w", group="jobs")
    for i in range(10):
        js.publish("pinned", b"%d" % i)
    got = first.fetch(5, timeout=3)
    assert [m.data for m in got] == [b"%d" % i for i in range(5)] and first.pin_id
    for m in got:
        m.ack_sync()
    assert got[0].headers["Nats-Pin-Id"] == first.pin_id
    # The standby, consuming with messages(), gets nothing while the pin holds ...
    stream = second.messages(max_messages=10, expires=5.0)
    it = iter(stream)
    taken: list[jsclient.Msg] = []

    def take() -> None:
        for m in it:
            taken.append(m)
            m.ack()
            if len(taken) == 5:
                return

    standby = threading.Thread(target=take)
    standby.start()
    # ... and once the pinned client has stopped pulling for priority_timeout, takes over.
    standby.join(15)
    assert [m.data for m in taken] == [b"%d" % i for i in range(5, 10)]
    assert second.pin_id and second.pin_id != first.pin_id
    stream.stop()
    # The old pin is stale: the server answers 423; the fetch forgets it and asks again, without an error.
    stale = first.pin_id
    assert first.fetch(1, timeout=1.0) == []
    assert first.pin_id is None and stale
    js.unpin_consumer("PINNED", "w", "jobs")
    js.publish("pinned", b"10")
    again = first.fetch(1, timeout=5)  # would be refused for ever if the stale id were still sent
    assert [m.data for m in again] == [b"10"] and first.pin_id not in (None, stale)


@pytest.mark.needs_server("2.11")
def test_an_overflow_member_waits_for_min_pending(js: jsclient.JetStream) -> None:
    js.add_stream(name="OVER", subjects=["over"])
    js.add_consumer("OVER", durable_name="o", ack_policy="explicit", priority_groups=["jobs"],
                    priority_policy="overflow")
    overflow = js.pull_subscribe("over", "o", group="jobs", min_pending=5)
    for i in range(3):
        js.publish("over", b"%d" % i)
    assert overflow.fetch(3, timeout=1.0) == []  # 3 pending: below the threshold
    # That fetch's request expires on the server a moment before the fetch gives up; on a loaded machine the
    # server still held it when the next messages came, so it was served first, and the threshold then held back
    # what the next fetch asked for (it got 2).  A waiting request placed by hand does the same, every time.
    deadline = time.monotonic() + 10
    while js.consumer_info("OVER", "o").num_waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(3, 8):
        js.publish("over", b"%d" % i)
    got = overflow.fetch(3, timeout=5)
    assert [m.data for m in got] == [b"0", b"1", b"2"]


@pytest.mark.needs_server("2.11")
@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"group": "other"}, "group 'other' is not one of the consumer's"),
        ({"group": "jobs", "priority": 1}, "priority needs priority_policy prioritized"),
        ({"group": "jobs", "min_pending": 0}, "min_pending must be an int >= 1"),
        ({}, "every pull needs one"),
        ({"min_pending": 5}, "min_pending needs group"),
        ({"group": "jobs", "priority": 10}, "priority must be an int from 0 to 9"),
        ({"group": "bad group"}, "priority group 'bad group'"),
    ],
)
def test_a_bad_membership_is_named_before_any_pull(
    js: jsclient.JetStream, kwargs: dict[str, object], fragment: str
) -> None:
    js.add_stream(name="GRP", subjects=["grp"])
    js.add_consumer("GRP", durable_name="g", ack_policy="explicit", priority_groups=["jobs"],
                    priority_policy="overflow")
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
        js.pull_subscribe("grp", "g", **kwargs)  # type: ignore[arg-type]
    assert js.consumer_info("GRP", "g").num_waiting == 0


@pytest.mark.needs_server("2.12")
def test_a_prioritized_group_serves_the_lower_priority_first(js: jsclient.JetStream) -> None:
    js.add_stream(name="PRIO", subjects=["prio"])
    js.add_consumer("PRIO", durable_name="p", ack_policy="explicit", priority_groups=["jobs"],
                    priority_policy="prioritized")
    results: dict[int, list[bytes]] = {}

    def pull(priority: int) -> None:
        sub = js.pull_subscribe("prio", "p", group="jobs", priority=priority)
        results[priority] = [m.data for m in sub.fetch(5, timeout=3)]

    threads = [threading.Thread(target=pull, args=(p,)) for p in (1, 0)]  # the far one asks first
    for t in threads:
        t.start()
    _wait_for(lambda: js.consumer_info("PRIO", "p").num_waiting == 2)
    for i in range(5):
        js.publish("prio", b"%d" % i)
    for t in threads:
        t.join(10)
    assert results == {0: [b"0", b"1", b"2", b"3", b"4"], 1: []}


# -- key-value features of other clients (ADR-8) --------------------------------------------------------


def test_watch_a_list_of_filters_updates_only_and_resume(js: jsclient.JetStream) -> None:
    kv = js.create_key_value("watchkv", history=5)
    r1 = kv.put("a.1", b"1")
    kv.put("b.1", b"2")
    kv.put("c.1", b"3")
    with kv.watch(["a.>", "c.>"]) as watcher:
        assert sorted(e.key for e in watcher.initial()) == ["a.1", "c.1"]
        kv.put("b.2", b"not watched")
        kv.put("c.2", b"4")
        live = watcher.next(timeout=5)
        assert live is not None and (live.key, live.value) == ("c.2", b"4")
    with kv.watch(updates_only=True) as watcher:
        assert watcher.next(timeout=5) is None  # no current values: their end comes at once (ADR-8)
        kv.put("a.1", b"5")
        first = watcher.next(timeout=5)  # then the change itself
        assert first is not None and (first.key, first.value) == ("a.1", b"5")
    with kv.watch(resume_from_revision=r1 + 1) as watcher:
        resumed = [(e.key, e.revision) for e in watcher.initial()]
        assert resumed[0] == ("b.1", r1 + 1) and len(resumed) == 5  # everything from that revision on
    for kwargs, fragment in (
        ({"updates_only": True, "include_history": True}, "updates_only cannot be combined with include_history"),
        ({"include_history": True, "resume_from_revision": 1}, "include_history cannot be combined"),
        ({"resume_from_revision": 0}, "resume_from_revision must be an int >= 1"),
        ({"keys": []}, "non-empty list"),
        ({"keys": ["a", "bad key"]}, "bad key"),
        ({"updates_only": "yes"}, "updates_only must be True or False"),
    ):
        with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
            kv.watch(**kwargs)  # type: ignore[arg-type]


def test_purge_deletes_keeps_young_markers(js: jsclient.JetStream) -> None:
    kv = js.create_key_value("pdkv", history=5)
    for key in ("gone", "also", "live"):
        kv.put(key, b"1")
        kv.put(key, b"2")
    kv.delete("gone")
    kv.purge("also")
    assert kv.purge_deletes() == 2  # both markers are young: they stay, alone
    with pytest.raises(jsclient.KeyDeletedError):
        kv.get("gone")
    assert len(kv.history("gone")) == 1 and kv.history("live")[-1].value == b"2"
    assert kv.purge_deletes(older_than=-1) == 2  # now every marker goes
    with pytest.raises(jsclient.KeyNotFoundError) as info:
        kv.get("gone")
    assert not isinstance(info.value, jsclient.KeyDeletedError)
    assert kv.keys() == ["live"] and kv.status().values == 2


def test_buckets_are_listed_and_updated(js: jsclient.JetStream) -> None:
    js.create_key_value("lista", compression=True)
    js.create_key_value("listb", history=3)
    js.add_stream(name="NOTKV", subjects=["notkv"])
    assert js.key_value_names() == ["lista", "listb"]
    statuses = js.key_values()
    assert [(s.bucket, s.history) for s in statuses] == [("lista", 1), ("listb", 3)]
    assert statuses[0].info.config.compression == "s2"
    js.update_key_value("listb", history=10, description="more history")
    assert js.key_value("listb").status().history == 10
    with pytest.raises(jsclient.InvalidArgumentError, match="unknown bucket option"):
        js.update_key_value("listb", histroy=2)


def test_mirror_and_sourced_buckets(js: jsclient.JetStream) -> None:
    origin = js.create_key_value("origin", history=3)
    origin.put("a", b"1")
    copy = js.create_key_value("copy", mirror="origin")
    _wait_for(lambda: _value(copy, "a") == b"1")
    copy.put("b", b"2")  # a mirror's writes go to its origin, and come back mirrored
    assert origin.get("b").value == b"2"
    _wait_for(lambda: _value(copy, "b") == b"2")
    bound = js.key_value("copy")
    assert bound.origin == "origin" and sorted(bound.keys()) == ["a", "b"]
    with bound.watch("a") as watcher:
        first = watcher.next(timeout=5)
        assert first is not None and (first.key, first.value) == ("a", b"1")
    east, west = js.create_key_value("east"), js.create_key_value("west")
    east.put("x", b"from east")
    west.put("y", b"from west")
    both = js.create_key_value("both", sources=["east", "west"])
    _wait_for(lambda: _value(both, "x") == b"from east" and _value(both, "y") == b"from west")
    assert sorted(both.keys()) == ["x", "y"]
    assert js.key_value_names() == ["both", "copy", "east", "origin", "west"]  # the mirror has no subjects
    with pytest.raises(jsclient.InvalidArgumentError, match="a mirror bucket cannot have sources"):
        js.create_key_value("bad", mirror="origin", sources=["east"])
    with pytest.raises(jsclient.InvalidArgumentError, match="bucket"):
        js.create_key_value("bad", sources=["no such.bucket"])


def _value(kv: jsclient.KeyValue, key: str) -> bytes | None:
    try:
        return kv.get(key).value
    except jsclient.KeyNotFoundError:
        return None
