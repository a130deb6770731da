"""Library defects the nemesis found, each reproduced on its own, deterministically (each fails without its fix)."""

from __future__ import annotations

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
