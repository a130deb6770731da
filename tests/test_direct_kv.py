"""Direct get (ADR-31) and the key-value store, against a real nats-server."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jsclient
from jsclient import errors
from jsclient.jetstream import api
from jsclient.jetstream.direct import StoredMessage, delivery_head, fixed_delivery, fixed_tail, parse_timestamp
from jsclient.message import Msg
from jsclient.protocol import REPEAT_MAX, REPLY_LINE, Parser
from jsclient.server import NatsServer

from .conftest import server_release
from .proxy import FrameProxy

pytestmark = pytest.mark.compat  # in the subset make test runs on every older server


@pytest.fixture
def stream(js: jsclient.JetStream) -> list[tuple[str, bytes]]:
    """KV-like contents: seq 1..5 are k0..k4, then seq 6 and 7 update k0 and k1."""
    js.add_stream(name="D", subjects=["d.>"], allow_direct=True)
    contents = [(f"d.k{i}", b"v%d" % i) for i in range(5)] + [("d.k0", b"v0-new"), ("d.k1", b"v1-new")]
    for subject, data in contents:
        js.publish(subject, data, headers={"Src": subject})
    return contents


def test_direct_get_single_forms(js: jsclient.JetStream, stream: list[tuple[str, bytes]]) -> None:
    by_seq = js.direct_get("D", 3)
    assert (by_seq.seq, by_seq.subject, by_seq.data, by_seq.stream) == (3, "d.k2", b"v2", "D")
    assert dict(by_seq.headers) == {"Src": "d.k2"}  # Nats-* delivery headers are fields, not headers
    assert by_seq.time.tzinfo is not None and by_seq.num_pending is None
    assert js.direct_get("D", last_by_subj="d.k0").seq == 6
    assert js.direct_get("D", next_by_subj="d.k1").seq == 2
    assert js.direct_get("D", 3, next_by_subj="d.k1").seq == 7


@pytest.mark.needs_server("2.11")
def test_direct_get_by_start_time(js: jsclient.JetStream, stream: list[tuple[str, bytes]]) -> None:
    """A 2.10 server ignores start_time beside next_by_subj (the wrong message): refused there before sending."""
    future = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    past = js.direct_get("D", 3).time - dt.timedelta(seconds=60)
    assert js.direct_get("D", start_time=past).seq == 1
    assert js.direct_get("D", next_by_subj="d.k1", start_time=past).seq == 2
    with pytest.raises(errors.MessageNotFoundError):
        js.direct_get("D", start_time=future)


def test_direct_get_last_by_subject_reads_as_the_general_reading_does(
    nc: jsclient.Connection, js: jsclient.JetStream, stream: list[tuple[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last_by_subj hot path (sequence and time read after the block the cache knows) gives what a get by
    sequence, read line by line, gives; a message with headers of its own, or none at all, takes the long way."""
    js.publish("d.plain", b"no headers")
    known = []
    real = StoredMessage.known.__func__  # type: ignore[attr-defined]

    def spy(cls: type[StoredMessage], *args: Any) -> StoredMessage:
        known.append(args)
        return real(cls, *args)  # type: ignore[no-any-return]

    monkeypatch.setattr(StoredMessage, "known", classmethod(spy))
    fields = ("stream", "subject", "seq", "time", "data", "num_pending")
    for _ in range(2):  # the first call checks and remembers, the second takes the cached subject
        fast = js.direct_get("D", last_by_subj="d.plain", timeout=3)
        general = js.direct_get("D", fast.seq)
        assert [getattr(fast, f) for f in fields] == [getattr(general, f) for f in fields]
        assert len(fast.headers) == 0 and fast.get_header("Src") is None
    assert len(known) == 2 and known[0][:4] == (b"no headers", "D", "d.plain", 8)
    with_headers = js.direct_get("D", last_by_subj="d.k0")
    assert len(known) == 2  # the user's header: read line by line
    assert (with_headers.seq, with_headers.get_header("Src"), with_headers.data) == (6, "d.k0", b"v0-new")
    with pytest.raises(errors.MessageNotFoundError):
        js.direct_get("D", last_by_subj="d.nothing")
    before = nc.stats()["out_msgs"]
    for bad in (-1.0, "1", float("nan")):
        with pytest.raises(jsclient.InvalidArgumentError, match="timeout"):
            js.direct_get("D", last_by_subj="d.plain", timeout=bad)  # type: ignore[arg-type]
    assert nc.stats()["out_msgs"] == before and nc.is_connected


def test_direct_get_errors(nc: jsclient.Connection, js: jsclient.JetStream, stream: list[tuple[str, bytes]]) -> None:
    with pytest.raises(errors.MessageNotFoundError):
        js.direct_get("D", 99)
    with pytest.raises(errors.MessageNotFoundError):
        js.direct_get("D", last_by_subj="d.nothing")
    # The subject-appended form with a payload is a bad request (408), straight from the server.
    reply = nc.request("$JS.API.DIRECT.GET.D.d.k0", b'{"seq":1}', timeout=5)
    assert reply.status == 408
    js.add_stream(name="NODIRECT", subjects=["nodirect"])
    start = time.monotonic()
    with pytest.raises(errors.DirectGetDisabledError, match="allow_direct"):
        js.direct_get("NODIRECT", 1)
    assert time.monotonic() - start < 2  # an answer, not a wait for a timeout
    with pytest.raises(errors.StreamNotFoundError):
        js.direct_get("MISSING", 1)
    with pytest.raises(jsclient.InvalidArgumentError):
        js.direct_get("D")
    with pytest.raises(jsclient.InvalidArgumentError):
        js.direct_get("D", 1, last_by_subj="d.k0")


def test_batch_from_the_middle_ends_at_eob(js: jsclient.JetStream, stream: list[tuple[str, bytes]]) -> None:
    batch = js.direct_get_batch("D", "d.>", max_messages=3, seq=3)
    got = [m.seq for m in batch]
    assert got == [3, 4, 5]
    # A 2.10 server cannot count what is left (its batches are read one get at a time).
    assert batch.num_pending == (2 if server_release() >= (2, 11) else None) and batch.last_sequence == 5
    rest = js.direct_get_batch("D", "d.>", max_messages=10, seq=6)
    assert [m.seq for m in rest] == [6, 7] and rest.num_pending == 0
    filtered = js.direct_get_batch("D", "d.k1", max_messages=10)
    assert [m.data for m in filtered] == [b"v1", b"v1-new"]
    assert list(js.direct_get_batch("D", "d.none", max_messages=5)) == []


def test_batch_max_bytes(js: jsclient.JetStream) -> None:
    js.add_stream(name="BYTES", subjects=["b"], allow_direct=True)
    for _ in range(10):
        js.publish("b", b"x" * 1000)
    got = list(js.direct_get_batch("BYTES", "b", max_messages=10, max_bytes=3500))
    assert 1 <= len(got) < 10


@pytest.mark.needs_server("2.11")
def test_multi_last_up_to_seq_and_continuation(js: jsclient.JetStream, stream: list[tuple[str, bytes]]) -> None:
    now = {m.subject: m.data for m in js.direct_get_last_for_subjects("D", ["d.>"])}
    assert now == {"d.k0": b"v0-new", "d.k1": b"v1-new", "d.k2": b"v2", "d.k3": b"v3", "d.k4": b"v4"}
    as_of_5 = {m.subject: m.data for m in js.direct_get_last_for_subjects("D", ["d.>"], up_to_seq=5)}
    assert as_of_5 == {f"d.k{i}": b"v%d" % i for i in range(5)}
    # Small batches: continued across EOBs, pinned to the first batch's point in time.
    reader = js.direct_get_last_for_subjects("D", ["d.k0", "d.k1", "d.k2", "d.k3"], max_messages=1)
    first = next(iter_ := iter(reader))
    js.publish("d.k3", b"v3-too-late")  # after the read began: must not appear
    got = [first, *iter_]
    assert {m.subject: m.data for m in got} == {"d.k0": b"v0-new", "d.k1": b"v1-new", "d.k2": b"v2", "d.k3": b"v3"}
    assert reader.up_to_sequence == 7
    # Three at a time: after the first three a 2.11 server's end of batch says 0 left (one is).
    threes = js.direct_get_last_for_subjects("D", ["d.k0", "d.k1", "d.k2", "d.k3"], max_messages=3, up_to_seq=7)
    assert [(m.subject, m.seq) for m in threes] == [("d.k2", 3), ("d.k3", 4), ("d.k0", 6), ("d.k1", 7)]


@pytest.mark.needs_server("2.11")
def test_more_than_1024_subjects_is_413(js: jsclient.JetStream) -> None:
    js.add_stream(name="MANY", subjects=["many.>"], allow_direct=True)
    for i in range(1100):
        js.publish_async(f"many.{i}", b"")
    js.publish_async_completed(timeout=30)
    with pytest.raises(errors.TooManySubjectsError):
        list(js.direct_get_last_for_subjects("MANY", ["many.>"]))


def _frames_rewritten(rewrite: Callable[[bytes, bytes, bytes], bytes | None]) -> Callable[[bytes], bytes]:
    """A proxy filter that hands every HMSG with Nats-Num-Pending to ``rewrite(control line, header, payload)``."""

    def filter_frame(frame: bytes) -> bytes:
        if frame.startswith(b"HMSG") and b"Nats-Num-Pending" in frame:
            head, _, rest = frame.partition(b"\r\n")
            parts = head.split()
            hlen, total = int(parts[-2]), int(parts[-1])
            changed = rewrite(head, rest[:hlen], rest[hlen:total])
            if changed is not None:
                header, payload = changed[: changed.index(b"\r\n\r\n") + 4], changed[changed.index(b"\r\n\r\n") + 4:]
                parts[-2], parts[-1] = b"%d" % len(header), b"%d" % (len(header) + len(payload))
                return b" ".join(parts) + b"\r\n" + header + payload + b"\r\n"
        return frame

    return filter_frame


def _without_pending(head: bytes, header: bytes, payload: bytes) -> bytes:
    """As a pre-2.11 replica answers a batch: the message alone, without Nats-Num-Pending."""
    return b"\r\n".join(ln for ln in header.split(b"\r\n") if not ln.startswith(b"Nats-Num-Pending")) + payload


def _empty_request(head: bytes, header: bytes, payload: bytes) -> bytes:
    """As a pre-2.11 replica answers a multi-subject get."""
    return b"NATS/1.0 408 Empty Request\r\n\r\n"


def test_an_older_replica_is_detected_and_the_batch_read_to_its_end(server: NatsServer) -> None:
    """ADR-31: a reply without Nats-Num-Pending comes from a server before 2.11, which sends that one message
    alone (a proxy strips the header: a newer server behind the connected one cannot be asked for that).  The
    rest is read one get at a time, within the batch's limits: never a short answer."""
    with FrameProxy(server.host_port, _frames_rewritten(_without_pending)) as proxy, jsclient.connect(proxy.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="OLD", subjects=["old"], allow_direct=True)
        for i in range(5):
            js.publish("old", b"%d" % i)
        everything = js.direct_get_batch("OLD", "old", max_messages=10)
        assert [m.data for m in everything] == [b"0", b"1", b"2", b"3", b"4"] and everything.num_pending == 0
        three = js.direct_get_batch("OLD", "old", max_messages=3, seq=2)
        assert [m.seq for m in three] == [2, 3, 4] and three.last_sequence == 4
        js.delete_stream("OLD")


def test_a_multi_subject_get_an_older_replica_cannot_read_is_refused(server: NatsServer) -> None:
    """Its 408 Empty Request becomes FeatureNotSupportedError naming the feature (a proxy plays the replica;
    a 2.10 server under test is refused by the client before sending)."""
    with FrameProxy(server.host_port, _frames_rewritten(_empty_request)) as proxy, jsclient.connect(proxy.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="OLDM", subjects=["oldm.>"], allow_direct=True)
        js.publish("oldm.a", b"1")
        refused = r"multi-subject direct get needs nats-server 2\.11"
        with pytest.raises(jsclient.FeatureNotSupportedError, match=refused):
            list(js.direct_get_last_for_subjects("OLDM", ["oldm.>"]))
        assert js.direct_get("OLDM", last_by_subj="oldm.a").data == b"1"
        js.delete_stream("OLDM")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-21T20:13:00.820235495Z", dt.datetime(2026, 11, 21, 20, 13, 0, 820235, tzinfo=dt.UTC)),
        ("2022-08-06 00:29:27.587861324 +0000 UTC", dt.datetime(2022, 8, 6, 0, 29, 27, 587861, tzinfo=dt.UTC)),
        ("2024-01-01T00:00:00Z", dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
        ("2024-01-01T00:00:00.5Z", dt.datetime(2024, 1, 1, 0, 0, 0, 500000, tzinfo=dt.UTC)),
        ("2024-01-01T01:00:00.25+01:00", dt.datetime(2024, 1, 1, 0, 0, 0, 250000, tzinfo=dt.UTC)),
    ],
)
def test_timestamp_forms(text: str, expected: dt.datetime) -> None:
    assert parse_timestamp(text) == expected


@settings(max_examples=300, deadline=None)
@given(
    stream=st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True),
    subject=st.one_of(
        st.from_regex(r"[a-z$]{1,6}(\.[a-z0-9]{1,6}){0,3}", fullmatch=True).map(str.encode),
        st.just(b"bad.\xff\xfe"),  # not UTF-8: the general reading replaces it
    ),
    seq=st.integers(min_value=1, max_value=2**63),
    stamp=st.sampled_from(["2026-11-21T20:13:00.820235495Z", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00.5Z"]),
)
def test_stored_message_reads_the_server_layout_as_the_general_reading_does(
    stream: str, subject: bytes, seq: int, stamp: str
) -> None:
    """The one-match reading of a header-less message's reply gives the fields the line-by-line reading gives.

    The second block carries a user header, so it can only be read line by line.
    """
    block = b"NATS/1.0\r\nNats-Stream: %s\r\nNats-Subject: %s\r\nNats-Sequence: %d\r\nNats-Time-Stamp: %s\r\n" % (
        stream.encode(), subject, seq, stamp.encode()
    )
    plain = StoredMessage(Msg.make("_INBOX.x", b"v", header=block + b"\r\n"))
    general = StoredMessage(Msg.make("_INBOX.x", b"v", header=block + b"Mine: 1\r\n\r\n"))
    assert (fixed_delivery(block + b"\r\n") is None) == (b"\xff" in subject)
    assert fixed_delivery(block + b"Mine: 1\r\n\r\n") is None
    fields = ("stream", "subject", "seq", "time", "data", "num_pending")
    assert [getattr(plain, f) for f in fields] == [getattr(general, f) for f in fields]
    assert plain.subject == subject.decode("utf-8", "replace") and plain.seq == seq
    assert len(plain.headers) == 0 and general.get_header("Mine") == "1"
    # kv.get's reading, the stream and subject known: the same sequence and time, or None where the block
    # is another stream's or subject's, or not that layout.
    if b"\xff" not in subject:
        head = delivery_head(stream, subject.decode())
        assert fixed_tail(block + b"\r\n", head) == (seq, parse_timestamp(stamp)) == (plain.seq, plain.time)
        assert fixed_tail(block + b"Mine: 1\r\n\r\n", head) is None
        assert fixed_tail(block + b"\r\n", delivery_head(stream + "X", subject.decode())) is None
        assert fixed_tail(block + b"\r\n", delivery_head(stream, subject.decode() + ".x")) is None


# -- key-value --------------------------------------------------------------------------


@pytest.fixture
def kv(js: jsclient.JetStream) -> jsclient.KeyValue:
    return js.create_key_value("cfg", history=10)


def raw_reply(server: NatsServer, subject: str, payload: bytes = b"") -> bytes:
    """The frame the server writes in answer to one request, read off a bare socket (reply subject
    ``_INBOX.t.1``, sid 1): what a caller reading its own reply gets from recv() (the server answers
    a JetStream request on a thread of its own: the reply is read whole, by its sizes)."""
    host, _, port = server.url.split("//", 1)[-1].rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.recv(65536)  # INFO
        sock.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _INBOX.t.* 1\r\nPING\r\n')
        data = b""
        while b"PONG\r\n" not in data:
            data += sock.recv(65536)
        sock.sendall(b"PUB %s _INBOX.t.1 %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))
        data = b""
        while b"\r\n" not in data or len(data) < data.index(b"\r\n") + int(data.split(b"\r\n")[0].split()[-1]) + 4:
            data += sock.recv(65536)
    return data


def test_each_reply_shape_matches_what_the_server_writes(server: NatsServer, js: jsclient.JetStream) -> None:
    """kv.get, direct_get(last_by_subj=...) and js.publish read their own replies in one match of a shape:
    on the frames this server really writes, each shape matches and reads what the API returns, and a reply
    of any other form (a delete marker, a user header, a 404, an error) is left to the general reading."""
    kv = js.create_key_value("shapes", history=3)
    kv.put("k", b"value")
    entry = kv.get("k")
    shape = kv._last_requests["k"].shape
    line = shape.line + REPLY_LINE % (b"_INBOX.t.", 1, 1)
    request = kv._last_requests["k"].request
    groups = Parser().feed_shaped(raw_reply(server, request), line, shape)
    assert groups is not None and shape.read(groups) == entry and shape.read(groups).value == b"value"
    assert entry.created is not None and entry.created.tzinfo is not None
    # The shape's values run to the next CR: a stray LF in the stream's name or the stamp still matches,
    # and is never read as an entry (the general reading decides).
    frame = raw_reply(server, request)
    stamp_at = frame.index(b"Nats-Time-Stamp: ") + len(b"Nats-Time-Stamp: ")
    for at in (frame.index(b"KV_shapes") + 2, stamp_at + 4):
        bent = frame[:at] + b"\n" + frame[at + 1 :]
        got = Parser().feed_shaped(bent, line, shape)
        assert got is not None and shape.read(got) is None
    kv.delete("k")  # a marker with a KV-Operation header: the block is another
    assert Parser().feed_shaped(raw_reply(server, request), line, shape) is None
    with pytest.raises(errors.KeyDeletedError):
        kv.get("k")
    # direct get of the last message on a subject
    js.add_stream(name="S", subjects=["s.>"], allow_direct=True)
    js.publish("s.plain", b"p")
    js.publish("s.mine", b"m", headers={"Mine": "1"})
    stored = js.direct_get("S", last_by_subj="s.plain")
    shape2 = js.last_requests[("S", "s.plain")].shape
    got = Parser().feed_shaped(raw_reply(server, "$JS.API.DIRECT.GET.S.s.plain"), line, shape2)
    assert got is not None
    read = shape2.read(got)
    assert read is not None and (read.seq, read.data, read.subject, read.time) == (1, b"p", "s.plain", stored.time)
    assert Parser().feed_shaped(raw_reply(server, "$JS.API.DIRECT.GET.S.s.mine"), line, shape2) is None
    assert Parser().feed_shaped(raw_reply(server, "$JS.API.DIRECT.GET.S.s.none"), line, shape2) is None  # 404
    # a publish ack
    pub_ack_reply = js._publisher._ack_shape
    ack = js.publish("s.plain", b"q")
    plain_line = pub_ack_reply.line + REPLY_LINE % (b"_INBOX.t.", 1, 1)
    frame = raw_reply(server, "s.plain", b"r")
    got = Parser().feed_shaped(frame, plain_line, pub_ack_reply)
    assert got is not None and pub_ack_reply.read(got) == api.PubAck(stream="S", seq=ack.seq + 1)
    js.update_stream(name="S", subjects=["s.>"], allow_direct=True, max_msgs_per_subject=1, discard="new",
                     discard_new_per_subject=True)
    refused = raw_reply(server, "s.plain", b"again")  # {"error": ...}: read the general way, and raised there
    groups = Parser().feed_shaped(refused, plain_line, pub_ack_reply)
    assert groups is not None and b'"error"' in groups[1] and pub_ack_reply.read(groups) is None
    with pytest.raises(errors.JetStreamAPIError):
        js.publish("s.plain", b"again")


def _read_own_replies(nc: jsclient.Connection, call: Any) -> None:
    """Repeat ``call`` until the reader thread steps aside: from then on each caller reads its own reply,
    in one match of its shape (white-box: that is the path the tests below are about)."""
    side = nc._session.link.reading
    assert side is not None
    deadline = time.monotonic() + 5
    while not side.parked and time.monotonic() < deadline:
        call()
    assert side.parked
    call()  # read by the caller: the reader stays parked for its next look


def test_a_value_read_again_unchanged_is_one_comparison(nc: jsclient.Connection, kv: jsclient.KeyValue) -> None:
    """kv.get of a key whose value has not changed since its last read gets the same entry back (the frame
    is compared with the last one, not matched); a put makes the next read a new one; a frame over
    REPEAT_MAX is read afresh every time.  A direct get gets a new StoredMessage every time."""
    kv.put("same", b"v1")
    _read_own_replies(nc, lambda: kv.get("same"))
    first = kv.get("same")
    assert kv.get("same") is first and (first.key, first.value) == ("same", b"v1")
    revision = kv.put("same", b"v2")
    newer = kv.get("same")
    assert (newer.value, newer.revision) == (b"v2", revision) and newer.revision > first.revision
    assert kv.get("same") is newer
    big = b"b" * REPEAT_MAX
    kv.put("big", big)
    got = [kv.get("big") for _ in range(3)]
    assert all(entry == got[0] for entry in got) and got[0].value == big and got[1] is not got[0]
    shape = kv._last_requests["big"].shape
    assert shape.repeats and shape.last is None  # matched each time, never kept
    assert kv._last_requests["same"].shape.last is not None
    stored = [kv._js.direct_get("KV_cfg", last_by_subj="$KV.cfg.same") for _ in range(3)]
    assert stored[1] is not stored[2] and (stored[1].seq, stored[1].data) == (stored[2].seq, stored[2].data)
    stored[1].data = b"changed by its caller"
    assert kv._js.direct_get("KV_cfg", last_by_subj="$KV.cfg.same").data == b"v2"


def test_reads_from_many_threads_during_puts_match_each_value_to_its_revision(
    nc: jsclient.Connection, kv: jsclient.KeyValue
) -> None:
    """Shapes and their kept frames are shared by every thread reading a key: under gets from four threads
    while a fifth puts, each entry's value is the one put at its revision."""
    put: dict[int, bytes] = {kv.put("hot", b"0"): b"0"}
    _read_own_replies(nc, lambda: kv.get("hot"))
    seen: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            entry = kv.get("hot")
            seen.append((entry.revision, entry.value))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(1, 200):
        value = b"%d" % i
        put[kv.put("hot", value)] = value
        if i % 20 == 0:
            time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(10)
    wrong = [(revision, value) for revision, value in seen if put.get(revision) != value]
    assert not wrong, wrong[:5]
    assert len({revision for revision, _ in seen}) > 20  # the reads saw the value change many times
    assert kv.get("hot").value == b"199"  # and the last read is of the last put, never a kept older frame


def test_kv_semantics(kv: jsclient.KeyValue) -> None:
    r1 = kv.put("app.name", b"one")
    assert kv.get("app.name").value == b"one" and kv.get("app.name").revision == r1
    with pytest.raises(errors.KeyExistsError):
        kv.create("app.name", b"again")
    r2 = kv.update("app.name", b"two", last=r1)
    with pytest.raises(errors.KeyWrongRevisionError):
        kv.update("app.name", b"stale", last=r1)
    assert kv.get("app.name", revision=r1).value == b"one"
    kv.delete("app.name")
    with pytest.raises(errors.KeyDeletedError):
        kv.get("app.name")
    r4 = kv.create("app.name", b"reborn")  # delete then create succeeds
    assert r4 > r2 and kv.get("app.name").value == b"reborn"
    history = kv.history("app.name")
    assert [(e.value, e.operation) for e in history] == [
        (b"one", "PUT"), (b"two", "PUT"), (b"", "DEL"), (b"reborn", "PUT"),
    ]
    kv.purge("app.name")
    assert [e.operation for e in kv.history("app.name")] == ["PURGE"]  # one marker left
    with pytest.raises(errors.KeyNotFoundError):
        kv.get("never.set")


def test_kv_keys_and_status(kv: jsclient.KeyValue) -> None:
    for key in ("a", "b.x", "b.y"):
        kv.put(key, b"v")
    kv.delete("a")
    assert sorted(kv.keys()) == ["b.x", "b.y"]
    assert sorted(kv.keys("b.*")) == ["b.x", "b.y"]
    status = kv.status()
    assert status.bucket == "cfg" and status.history == 10 and status.values == 4


def test_kv_watch_sees_puts_and_deletes_in_order(kv: jsclient.KeyValue) -> None:
    kv.put("w.1", b"before")
    watcher = kv.watch("w.>")
    first = watcher.next(timeout=5)
    assert first is not None and first.key == "w.1" and first.value == b"before"
    assert watcher.next(timeout=5) is None  # end of initial values
    kv.put("w.2", b"x")
    kv.delete("w.1")
    kv.put("w.2", b"y")
    seen = [watcher.next(timeout=5) for _ in range(3)]
    assert [(e.key, e.operation, e.value) for e in seen if e] == [
        ("w.2", "PUT", b"x"), ("w.1", "DEL", b""), ("w.2", "PUT", b"y"),
    ]
    watcher.stop()


def test_kv_watch_empty_bucket_marker_first(kv: jsclient.KeyValue) -> None:
    with kv.watch(ignore_deletes=True) as watcher:
        assert watcher.next(timeout=5) is None
        kv.put("late", b"1")
        entry = watcher.next(timeout=5)
        assert entry is not None and entry.key == "late"


@pytest.mark.parametrize("key", ["", "has space", "a..b", ".a", "a.", "a*", "a>", "_kvinternal", "ünïcode"])
def test_kv_key_validation(kv: jsclient.KeyValue, key: str) -> None:
    with pytest.raises(jsclient.InvalidArgumentError):
        kv.put(key, b"x")
    for _ in range(2):  # get() remembers checked keys: a refused one is refused again
        with pytest.raises(jsclient.InvalidArgumentError):
            kv.get(key)


@pytest.mark.parametrize(
    "stream, subject", [("D", "d.*"), ("D", "d k"), ("D", 5), ("D", ""), ("a.b", "d.k0"), (None, "d.k0")]
)
def test_direct_get_last_by_subject_refuses_bad_input_every_time(
    nc: jsclient.Connection, js: jsclient.JetStream, stream: object, subject: object
) -> None:
    """The last_by_subj fast path remembers checked (stream, subject) pairs, never refused ones."""
    before = nc.stats()["out_msgs"]
    for _ in range(2):
        with pytest.raises(jsclient.InvalidArgumentError):
            js.direct_get(stream, last_by_subj=subject)  # type: ignore[arg-type]
    assert nc.stats()["out_msgs"] == before  # nothing was sent
    assert nc.is_connected


@pytest.mark.parametrize("bucket", ["", "a.b", "a b", "a*"])
def test_bucket_validation(js: jsclient.JetStream, bucket: str) -> None:
    with pytest.raises(jsclient.InvalidArgumentError):
        js.create_key_value(bucket)


def test_bucket_lookup(js: jsclient.JetStream) -> None:
    with pytest.raises(errors.BucketNotFoundError):
        js.key_value("absent")
    js.create_key_value("present")
    assert js.key_value("present").bucket == "present"
    assert js.delete_key_value("present") is True


def test_kv_interop_with_nats_py(server: NatsServer, js: jsclient.JetStream) -> None:
    import nats

    kv = js.create_key_value("shared", history=5)
    kv.put("from.jsclient", b"hello peer")

    async def peer() -> bytes:
        nc = await nats.connect(server.url)
        pkv = await nc.jetstream().key_value("shared")
        await pkv.put("from.natspy", b"hello jsclient")
        entry = await pkv.get("from.jsclient")
        await nc.close()
        return entry.value

    assert asyncio.run(peer()) == b"hello peer"
    assert kv.get("from.natspy").value == b"hello jsclient"
    assert sorted(kv.keys()) == ["from.jsclient", "from.natspy"]


def test_bucket_made_by_nats_py_is_read_by_jsclient(server: NatsServer, js: jsclient.JetStream) -> None:
    import nats

    async def make() -> None:
        nc = await nats.connect(server.url)
        pjs = nc.jetstream()
        pkv = await pjs.create_key_value(bucket="peerbucket", history=3)
        await pkv.put("k", b"v1")
        await pkv.put("k", b"v2")
        await nc.close()

    asyncio.run(make())
    kv = js.key_value("peerbucket")
    assert kv.get("k").value == b"v2"
    assert [e.value for e in kv.history("k")] == [b"v1", b"v2"]
