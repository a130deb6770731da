"""js.publish retries "no responders" by itself (a leader election looks like that), then says no stream answered.

The proxy only watches what the client sends (a real server, nothing rewritten): the test counts the
attempts on the wire, so no resubmission by the test can stand in for the library's own.
"""

from __future__ import annotations

import re

import pytest

import jsclient
from jsclient.backoff import Backoff
from jsclient.jetstream import publisher
from jsclient.server import NatsServer

from .proxy import FrameProxy


def test_publish_asks_again_on_no_responders_then_raises(server: NatsServer) -> None:
    sent = bytearray()

    def watch(chunk: bytes) -> bytes:
        sent.extend(chunk)
        return chunk

    with FrameProxy(server.host_port, upstream_filter=watch) as proxy:
        nc = jsclient.connect(proxy.url)
        try:
            js = nc.jetstream()
            with pytest.raises(jsclient.NoStreamResponseError):
                js.publish("nostream.x", b"1", timeout=5)
            nc.flush()
            # The first send, then "a few times" (the docs' words): PUBLISH_RETRY's four, written here
            # rather than read from the policy, so a policy that stopped asking again fails this test.
            assert sent.count(b"PUB nostream.x ") == 1 + 4
            future = js.publish_async("nostream.y", b"1", retry_on_no_responders=2)
            with pytest.raises(jsclient.NoStreamResponseError):
                future.result(timeout=10)
            nc.flush()  # the connection stays healthy
            assert sent.count(b"PUB nostream.y ") == 1 + 2
        finally:
            nc.close()


def test_publish_retries_share_the_calls_one_timeout(server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tries of a publish nobody answers (every one a 503) stop within its one timeout: counted, not timed.

    A retry policy of many short pauses (40 retries, 0.05 s apart) makes a call that gave every retry the
    whole timeout again run for about 2 s past a 0.52 s timeout, sending 41 times.  Sharing the deadline,
    retry k (k >= 2) starts only after the pauses before it, which a sleep never cuts short, and only before
    the deadline: so no more retries can be made than start within 0.52 s of pauses, however slow the
    machine (a slow one makes fewer).  The test counts the PUBs on the wire (the proxy only watches what
    the client sends) against that bound, which holds with no clock read by the test; the error says how
    many tries were made and that the timeout ended them (or is the last retry's own TimeoutError, when it
    had less time left than its answer took).
    """
    retries = 40
    policy = Backoff(initial=0.05, maximum=0.05, attempts=retries)
    monkeypatch.setattr(publisher, "PUBLISH_RETRY", policy)
    timeout = 0.52
    # Pauses before retry k: none before the first, then delay(1) + ... + delay(k - 1).
    fits = [k for k in range(1, retries + 1) if sum(policy.delay(i) for i in range(1, k)) < timeout]
    most = 1 + len(fits)  # the first try and every retry whose pauses end before the deadline
    assert most == 12
    sent = bytearray()

    def watch(chunk: bytes) -> bytes:
        sent.extend(chunk)
        return chunk

    with FrameProxy(server.host_port, upstream_filter=watch) as proxy:
        nc = jsclient.connect(proxy.url)
        try:
            js = nc.jetstream()
            # The last retry may be given less time than its 503 takes to come back: then it times out.
            with pytest.raises((jsclient.NoStreamResponseError, jsclient.TimeoutError)) as info:
                js.publish("nostream.deadline", b"1", timeout=timeout)
            nc.flush()
            tries = sent.count(b"PUB nostream.deadline ")
            assert 1 <= tries <= most < 1 + retries
            if isinstance(info.value, jsclient.NoStreamResponseError):
                assert f"({tries} tries; no time was left for another within the 0.52 s timeout)" in str(info.value)
                assert info.value.outcome is jsclient.RequestOutcome.NOT_DELIVERED
        finally:
            nc.close()


def test_a_retry_is_given_only_the_time_left(server: NatsServer) -> None:
    """The first try gets a 503; the proxy drops every later one, so the immediate retry waits for its reply.

    Its TimeoutError names the seconds that retry was given: less than the call's timeout, the rest of
    the one deadline (a retry given the whole timeout again would name 1.5 s, and the call would take 3).
    Read from the error, not from a clock.
    """
    seen = [0]

    def drop_later_503s(frame: bytes) -> bytes:
        if frame.startswith(b"HMSG ") and b"NATS/1.0 503" in frame:
            seen[0] += 1
            if seen[0] > 1:
                return b""
        return frame

    with FrameProxy(server.host_port, drop_later_503s) as proxy:
        nc = jsclient.connect(proxy.url)
        try:
            js = nc.jetstream()
            with pytest.raises(jsclient.TimeoutError) as info:
                js.publish("nostream.left", b"1", timeout=1.5)
            given = re.search(r"no response within ([0-9.e-]+) s", str(info.value))
            assert given is not None, str(info.value)
            assert 0 < float(given.group(1)) < 1.5
            assert seen[0] == 2  # the first try's 503 and the retry's, dropped
        finally:
            nc.close()


def test_a_duplicate_of_sequence_0_is_an_id_still_in_process(server: NatsServer) -> None:
    """nats-server before 2.11 answers a publish whose msg id an earlier, not yet stored try holds as a duplicate
    of sequence 0 (tests/nemesis/test_defects.py makes a real 2.10 cluster do it; 2.11 and newer refuse with
    10158).  Here a core responder gives that ack on a real server, since the newest server will not: every way
    to publish raises MsgIdInProcessError (UNKNOWN), never an ack saying it is stored; sequence 1 is an ack."""
    acks = {"held.x": b'{"stream":"H","seq":0,"duplicate":true}', "kept.x": b'{"stream":"H","seq":1,"duplicate":true}'}
    with jsclient.connect(server.url) as stream, jsclient.connect(server.url) as nc:
        stream.subscribe("*.x", callback=lambda m: m.respond(acks[m.subject]))
        stream.flush()
        js = nc.jetstream(timeout=5)
        for publish in (
            lambda subject: js.publish(subject, b"1", msg_id="a"),
            lambda subject: js.publish_async(subject, b"1", msg_id="a").result(timeout=5),
        ):
            for _ in range(3):  # the first call of a connection goes the general way, later ones the quick way
                ack = publish("kept.x")
                assert (ack.seq, ack.duplicate) == (1, True)
                with pytest.raises(jsclient.MsgIdInProcessError) as refused:
                    publish("held.x")
                assert refused.value.outcome is jsclient.RequestOutcome.UNKNOWN and refused.value.err_code == 10158
                assert "in process" in str(refused.value)
        assert nc.is_connected
