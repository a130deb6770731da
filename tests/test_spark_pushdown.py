"""Filter pushdown (Spark 4.1+ ``pushFilters``) of the jetstream source: what the server is asked for.

The pushes themselves are pure functions, checked here without Spark or a
server, against a model of what narrowed options read (a hypothesis
property: the narrowed read followed by the filters handed back keeps
exactly the rows all the filters keep).  Through Spark, against a real
server: a pushed filter gives the rows an unpushed read gives, and the
server sends only about the matching messages, counted by its monitoring
endpoint (``varz`` ``out_msgs``) rather than by the rows that come back.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import logging
import re
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jsclient
import jsclient.spark
from jsclient.server import NatsServer
from jsclient.spark import SparkOptions
from jsclient.spark.arrow import subject_filter_regex
from jsclient.spark.pushdown import (
    covering,
    covers,
    disjoint,
    distinct,
    intersect,
    push_key_filters,
    push_stream_filters,
)

from .conftest import server_release

pyspark_sql = pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")
ds = pytest.importorskip("pyspark.sql.datasource")
from jsclient.spark.source import BatchReader, UnpushedBatchReader, server_filters  # noqa: E402 (needs pyspark)

if not hasattr(ds, "Filter"):  # pragma: no cover - pyspark 4.0 pushes no filters
    pytest.skip("filter pushdown needs pyspark 4.1", allow_module_level=True)

EqualTo, In, StringStartsWith, IsNotNull = ds.EqualTo, ds.In, ds.StringStartsWith, ds.IsNotNull
GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual = (
    ds.GreaterThan, ds.GreaterThanOrEqual, ds.LessThan, ds.LessThanOrEqual,
)
Not, StringEndsWith = ds.Not, ds.StringEndsWith
URL = "nats://127.0.0.1:4222"
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def stream_opts(**fields: Any) -> SparkOptions:
    return SparkOptions(servers=URL, stream="S", **fields)


# -- the subject filter algebra -------------------------------------------------------------------------------

TOKENS = st.sampled_from(["a", "b", "c"])
SUBJECTS = st.lists(TOKENS, min_size=1, max_size=4).map(".".join)
PATTERNS = st.lists(st.sampled_from(["a", "b", "*"]), min_size=1, max_size=3).flatmap(
    lambda head: st.sampled_from([".".join(head), ".".join([*head, ">"])])
) | st.just(">")


def matches(pattern: str, subject: str) -> bool:
    return re.match(subject_filter_regex([pattern]), subject) is not None


@settings(max_examples=300, deadline=None)
@given(a=PATTERNS, b=PATTERNS, subjects=st.lists(SUBJECTS, max_size=30))
def test_intersect_and_covers_agree_with_matching(a: str, b: str, subjects: list[str]) -> None:
    both = intersect(a, b)
    for s in subjects:
        assert (both is not None and matches(both, s)) == (matches(a, s) and matches(b, s)), (a, b, both, s)
        if covers(a, b) and matches(b, s):
            assert matches(a, s), (a, b, s)


@settings(max_examples=300, deadline=None)
@given(filters=st.lists(PATTERNS, min_size=1, max_size=5), subjects=st.lists(SUBJECTS, max_size=30))
def test_distinct_keeps_the_subjects_and_covering_covers_them(filters: list[str], subjects: list[str]) -> None:
    kept, wide = distinct(filters), covering(filters)
    for s in subjects:
        wanted = any(matches(f, s) for f in filters)
        assert any(matches(f, s) for f in kept) == wanted
        assert matches(wide, s) or not wanted
    if disjoint(kept):
        assert not any(matches(f, s) and matches(g, s) for s in subjects for i, f in enumerate(kept)
                       for g in kept[i + 1:])


def test_algebra_examples() -> None:
    assert intersect("a.*.c", "a.b.>") == "a.b.c"
    assert intersect("a.>", "a") is None and intersect("a.b", "a.c") is None
    assert covers("a.>", "a.b.*") and not covers("a.*", "a.b.c") and not covers("a.b", "a.*")
    assert distinct(["a.b", "a.>", "c", "a.>"]) == ("a.>", "c")
    assert not disjoint(["a.*", "*.b"]) and disjoint(["a.b", "a.c"])
    assert covering(["a.b.x", "a.c.x"]) == "a.*.x" and covering(["a.b", "a.b.c"]) == "a.>"
    assert covering(["a.>", "b"]) == ">"


def test_server_filters_read_overlapping_or_many_filters_as_one_covering_them() -> None:
    assert server_filters(stream_opts()) == ((">",), None)
    assert server_filters(stream_opts(subjects=("a.1", "a.2"))) == (("a.1", "a.2"), None)
    assert server_filters(stream_opts(subjects=("a.>", "a.2"))) == (("a.>",), None)
    wide, regex = server_filters(stream_opts(subjects=("a.*", "*.b")))
    assert wide == ("*.*",) and regex is not None and re.match(regex, "a.x") and not re.match(regex, "c.c")
    many = tuple(f"m.{i}" for i in range(101))
    assert server_filters(stream_opts(subjects=many))[0] == ("m.*",)


# -- push_stream_filters: examples ------------------------------------------------------------------------------


def test_subject_filters_become_subject_filters() -> None:
    eq, inn, nn = EqualTo(("subject",), "a.b"), In(("subject",), ["a.c", "a.b", "a.c"]), IsNotNull(("subject",))
    opts, kept = push_stream_filters(stream_opts(), [eq, nn])
    assert opts.subjects == ("a.b",) and kept == []
    opts, kept = push_stream_filters(stream_opts(), [inn])
    assert opts.subjects == ("a.c", "a.b") and kept == []
    whole, part = StringStartsWith(("subject",), "a.b."), StringStartsWith(("subject",), "a.b")
    opts, kept = push_stream_filters(stream_opts(), [whole])
    assert opts.subjects == ("a.b.>",) and kept == []
    opts, kept = push_stream_filters(stream_opts(), [part])
    assert opts.subjects == ("a.>",) and kept[0] is part  # a superset, checked by Spark too
    no_token = StringStartsWith(("subject",), "ab")
    assert push_stream_filters(stream_opts(), [no_token]) == (stream_opts(), [no_token])


def test_subject_filters_intersect_the_subjects_option() -> None:
    opts, kept = push_stream_filters(stream_opts(subjects=("a.*", "b.>")), [In(("subject",), ["a.1", "b.2.3", "c"])])
    assert opts.subjects == ("a.1", "b.2.3") and kept == []
    opts, _ = push_stream_filters(stream_opts(subjects=("a.*",)), [StringStartsWith(("subject",), "a.")])
    assert opts.subjects == ("a.*",)
    opts, kept = push_stream_filters(stream_opts(subjects=("a.*",)), [EqualTo(("subject",), "b.1")])
    assert opts.ending_sequence == 0 and kept == []  # no message can pass: nothing is read


def test_values_that_are_no_subject_stay_with_spark() -> None:
    for value in ("a.*", "a..b", "a b", "", 7, None, "a.>"):
        f = EqualTo(("subject",), value)
        assert push_stream_filters(stream_opts(), [f]) == (stream_opts(), [f]), value
    f = In(("subject",), ["a.1", "a.*"])
    assert push_stream_filters(stream_opts(), [f]) == (stream_opts(), [f])


def test_sequence_ranges_become_starting_and_ending_sequences() -> None:
    gt, le = GreaterThan(("seq",), 10), LessThanOrEqual(("seq",), 20)
    opts, kept = push_stream_filters(stream_opts(starting_sequence=12, ending_sequence=30), [gt, le])
    assert (opts.starting_sequence, opts.ending_sequence, kept) == (12, 20, [])
    opts, kept = push_stream_filters(stream_opts(), [EqualTo(("seq",), 5)])
    assert (opts.starting_sequence, opts.ending_sequence, kept) == (5, 5, [])
    gaps = In(("seq",), [3, 9, 4])
    opts, kept = push_stream_filters(stream_opts(), [gaps])
    assert (opts.starting_sequence, opts.ending_sequence) == (3, 9) and kept[0] is gaps  # a superset
    opts, kept = push_stream_filters(stream_opts(), [GreaterThanOrEqual(("seq",), 10), LessThan(("seq",), 10)])
    assert opts.ending_sequence == 0 and kept == []
    opts, kept = push_stream_filters(stream_opts(), [GreaterThan(("seq",), -5)])
    assert opts.starting_sequence == -4 and kept == []  # every sequence is >= 1


def test_a_sequence_bound_against_a_time_option_stays_with_spark() -> None:
    ge, lt = GreaterThanOrEqual(("seq",), 10), LessThan(("seq",), 20)
    opts, kept = push_stream_filters(stream_opts(starting_time=T0), [ge, lt])
    assert (opts.starting_sequence, opts.starting_time, opts.ending_sequence) == (None, T0, 19)
    assert kept == [ge]


def test_time_ranges_narrow_the_read_and_stay_with_spark() -> None:
    us = dt.timedelta(microseconds=1)
    ge, lt = GreaterThanOrEqual(("timestamp",), T0), LessThan(("timestamp",), T0 + dt.timedelta(seconds=9))
    opts, kept = push_stream_filters(stream_opts(), [ge, lt])
    assert (opts.starting_time, opts.ending_time) == (T0, T0 + dt.timedelta(seconds=9)) and kept == [ge, lt]
    gt, le = GreaterThan(("timestamp",), T0), LessThanOrEqual(("timestamp",), T0)
    opts, _ = push_stream_filters(stream_opts(ending_time=T0 - us), [gt, le])
    assert (opts.starting_time, opts.ending_time) == (T0 + us, T0 - us)
    opts, kept = push_stream_filters(stream_opts(), [ge], times=False)
    assert opts == stream_opts() and kept == [ge]
    seq = GreaterThan(("seq",), 3)
    opts, kept = push_stream_filters(stream_opts(), [ge, seq])
    assert (opts.starting_sequence, opts.starting_time, kept) == (4, None, [ge])  # the options take one start
    naive = GreaterThan(("timestamp",), dt.datetime(2030, 1, 1))
    assert push_stream_filters(stream_opts(), [naive]) == (stream_opts(), [naive])


def test_other_filters_stay_with_spark_by_reference() -> None:
    others = [
        EqualTo(("data",), b"x"), IsNotNull(("headers",)), Not(EqualTo(("subject",), "a")),
        StringEndsWith(("subject",), ".x"), EqualTo(("stream",), "S"), EqualTo(("headers", "k"), "v"),
    ]
    opts, kept = push_stream_filters(stream_opts(), [*others, IsNotNull(("data",))])
    assert opts == stream_opts() and len(kept) == len(others)
    assert all(k is f for k, f in zip(kept, others, strict=True))  # Spark matches them by identity


def test_key_filters_become_the_keys_option() -> None:
    bucket = SparkOptions(servers=URL, bucket="b", keys=("users.>",))
    eq, part, rev = EqualTo(("key",), "users.7"), StringStartsWith(("key",), "users.e"), GreaterThan(("revision",), 3)
    opts, kept = push_key_filters(bucket, [eq, rev])
    assert opts.keys == ("users.7",) and kept == [rev]
    opts, kept = push_key_filters(SparkOptions(servers=URL, bucket="b"), [part])
    assert opts.keys == ("users.>",) and kept == [part]
    opts, kept = push_key_filters(bucket, [In(("key",), ["users.1", "orders.1", "users.2"])])
    assert opts.keys == ("users.1", "users.2") and kept == []
    for value in ("_kv.x", "a b", "a.*"):
        f = EqualTo(("key",), value)
        assert push_key_filters(bucket, [f]) == (bucket, [f])
    never = [EqualTo(("key",), "a"), EqualTo(("key",), "b")]
    assert push_key_filters(bucket, never) == (bucket, never)  # no option reads no key: Spark keeps them


# -- push_stream_filters: the property ----------------------------------------------------------------------


@dataclass(frozen=True)
class Msg:
    subject: str
    seq: int
    timestamp: dt.datetime
    data: bytes


def column(m: Msg, name: tuple[str, ...]) -> Any:
    return getattr(m, "subject" if name == ("key",) else name[0])  # a key plays the subject's part


def holds(f: Any, m: Msg) -> bool:
    """Spark's meaning of a filter, for one row."""
    if isinstance(f, IsNotNull):
        return column(m, f.attribute) is not None
    value = column(m, f.attribute)
    if isinstance(f, EqualTo):
        return bool(value == f.value)
    if isinstance(f, In):
        return value in f.value
    if isinstance(f, StringStartsWith):
        return bool(value.startswith(f.value))
    ops = {GreaterThan: "__gt__", GreaterThanOrEqual: "__ge__", LessThan: "__lt__", LessThanOrEqual: "__le__"}
    return bool(getattr(value, ops[type(f)])(f.value))


def read(opts: SparkOptions, msgs: list[Msg]) -> list[Msg]:
    """What a batch read of these options reads, as BatchReader.partitions and the server resolve them."""

    def first_at(when: dt.datetime) -> int:
        return next((m.seq for m in msgs if m.timestamp >= when), len(msgs) + 1)

    first = opts.starting_sequence or (first_at(opts.starting_time) if opts.starting_time else 1)
    last = opts.ending_sequence if opts.ending_sequence is not None else (
        first_at(opts.ending_time) - 1 if opts.ending_time else len(msgs)
    )
    subjects = opts.subjects or (">",)
    return [m for m in msgs if first <= m.seq <= last and any(matches(s, m.subject) for s in subjects)]


STAMPS = st.integers(0, 12).map(lambda us: T0 + dt.timedelta(microseconds=us))
SEQS = st.integers(-1, 14)
CONCRETE = st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=3).map(".".join)
STRING_FILTERS = st.one_of(
    st.builds(EqualTo, st.just(("subject",)), CONCRETE | st.sampled_from(["a.*", "a..b", ""])),
    st.builds(In, st.just(("subject",)), st.lists(CONCRETE, min_size=1, max_size=3)),
    st.builds(StringStartsWith, st.just(("subject",)), st.sampled_from(["", "a", "a.", "a.b", "b.a.", "a.b."])),
)
COMPARISONS = st.sampled_from([EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual])
FILTERS = st.one_of(
    STRING_FILTERS,
    st.builds(lambda c, v: c(("seq",), v), COMPARISONS, SEQS),
    st.builds(In, st.just(("seq",)), st.lists(SEQS, min_size=1, max_size=3)),
    st.builds(lambda c, v: c(("timestamp",), v), COMPARISONS, STAMPS),
    st.builds(EqualTo, st.just(("data",)), st.sampled_from([b"0", b"1"])),
    st.builds(IsNotNull, st.sampled_from([("subject",), ("seq",), ("timestamp",)])),
)


@st.composite
def options(draw: Any) -> dict[str, Any]:
    """Option fields of a batch read: subjects, and a start and an end, each a sequence, a time or neither."""
    fields: dict[str, Any] = {}
    if draw(st.booleans()):
        fields["subjects"] = tuple(draw(st.lists(PATTERNS, min_size=1, max_size=2)))
    start = draw(st.sampled_from(["starting_sequence", "starting_time", None]))
    end = draw(st.sampled_from(["ending_sequence", "ending_time", None]))
    if start:
        fields[start] = draw(st.integers(1, 8) if start == "starting_sequence" else STAMPS)
    if end:
        fields[end] = draw(st.integers(8, 14) if end == "ending_sequence" else STAMPS)
    return fields



@settings(max_examples=500, deadline=None)
@given(
    subjects=st.lists(CONCRETE, min_size=12, max_size=12),
    steps=st.lists(st.integers(0, 1), min_size=12, max_size=12),
    fields=options(),
    filters=st.lists(FILTERS, max_size=5),
)
def test_the_narrowed_read_and_the_filters_handed_back_keep_exactly_the_matching_rows(
    subjects: list[str], steps: list[int], fields: dict[str, Any], filters: list[Any]
) -> None:
    """Stored times that never go back (the server's own assumption when it looks a time up)."""
    msgs, stamp = [], T0
    for i, (subject, step) in enumerate(zip(subjects, steps, strict=True)):
        stamp += dt.timedelta(microseconds=step)
        msgs.append(Msg(subject, i + 1, stamp, b"%d" % (i % 2)))
    opts = stream_opts(**fields)
    narrowed, kept = push_stream_filters(opts, filters)
    assert all(any(k is f for f in filters) for k in kept)
    wanted = [m for m in read(opts, msgs) if all(holds(f, m) for f in filters)]
    assert [m for m in read(narrowed, msgs) if all(holds(f, m) for f in kept)] == wanted


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(CONCRETE, min_size=1, max_size=12),
    given_keys=st.lists(PATTERNS, max_size=2).map(tuple),
    filters=st.lists(STRING_FILTERS.map(lambda f: type(f)(("key",), f.value)), max_size=4),
)
def test_key_pushes_keep_exactly_the_matching_keys(keys: list[str], given_keys: tuple[str, ...],
                                                   filters: list[Any]) -> None:
    opts = SparkOptions(servers=URL, bucket="b", keys=given_keys)
    narrowed, kept = push_key_filters(opts, filters)

    def rows(o: SparkOptions, fs: list[Any]) -> list[str]:
        return [k for k in keys if any(matches(p, k) for p in o.keys or (">",))
                and all(holds(f, Msg(k, 1, T0, b"")) for f in fs)]

    assert rows(narrowed, kept) == rows(opts, filters)


def test_the_reader_pushes_and_the_unpushed_one_does_not(caplog: Any) -> None:
    """Spark tells a reader that pushes by its method not being DataSourceReader's; it fails such a reader's
    read where pushdown is off."""
    assert UnpushedBatchReader.pushFilters is ds.DataSourceReader.pushFilters
    assert BatchReader.pushFilters is not ds.DataSourceReader.pushFilters
    reader = BatchReader(stream_opts())
    data = EqualTo(("data",), b"")
    with caplog.at_level(logging.INFO, logger="jsclient.spark"):
        kept = reader.pushFilters([EqualTo(("subject",), "a.1"), LessThan(("seq",), 100), data])
    assert len(kept) == 1 and kept[0] is data
    assert (reader.opts.subjects, reader.opts.ending_sequence) == (("a.1",), 99)
    assert "reading subjects a.1, sequences 1..99" in caplog.text


# -- through Spark, against a server ---------------------------------------------------------------------------

SUBJECTS_N, PER_SUBJECT = 100, 300
TOTAL = SUBJECTS_N * PER_SUBJECT


def subject_of(i: int) -> str:
    """100 subjects, 10 groups of 10: many.g<0-9>.s<0-9>."""
    return f"many.g{i % 100 // 10}.s{i % 10}"


@pytest.fixture(scope="module")
def many(server: NatsServer) -> Iterator[str]:
    """A stream of 100 subjects, 300 messages each, kept for the module (its tests only read it)."""
    with jsclient.connect(server.url) as nc:
        js = nc.jetstream(timeout=60)
        js.add_stream(name="MANY", subjects=["many.>"], allow_direct=True)
        for i in range(TOTAL):
            js.publish_async(subject_of(i), b"%d" % i)
        js.publish_async_completed(timeout=120)
        yield "MANY"
        js.delete_stream("MANY")


def out_msgs(server: NatsServer) -> int:
    """Messages the server has sent to clients so far (its monitoring endpoint)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/varz", timeout=10) as reply:
        return int(json.load(reply)["out_msgs"])


def load(spark: Any, server: NatsServer, stream: str, **options: Any) -> Any:
    """A read of ``stream``; with the session's setting on, one that pushes its filters on any Spark 4.1+ (by
    default only a Spark that keeps a pushed read with its query does: test_the_default_...)."""
    if spark.conf.get(jsclient.spark.PUSHDOWN_CONF, "false") == "true":
        options.setdefault("filterPushdown", "true")
    reader = spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in options.items():
        if value is not None:
            reader = reader.option(key, value)
    return reader.load()


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted((r.seq, r.subject, bytes(r.data), r.timestamp) for r in df.collect())


def delivered(server: NatsServer, df: Any) -> tuple[list[tuple[Any, ...]], int]:
    """The rows of ``df`` and how many messages the server sent while Spark planned and read it."""
    before = out_msgs(server)
    rows = rows_of(df)
    return rows, out_msgs(server) - before


@contextlib.contextmanager
def pushdown_off(spark: Any) -> Iterator[None]:
    """The session with Python filter pushdown off (and the format registered for that), then on again."""
    spark.conf.set(jsclient.spark.PUSHDOWN_CONF, "false")
    jsclient.spark.register(spark)
    try:
        yield
    finally:
        spark.conf.set(jsclient.spark.PUSHDOWN_CONF, "true")
        jsclient.spark.register(spark)


@pytest.fixture(scope="module", autouse=True)
def pushdown_on(spark: Any) -> Iterator[None]:
    """The session with Python filter pushdown on for this module (register() turns it on by itself only where
    the format pushes by default), and as it was afterwards."""
    before = spark.conf.get(jsclient.spark.PUSHDOWN_CONF, None)
    spark.conf.set(jsclient.spark.PUSHDOWN_CONF, "true")
    jsclient.spark.register(spark)
    yield
    if before is None:
        spark.conf.unset(jsclient.spark.PUSHDOWN_CONF)
    else:
        spark.conf.set(jsclient.spark.PUSHDOWN_CONF, before)
    jsclient.spark.register(spark)


@pytest.fixture(scope="module")
def everything(spark: Any, server: NatsServer, many: str) -> list[tuple[Any, ...]]:
    """Every row of the stream, read without a filter."""
    rows = rows_of(load(spark, server, many))
    assert len(rows) == TOTAL
    return rows


CASES = {
    "equality": ("subject = 'many.g3.s7'", lambda r: r[1] == "many.g3.s7", PER_SUBJECT),
    "in": ("subject in ('many.g0.s1', 'many.g9.s9')", lambda r: r[1] in ("many.g0.s1", "many.g9.s9"),
           2 * PER_SUBJECT),
    "prefix at a token": ("subject like 'many.g4.%'", lambda r: r[1].startswith("many.g4."), 10 * PER_SUBJECT),
    "prefix within a token": ("startswith(subject, 'many.g4.s1')", lambda r: r[1].startswith("many.g4.s1"),
                              10 * PER_SUBJECT),  # read: many.g4.> (10 subjects); Spark keeps many.g4.s1
    "sequence range": ("seq between 1001 and 1300", lambda r: 1001 <= r[0] <= 1300, 300),
    "with a filter Spark keeps": ("subject = 'many.g5.s5' and cast(data as string) like '%155'",
                                  lambda r: r[1] == "many.g5.s5" and r[2].endswith(b"155"), PER_SUBJECT),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_pushed_filter_reads_only_the_matching_messages(
    spark: Any, server: NatsServer, many: str, everything: list[tuple[Any, ...]], case: str
) -> None:
    where, keep, read = CASES[case]
    rows, sent = delivered(server, load(spark, server, many).where(where))
    assert rows == [r for r in everything if keep(r)]
    # What the server sent: the messages read, and a few dozen API replies (stream info, counts, the consumer).
    assert read <= sent <= read + 100, (case, sent)


def test_an_unpushed_read_gives_the_same_rows_from_every_message(
    spark: Any, server: NatsServer, many: str, everything: list[tuple[Any, ...]]
) -> None:
    """The control: the same query with pushdown off reads the whole stream."""
    where = "subject in ('many.g0.s1', 'many.g9.s9') and seq > 100"
    pushed, pushed_sent = delivered(server, load(spark, server, many).where(where))
    with pushdown_off(spark):
        unpushed, sent = delivered(server, load(spark, server, many).where(where))
    assert pushed == unpushed == [r for r in everything if r[1] in ("many.g0.s1", "many.g9.s9") and r[0] > 100]
    assert sent >= TOTAL and pushed_sent <= 2 * PER_SUBJECT + 100


def test_a_time_lower_bound_starts_the_read_at_that_time(
    spark: Any, server: NatsServer, many: str, everything: list[tuple[Any, ...]]
) -> None:
    """``timestamp >= t`` starts at the first message stored at or after t (servers from 2.11, which look a time
    up); Spark still checks every row."""
    from pyspark.sql import functions as F

    since = everything[TOTAL - 300][3]  # the last 1 %, and any stored within the same microsecond before
    rows, sent = delivered(server, load(spark, server, many).where(F.col("timestamp") >= F.lit(since)))
    wanted = [r for r in everything if r[3] >= since]
    assert rows == wanted and len(wanted) >= 300
    if server_release() >= (2, 11):
        assert len(wanted) <= sent <= len(wanted) + 100
    else:  # a 2.10 server cannot look a time up: Spark alone applies the filter
        assert sent >= TOTAL


def test_filters_no_message_passes_read_nothing(spark: Any, server: NatsServer, many: str) -> None:
    rows, sent = delivered(server, load(spark, server, many).where("seq > 20 and seq < 10"))
    assert rows == [] and sent <= 20


def test_several_partitions_and_several_subjects(
    spark: Any, server: NatsServer, many: str, everything: list[tuple[Any, ...]]
) -> None:
    """Each task's consumer takes both subjects (filter_subjects); a pull runs past its range by at most the
    range's size."""
    wanted = [r for r in everything if r[1] in ("many.g2.s2", "many.g7.s0")]
    rows, sent = delivered(
        server, load(spark, server, many, minPartitions=3).where("subject in ('many.g2.s2', 'many.g7.s0')")
    )
    assert rows == wanted and sent <= 2 * len(wanted) + 200


def test_direct_get_reads_ask_for_each_subject(spark: Any, server: NatsServer, many: str) -> None:
    """An interest stream is read by direct get (a consumer would count as interest), one subject filter after
    another: the server sends only the matching messages (a 2.10 server, one message per request)."""
    with jsclient.connect(server.url) as nc:  # not the js fixture: it would delete the module's stream
        js = nc.jetstream(timeout=60)
        js.add_stream(name="KEPT", subjects=["kept.>"], allow_direct=True, retention="interest")
        js.add_consumer("KEPT", durable_name="keep", ack_policy="explicit")  # so that the stream keeps them
        for i in range(5000):
            js.publish_async(f"kept.{i % 50}", b"%d" % i)
        js.publish_async_completed(timeout=60)
        try:
            where = "subject in ('kept.3', 'kept.40')"
            rows, sent = delivered(server, load(spark, server, "KEPT", minPartitions=2).where(where))
        finally:
            js.delete_stream("KEPT")
    assert [r[0] for r in rows] == [s for s in range(1, 5001) if (s - 1) % 50 in (3, 40)]
    assert 200 <= sent <= 2 * 200 + 100


def test_explain_formatted_lists_the_pushed_filters(spark: Any, server: NatsServer, many: str) -> None:
    df = load(spark, server, many).where("subject = 'many.g1.s1' and seq < 5000 and length(data) > 0")
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        df.explain("formatted")
    pushed = re.search(r"PushedFilters: \[(.*)\]", shown.getvalue())
    assert pushed is not None, shown.getvalue()
    assert "EqualTo(subject,many.g1.s1)" in pushed.group(1) and "LessThan(seq,5000)" in pushed.group(1)
    assert "length" not in pushed.group(1)


def test_register_leaves_an_explicit_false_alone(spark: Any, server: NatsServer, many: str) -> None:
    """With pushdown off the format's reader pushes nothing (Spark would fail one that does), and reads work;
    a session that does not set it gets it on where the format pushes by default, else keeps it unset."""
    from jsclient.spark.datasource import pushes_by_default

    with pushdown_off(spark):
        assert spark.conf.get(jsclient.spark.PUSHDOWN_CONF) == "false"
        rows, sent = delivered(server, load(spark, server, many).where("subject = 'many.g3.s7'"))
        assert len(rows) == PER_SUBJECT and sent >= TOTAL
    spark.conf.unset(jsclient.spark.PUSHDOWN_CONF)
    jsclient.spark.register(spark)
    try:
        assert spark.conf.get(jsclient.spark.PUSHDOWN_CONF, None) == ("true" if pushes_by_default() else None)
        rows, sent = delivered(server, load(spark, server, many).where("subject = 'many.g3.s7'"))
        assert len(rows) == PER_SUBJECT
        assert (sent <= PER_SUBJECT + 100) if pushes_by_default() else (sent >= TOTAL)
    finally:
        spark.conf.set(jsclient.spark.PUSHDOWN_CONF, "true")
        jsclient.spark.register(spark)


def test_the_default_pushes_only_where_spark_keeps_a_pushed_read_with_its_query(
    spark: Any, server: NatsServer, many: str
) -> None:
    """Spark up to 4.3 keeps a pushed read with the DataFrame: reused for an unfiltered query, it would read only
    what the filter let through.  By default such a Spark pushes nothing, and a reused DataFrame reads it all."""
    from pyspark.sql.datasource import DataSourceReader

    keeps_with_query = hasattr(DataSourceReader, "pushLimit")
    df = load(spark, server, many, filterPushdown=None)
    rows, sent = delivered(server, df.where("subject = 'many.g3.s7'"))
    assert len(rows) == PER_SUBJECT
    assert (sent <= PER_SUBJECT + 100) if keeps_with_query else (sent >= TOTAL)
    assert df.count() == TOTAL  # the same DataFrame, unfiltered: every message


def test_filter_pushdown_true_with_the_setting_off_is_an_error(spark: Any, server: NatsServer, many: str) -> None:
    with pushdown_off(spark), pytest.raises(Exception, match="filterPushdown=true needs the session's"):
        load(spark, server, many, filterPushdown="true").where("subject = 'many.g3.s7'").count()
