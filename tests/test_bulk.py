"""Bulk reads: BulkReader against a real nats-server (its parser entry: tests/test_protocol_entries.py)."""

from __future__ import annotations

import threading

import pytest

import jsclient
from jsclient.jetstream.bulk import BulkReader, Cut
from jsclient.jetstream.direct import StoredMessage
from jsclient.message import Msg
from jsclient.options import Options
from jsclient.server import NatsServer


@pytest.fixture
def filled(js: jsclient.JetStream) -> jsclient.JetStream:
    js.add_stream(name="BULK", subjects=["bulk.>"], allow_direct=True)
    for i in range(5000):
        js.publish_async(f"bulk.{i % 3}", b"%d" % i, headers={"I": str(i)} if i % 100 == 0 else None)
    js.publish_async_completed(timeout=30)
    return js


def read_all(reader: BulkReader, subject: str, first: int, last: int, **kw: int) -> list[StoredMessage]:
    out = []
    options = {"batch": 700, "max_bytes": 1 << 20, **kw}
    for headers, payloads in reader.read("BULK", subject, first, last, timeout=10, **options):
        out.extend(StoredMessage(Msg.make("", p, header=h)) for h, p in zip(headers, payloads, strict=True))
    return [m for m in out if m.seq <= last]


def test_ranges_filters_and_batches_cut_by_max_bytes(server: NatsServer, filled: jsclient.JetStream) -> None:
    reader = BulkReader(Options.build([server.url]))
    try:
        assert [m.seq for m in read_all(reader, ">", 1, 5000)] == list(range(1, 5001))
        assert [m.seq for m in read_all(reader, ">", 1, 5000, max_bytes=2000)] == list(range(1, 5001))
        odd = read_all(reader, "bulk.1", 10, 4000)
        assert [m.seq for m in odd] == [s for s in range(10, 4001) if (s - 1) % 3 == 1]
        assert read_all(reader, ">", 4990, 9000)[-1].seq == 5000
        assert read_all(reader, ">", 6000, 9000) == []  # past the end: the server's 404 ends it
        assert read_all(reader, ">", 3, 2) == []
        first = read_all(reader, ">", 101, 101)[0]
        assert (first.subject, first.data, first.headers["I"]) == ("bulk.1", b"100", "100")
    finally:
        reader.close()


def test_readers_on_one_server_get_only_their_own_replies(server: NatsServer, filled: jsclient.JetStream) -> None:
    results: dict[int, list[int]] = {}

    def read(n: int) -> None:
        reader = BulkReader(Options.build([server.url]))
        try:
            results[n] = [m.seq for m in read_all(reader, ">", 1 + n * 1000, 2000 + n * 1000)]
        finally:
            reader.close()

    threads = [threading.Thread(target=read, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {n: list(range(1 + n * 1000, 2001 + n * 1000)) for n in range(3)}


def test_faults_close_the_link_and_the_next_read_opens_another(server: NatsServer, filled: jsclient.JetStream) -> None:
    reader = BulkReader(Options.build([server.url]))
    try:
        with pytest.raises(jsclient.NoRespondersError):
            list(reader.read("MISSING", ">", 1, 10, batch=10, max_bytes=1 << 20, timeout=5))
        assert [m.seq for m in read_all(reader, ">", 1, 10)] == list(range(1, 11))
        partial = reader.read("BULK", ">", 1, 5000, batch=100, max_bytes=1 << 20, timeout=5)
        next(partial)
        partial.close()  # abandoned between requests: one request may still be answering on that link
        assert [m.seq for m in read_all(reader, ">", 1, 300)] == list(range(1, 301))
        server.restart()
        assert [m.seq for m in read_all(reader, ">", 4000, 4100)] == list(range(4000, 4101))
    finally:
        reader.close()


# -- pulls from a consumer ------------------------------------------------------------


def pull_all(
    reader: BulkReader, consumer: str, last: int, runs: bool = False, **kw: int
) -> list[tuple[bytes, bytes, bytes]]:
    """Every message pulled, as (line less its operation and sizes, header block, payload); with ``runs``, through
    :meth:`BulkReader.pull_runs` and the Spark source's cutter (its runs' lines made again, the sid being 1)."""
    out = []
    options = {"batch": 700, "max_bytes": 1 << 20, **kw}
    if not runs:
        for args, headers, payloads in reader.pull("BULK", consumer, last, timeout=10, **options):
            out.extend(zip(args, headers, payloads, strict=True))
        return out
    pytest.importorskip("pyarrow")
    from jsclient.spark.arrow import PulledRun, cut_deliveries

    for parts in reader.pull_runs("BULK", consumer, last, timeout=10, cut=cut_deliveries, **options):
        for part in parts:
            if isinstance(part, Cut):
                out.extend(zip(part.args, part.headers, part.payloads, strict=True))
            else:
                assert isinstance(part, PulledRun)
                out.extend((b"%s 1 %s" % (s, r), b"", p) for s, r, p in zip(
                    part.subjects.to_pylist(), part.replies.to_pylist(), part.payloads.to_pylist(), strict=True))
    return out


def sequences(rows: list[tuple[bytes, bytes, bytes]]) -> list[int]:
    return [jsclient.jetstream.metadata.parse_metadata(a.split()[2].decode()).sequence.stream for a, _, _ in rows]


@pytest.mark.parametrize("runs", [False, True], ids=["parser", "runs"])
def test_pulls_stop_at_the_range_end_or_the_streams(
    server: NatsServer, filled: jsclient.JetStream, runs: bool
) -> None:
    """Pulls from an ack-none consumer: cut by max_bytes, ended by the range's last sequence or by nothing
    pending (the server's 404), the subject and the message's own headers as stored; the same when a cutter
    takes the runs of plain messages and the parser what is left (a message with headers every 100)."""
    js = filled
    reader = BulkReader(Options.build([server.url]))

    def consumer(name: str, start: int, subject: str | None = None) -> str:
        js.add_consumer("BULK", name=name, deliver_policy="by_start_sequence", opt_start_seq=start,
                        ack_policy="none", **({"filter_subject": subject} if subject else {}))
        return name

    try:
        # A few dozen messages a pull; some pulls fill the 2000 bytes exactly, which the server ends without a
        # status (this read hung until the reader counted the bytes as the server does).
        rows = pull_all(reader, consumer("all", 1), 5000, runs, max_bytes=2000)
        assert sequences(rows) == list(range(1, 5001))
        subject, _, reply = rows[100][0].split()
        assert (subject, rows[100][1], rows[100][2]) == (b"bulk.1", b"NATS/1.0\r\nI: 100\r\n\r\n", b"100")
        assert rows[101][1] == b"" and reply.startswith(b"$JS.ACK.BULK.all.")
        part = pull_all(reader, consumer("part", 10, "bulk.1"), 4000, runs)
        got = [s for s in sequences(part) if s <= 4000]
        assert got == [s for s in range(10, 4001) if (s - 1) % 3 == 1]
        assert sequences(pull_all(reader, consumer("tail", 4990), 9000, runs))[-1] == 5000
        assert pull_all(reader, consumer("none", 6000), 9000, runs) == []  # nothing to deliver: 404 at once
    finally:
        reader.close()


@pytest.mark.parametrize("runs", [False, True], ids=["parser", "runs"])
def test_a_message_larger_than_a_pulls_max_bytes_is_named_not_pulled_forever(
    server: NatsServer, filled: jsclient.JetStream, runs: bool
) -> None:
    filled.add_consumer("BULK", name="big", ack_policy="none")
    reader = BulkReader(Options.build([server.url]))
    try:
        with pytest.raises(jsclient.JetStreamStatusError, match="Message Size Exceeds MaxBytes") as caught:
            pull_all(reader, "big", 5000, runs, max_bytes=10)
        assert caught.value.code == 409
        assert sequences(pull_all(reader, "big", 3, runs, batch=3)) == [1, 2, 3]  # the next read opens another link
    finally:
        reader.close()


def test_pulled_runs_end_where_a_payload_holds_crlf_and_the_parser_takes_the_rest(
    server: NatsServer, js: jsclient.JetStream
) -> None:
    """Payloads with CRLF (which end the cutter's run), empty ones and some of 900 KB (a pull's bytes cut in
    several pieces, a frame begun in one and ended in the next): pull_runs reads what pull reads."""
    js.add_stream(name="BULK", subjects=["bulk.>"])
    for i in range(3000):
        payload = b"a\r\nb%d" % i if i % 7 == 0 else b"" if i % 11 == 0 else b"x" * (900_000 if i % 500 == 1 else 50)
        js.publish_async(f"bulk.{i % 5}", payload)
    js.publish_async_completed(timeout=30)
    reader = BulkReader(Options.build([server.url]))
    try:
        got = {}
        for runs in (False, True):
            js.add_consumer("BULK", name=f"c{runs:d}", ack_policy="none")
            got[runs] = pull_all(reader, f"c{runs:d}", 3000, runs, max_bytes=4 << 20)
        assert len(got[True]) == 3000 and [m[1:] for m in got[True]] == [m[1:] for m in got[False]]
        assert sequences(got[True]) == list(range(1, 3001))
    finally:
        reader.close()


@pytest.mark.compat
@pytest.mark.needs_server("2.11")  # multi-subject direct gets
def test_last_values_read_each_subject_once_across_groups_and_cut_requests(
    server: NatsServer, js: jsclient.JetStream
) -> None:
    """2,500 subjects (three requests of at most 1,024), each request cut short by max_bytes many times and
    continued at its point in time; with up_to, the values as they were then."""
    js.add_stream(name="LAST", subjects=["last.>"], allow_direct=True)
    for i in range(2500):
        js.publish_async(f"last.{i}", b"first-%d" % i)
    js.publish_async_completed(timeout=30)
    middle = js.stream_info("LAST").state.last_seq
    for i in range(0, 2500, 3):
        js.publish_async(f"last.{i}", b"second-%d-" % i + b"x" * 300)
    js.publish_async_completed(timeout=30)
    subjects = [f"last.{i}" for i in range(2500)] + ["last.none"]  # a subject with no message is left out
    reader = BulkReader(Options.build([server.url]))
    try:
        for up_to, expect in (
            (None, {f"last.{i}": (b"second-%d-" % i + b"x" * 300) if i % 3 == 0 else b"first-%d" % i
                    for i in range(2500)}),
            (middle, {f"last.{i}": b"first-%d" % i for i in range(2500)}),
        ):
            got: list[StoredMessage] = []
            requests = 0
            for headers, payloads in reader.last_values("LAST", subjects, up_to=up_to, max_bytes=5_000, timeout=10):
                requests += 1
                got.extend(StoredMessage(Msg.make("", p, header=h)) for h, p in zip(headers, payloads, strict=True))
            assert len(got) == 2500 and {m.subject: m.data for m in got} == expect
            assert requests > 3  # cut short by max_bytes and continued, not one request per group
    finally:
        reader.close()


@pytest.mark.compat
@pytest.mark.needs_server("2.11")
def test_last_values_continue_a_request_cut_one_message_short(server: NatsServer, js: jsclient.JetStream) -> None:
    """Ten messages of 100 bytes as the server counts them, max_bytes 900: the request ends with one to go,
    which a 2.11 server's end counts as none left; the read must ask again and get it."""
    js.add_stream(name="SHORT", subjects=["short.>"], allow_direct=True)
    for i in range(10):
        js.publish(f"short.{i}", b"x" * (100 - len(f"short.{i}")))
    reader = BulkReader(Options.build([server.url]))
    try:
        got = [h for headers, _ in reader.last_values(
            "SHORT", [f"short.{i}" for i in range(10)], up_to=None, max_bytes=900, timeout=10
        ) for h in headers]
        assert len(got) == 10
    finally:
        reader.close()


@pytest.mark.parametrize("runs", [False, True], ids=["parser", "runs"])
def test_a_pull_nobody_takes_yet_is_asked_again_until_the_consumer_answers(
    server: NatsServer, filled: jsclient.JetStream, runs: bool
) -> None:
    """A Spark task makes its consumer through one server and pulls through another: on a loaded cluster the pull
    met no responders (503) before the consumer's interest reached that server, and the read failed.  Here the
    consumer is made a moment after the pull began, which a single server shows the same way."""
    reader = BulkReader(Options.build([server.url]))
    late = f"late-{'runs' if runs else 'parser'}"  # a name of its own: the stream outlives the test
    made = threading.Timer(0.3, lambda: filled.add_consumer("BULK", name=late, ack_policy="none"))
    made.start()
    try:
        assert sequences(pull_all(reader, late, 50, runs, batch=50))[:50] == list(range(1, 51))
    finally:
        made.join()
        reader.close()
    nobody = BulkReader(Options.build([server.url]))
    try:  # a consumer that never comes: the 503 is the error, by the timeout
        with pytest.raises(jsclient.NoRespondersStatusError):
            list(nobody.pull("BULK", "never", 5, batch=5, max_bytes=1 << 20, timeout=0.5))
    finally:
        nobody.close()
