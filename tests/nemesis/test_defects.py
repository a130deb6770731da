"""Library defects the nemesis found, each reproduced on its own, deterministically (each fails without its fix)."""

from __future__ import annotations

import logging
import time

import pytest

import jsclient
from tests.nemesis.cluster import LinkedCluster


def test_a_publish_refused_as_its_id_in_process_says_it_may_still_be_stored() -> None:
    """Seen in every nemesis run (publish_async retries after a timeout).  Here: the stream's leader is cut
    from its followers, so a publish with id "x" is proposed but cannot commit and times out (UNKNOWN); the
    same publish sent again is refused at once, as "in process"; the partition heals within Raft's
    election timeout and the first attempt commits: the message whose last publish "failed" is stored.
    Before the fix the refusal was a plain JetStreamAPIError with no outcome: MsgIdInProcessError says UNKNOWN.
    nats-server 2.10 answers the resend with an ack, a duplicate of sequence 0 (nothing stored yet), which the
    client raises as the same error; before that fix, 2.10's answer passed for an ack of a stored message."""
    with LinkedCluster(3, name="dup") as cluster, jsclient.connect(cluster.urls[0]) as admin:
        js = admin.jetstream(timeout=5)
        deadline = time.monotonic() + 30
        while True:
            try:
                js.add_stream(name="D", subjects=["d.>"], num_replicas=3, duplicate_window=600)
                js.publish("d.warm", b"w")  # the stream has a leader and a quorum
                break
            except (jsclient.JetStreamAPIError, jsclient.TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail("no stream leader in 30 s")
                time.sleep(0.3)
        info = js.stream_info("D")
        if info.cluster is None or not info.cluster.leader:
            pytest.fail(f"stream D has no leader: {info.cluster}")
        leader = cluster.index(info.cluster.leader)
        with jsclient.connect(cluster.urls[leader]) as nc:
            on_leader = nc.jetstream(timeout=1)
            cluster.isolate(leader)
            try:
                with pytest.raises(jsclient.TimeoutError):
                    on_leader.publish("d.x", b"x", msg_id="x")
                with pytest.raises(jsclient.JetStreamAPIError) as refused:
                    on_leader.publish("d.x", b"x", msg_id="x")
            finally:
                cluster.heal()
        ack = js.publish("d.x", b"x", msg_id="x")  # the first attempt committed once healed
        if refused.value.err_code != 10158 or not ack.duplicate or js.stream_info("D").state.messages != 2:
            pytest.fail(f"not the case under test: {refused.value!r}, {ack}")
        assert isinstance(refused.value, jsclient.MsgIdInProcessError)
        assert refused.value.outcome is jsclient.RequestOutcome.UNKNOWN


def _leader(js: jsclient.JetStream, stream: str) -> str | None:
    """The leader ``js``'s server names for ``stream`` (None: no answer or no leader)."""
    try:
        info = js.stream_info(stream)
    except (jsclient.JetStreamAPIError, jsclient.TimeoutError):
        return None
    return info.cluster.leader if info.cluster is not None and info.cluster.leader else None


def test_a_deposed_leader_refuses_an_update_that_the_new_leader_stores(caplog: pytest.LogCaptureFixture) -> None:
    """Seen by the nemesis (seed 20250142): kv.update answered "wrong last sequence" [refused], and stored.

    nats-server's leader of a stream keeps answering for about 10 s after it lost its quorum, while its
    followers elect a new leader after 4 to 9 s.  Here the KV leader L is cut off; an update through L
    times out and stays "in process" there; the others elect N.  Then the routes pass from L to N only (an
    asymmetric partition, the link's doing: a real healing partition opens both ways within milliseconds of
    each other, and the window is that short): an update with the right revision, sent through L, is
    refused at once by L (10164, the key in process) and stored by N, whose ack waits in the link.  Healed,
    that ack arrives after the refusal: the client counts it as a late reply and logs it at DEBUG.
    Before the fix the refusal said REFUSED, a promise that the update was not applied."""
    caplog.set_level(logging.DEBUG, logger="jsclient")
    with LinkedCluster(3, name="dep", frames=True) as cluster, jsclient.connect(cluster.urls[0]) as admin:
        js = admin.jetstream(timeout=5)
        deadline = time.monotonic() + 30
        while True:
            try:
                kv = js.create_key_value(bucket="DEP", replicas=3)
                first = kv.put("k", b"v0")  # the bucket has a leader and a quorum
                break
            except (jsclient.JetStreamAPIError, jsclient.TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail("no stream leader in 30 s")
                time.sleep(0.3)
        old = _leader(js, "KV_DEP")
        if old is None:
            pytest.fail("KV_DEP has no leader")
        lead = cluster.index(old)
        others = [i for i in range(3) if i != lead]
        with jsclient.connect(cluster.urls[lead]) as on_leader, jsclient.connect(cluster.urls[others[0]]) as elsewhere:
            stale = on_leader.jetstream(timeout=2).key_value("DEP")
            fresh_js = elsewhere.jetstream(timeout=1)
            stale.get("k")  # the client's reply inbox is known to every server before the cut
            cluster.isolate(lead)
            try:
                with pytest.raises(jsclient.TimeoutError):
                    stale.update("k", b"lost", last=first)  # proposed by L, never committed: "in process" there
                until = time.monotonic() + 20
                new = None
                while new is None or new == old:
                    if time.monotonic() > until:
                        pytest.fail("the majority elected no new leader in 20 s")
                    new = _leader(fresh_js, "KV_DEP")
                if _leader(on_leader.jetstream(timeout=1), "KV_DEP") != old:
                    pytest.skip("the old leader stepped down before the case could be set up")  # not seen so far
                cluster.withhold_raft(cluster.index(new), lead)  # L hears N's interest, not its term
                until = time.monotonic() + 20
                while (new, "$KV.DEP.>") not in cluster.route_interest(lead):
                    if time.monotonic() > until:
                        pytest.fail(f"{old} never heard that {new} stores $KV.DEP.>")
                    time.sleep(0.05)
                late_before = on_leader.stats()["late_replies"]
                with pytest.raises(jsclient.KeyWrongRevisionError) as refused:
                    stale.update("k", b"applied", last=first)  # the right revision: N stores it
            finally:
                cluster.heal()
            fresh = elsewhere.jetstream(timeout=5).key_value("DEP")
            until = time.monotonic() + 20
            while (entry := fresh.get("k")).value != b"applied" and time.monotonic() < until:
                time.sleep(0.1)
            assert entry.value == b"applied", (refused.value, entry)  # the "refused" update is stored
            until = time.monotonic() + 20
            while on_leader.stats()["late_replies"] == late_before and time.monotonic() < until:
                time.sleep(0.05)
            assert on_leader.stats()["late_replies"] > late_before  # N's ack came after L's refusal
            acks = [r.getMessage() for r in caplog.records if "already ended" in r.getMessage()]
            assert any(f'"seq":{entry.revision}' in line for line in acks), acks  # ... and it is the ack of it
        assert refused.value.err_code == 10164
        assert refused.value.outcome is jsclient.RequestOutcome.UNKNOWN
