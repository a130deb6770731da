"""The sans-IO parser and encoders, without sockets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jsclient.errors import BadSubjectError, ProtocolError
from jsclient.protocol import (
    REPEAT_MAX,
    REPLY_LINE,
    Err,
    Info,
    MsgEvent,
    Ok,
    Parser,
    Ping,
    Pong,
    ReplyShape,
    check_publish_subject,
    check_subscribe_subject,
    encode_connect,
    encode_hpub,
    encode_pub,
    encode_sub,
    encode_unsub,
    reply_pattern,
)

STREAM = (
    b'INFO {"server_id":"abc","max_payload":1048576,"headers":true}\r\n'
    b"PING\r\n"
    b"MSG foo.bar 1 5\r\nhello\r\n"
    b"MSG foo.bar 22 _INBOX.x.1 0\r\n\r\n"
    b"HMSG foo 3 12 17\r\nNATS/1.0\r\n\r\nworld\r\n"
    b"HMSG foo 3 reply.to 22 22\r\nNATS/1.0 503\r\nA: b\r\n\r\n\r\n"
    b"MSG bin 4 4\r\n\r\n\r\n\r\n"
    b"PONG\r\n"
    b"+OK\r\n"
    b"-ERR 'Authorization Violation'\r\n"
)

EXPECTED = [
    Info({"server_id": "abc", "max_payload": 1048576, "headers": True}),
    Ping(),
    MsgEvent("foo.bar", 1, None, None, b"hello"),
    MsgEvent("foo.bar", 22, "_INBOX.x.1", None, b""),
    MsgEvent("foo", 3, None, b"NATS/1.0\r\n\r\n", b"world"),
    MsgEvent("foo", 3, "reply.to", b"NATS/1.0 503\r\nA: b\r\n\r\n", b""),
    MsgEvent("bin", 4, None, None, b"\r\n\r\n"),
    Pong(),
    Ok(),
    Err("Authorization Violation"),
]


def normalise(events: list) -> list:
    return [e.data if isinstance(e, Info) else e for e in events]


def test_whole_stream() -> None:
    assert normalise(Parser().feed(STREAM)) == normalise(EXPECTED)


def test_byte_by_byte() -> None:
    parser = Parser()
    events: list = []
    for i in range(len(STREAM)):
        events += parser.feed(STREAM[i : i + 1])
    assert normalise(events) == normalise(EXPECTED)
    assert parser.buffered == 0


def test_split_at_every_offset() -> None:
    for cut in range(len(STREAM) + 1):
        parser = Parser()
        events = parser.feed(STREAM[:cut]) + parser.feed(STREAM[cut:])
        assert normalise(events) == normalise(EXPECTED), f"split at {cut}"


def test_incomplete_input_yields_nothing_until_complete() -> None:
    parser = Parser()
    assert parser.feed(b"MSG a 1 10\r\nhello") == []
    assert parser.feed(b"world") == []
    assert parser.feed(b"\r\n") == [MsgEvent("a", 1, None, None, b"helloworld")]


def test_large_payload_in_chunks() -> None:
    payload = bytes(range(256)) * (16 * 4096)  # 16 MiB
    frame = b"MSG big 9 %d\r\n" % len(payload) + payload + b"\r\n"
    parser = Parser()
    events: list = []
    for i in range(0, len(frame), 65536):
        events += parser.feed(frame[i : i + 65536])
    assert len(events) == 1 and events[0].data == payload


def test_a_run_of_plain_msgs_stops_where_it_cannot_be_sure() -> None:
    # Runs of MSG frames are cut at CRLF in one go; a payload holding CRLF, a frame
    # with headers or another operation ends the run, and the events stay exact.
    wire = (
        b"MSG a 1 2\r\nhi\r\nMSG b 2 r.1 0\r\n\r\nMSG c 3 6\r\nx\r\ny\r\n\r\nMSG d 4 1\r\nz\r\n"
        b"HMSG e 5 12 13\r\nNATS/1.0\r\n\r\nq\r\nMSG f 6 1\r\nw\r\nPING\r\nMSG g 7 3\r\nend\r\nMSG h 8 7\r\npart"
    )
    expected = [
        MsgEvent("a", 1, None, None, b"hi"),
        MsgEvent("b", 2, "r.1", None, b""),
        MsgEvent("c", 3, None, None, b"x\r\ny\r\n"),
        MsgEvent("d", 4, None, None, b"z"),
        MsgEvent("e", 5, None, b"NATS/1.0\r\n\r\n", b"q"),
        MsgEvent("f", 6, None, None, b"w"),
        Ping(),
        MsgEvent("g", 7, None, None, b"end"),
    ]
    parser = Parser()
    assert parser.feed(wire) == expected
    assert parser.feed(b"ial\r\n") == [MsgEvent("h", 8, None, None, b"partial")]
    one_by_one = Parser()
    assert [ev for i in range(len(wire)) for ev in one_by_one.feed(wire[i : i + 1])] == expected


def long_run_wire() -> tuple[bytes, list[MsgEvent]]:
    """Long runs of MSG frames (as acks and deliveries arrive), with everything that must cut a run short."""
    wire = b""
    expected: list[MsgEvent] = []

    def msg(subject: str, sid: int, reply: str | None, payload: bytes) -> None:
        nonlocal wire
        r = f" {reply}".encode() if reply else b""
        wire += b"MSG %s %d%s %d\r\n%s\r\n" % (subject.encode(), sid, r, len(payload), payload)
        expected.append(MsgEvent(subject, sid, reply, None, payload))

    for i in range(20):
        msg(f"_INBOX.x.{i}", 1, None, b'{"seq":%d}' % i)
    for i in range(15):
        msg("orders.new", 2, f"$JS.ACK.S.C.1.{i}.{i}.0.0", b"o%d" % i)
    for i in range(12):  # the CRLF payload cuts the run at its 10th frame
        msg("crlf", 3, None, b"a\r\nb" if i == 9 else b"p%d" % i)
    wire += b"HMSG h 4 12 13\r\nNATS/1.0\r\n\r\nq\r\n"
    expected.append(MsgEvent("h", 4, None, b"NATS/1.0\r\n\r\n", b"q"))
    for i in range(9):  # one frame of another width in the middle
        msg("mixed", 5, "r" if i == 4 else None, b"")
    for i in range(10):
        msg("MSG", 6, None, b"MSG %d" % i)  # a subject and payloads that look like the operation
    return wire, expected


def test_long_runs_parse_the_same_whole_split_and_byte_by_byte() -> None:
    wire, expected = long_run_wire()
    assert Parser().feed(wire) == expected
    one_by_one = Parser()
    assert [ev for i in range(len(wire)) for ev in one_by_one.feed(wire[i : i + 1])] == expected
    for cut in range(0, len(wire), 97):
        parser = Parser()
        assert parser.feed(wire[:cut]) + parser.feed(wire[cut:]) == expected
    tail = Parser()
    assert tail.feed(wire + b"MSG last 7 4\r\nxy") == expected  # the partial frame waits
    assert tail.feed(b"z!\r\n") == [MsgEvent("last", 7, None, None, b"xyz!")]


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (b"MSG b\tc 2 0\r\n\r\n", b"b\tc 2 0"),
        (b"MSG \xff 1 0\r\n\r\n", b"\xff 1 0"),
        (b"MSG a 1 x\r\n\r\n", b"a 1 x"),
        (b"MSG a one 0\r\n\r\n", b"a one 0"),
        (b"MSG a 1 -1\r\n\r\n", b"a 1 -1"),
        (b"MSG a 1 0 0 0\r\n\r\n", b"a 1 0 0 0"),
    ],
)
def test_malformed_frame_inside_a_long_run_raises_naming_it(bad: bytes, fragment: bytes) -> None:
    good = b"".join(b"MSG s.%d 1 2\r\nok\r\n" % i for i in range(12))
    for wire in (good + bad + good, bad + good, good + good + bad):
        parser = Parser()
        with pytest.raises(ProtocolError) as info:
            parser.feed(wire)
        assert repr(fragment)[2:-1] in str(info.value)


def test_overlong_line_inside_a_long_run_raises() -> None:
    good = b"".join(b"MSG s.%d 1 2\r\nok\r\n" % i for i in range(12))
    with pytest.raises(ProtocolError, match="control line too long"):
        Parser(max_control_line=64).feed(good + b"MSG " + b"a" * 100 + b" 1 2\r\nok\r\n" + good)


def test_lowercase_and_tab_separated_operations() -> None:
    events = Parser().feed(b"ping\r\nmsg\tfoo\t1\t2\r\nhi\r\npong\r\n")
    assert events == [Ping(), MsgEvent("foo", 1, None, None, b"hi"), Pong()]


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"FOO bar\r\n", b"FOO bar"),
        (b"MSG foo 1\r\n", b"foo 1"),
        (b"MSG foo 1 x\r\n", b"foo 1 x"),
        (b"MSG foo one 3\r\n", b"foo one 3"),
        (b"MSG foo 1 -3\r\n", b"foo 1 -3"),
        (b"MSG foo 1 3\r\nabcXY", b"XY"),
        (b"HMSG foo 1 10 5\r\n", b"foo 1 10 5"),
        (b"HMSG foo 1 5\r\n", b"foo 1 5"),
        (b"INFO {not json}\r\n", b"not json"),
        (b"INFO [1,2]\r\n", b"[1,2]"),
        (b"MSG \xff 1 0\r\n\r\n", b"\xff 1 0"),
        (b"MSG \xff 1 r 0\r\n\r\n", b"\xff 1 r 0"),
        (b"MSG a 1 0\r\n\r\nMSG b\tc 2 0\r\n\r\n", b"b\tc 2 0"),
        (b"MSG a 1 0\r\n\r\nMSG\tb 2 0\r\n\r\n", b"MSG\tb 2 0"),
    ],
)
def test_malformed_input_raises_naming_the_bytes(data: bytes, fragment: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        Parser().feed(data)
    assert repr(fragment)[2:-1] in str(info.value)


def test_overlong_control_line_raises_instead_of_buffering_forever() -> None:
    parser = Parser(max_control_line=1024)
    with pytest.raises(ProtocolError, match="control line too long"):
        parser.feed(b"MSG " + b"a" * 2000)


def header_block(value: bytes) -> bytes:
    return b"NATS/1.0\r\nX: " + value.hex().encode() + b"\r\n\r\n"


@settings(max_examples=300, deadline=None)
@given(
    msgs=st.lists(
        st.tuples(
            st.from_regex(r"[a-z]{1,8}(\.[a-z0-9]{1,8}){0,3}", fullmatch=True),
            st.integers(min_value=1, max_value=10**6),
            st.one_of(st.none(), st.from_regex(r"_INBOX\.[a-z0-9]{1,10}", fullmatch=True)),
            st.one_of(st.none(), st.binary(max_size=40).map(header_block)),
            st.binary(max_size=300),
            st.booleans(),  # a PING after it: without, plain MSGs form runs (parsed by one split)
        ),
        max_size=40,  # long runs as well as short ones
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=8),
)
def test_fuzz_roundtrip_any_split(msgs: list, cuts: list) -> None:
    """Whatever the frames and wherever the input is split, the events are the same."""
    wire = b""
    expected = []
    for subject, sid, reply, header, payload, ping in msgs:
        r = f" {reply}".encode() if reply else b""
        if header is None:
            wire += b"MSG %s %d%s %d\r\n%s\r\n" % (subject.encode(), sid, r, len(payload), payload)
        else:
            wire += b"HMSG %s %d%s %d %d\r\n%s%s\r\n" % (
                subject.encode(), sid, r, len(header), len(header) + len(payload), header, payload,
            )
        expected.append(MsgEvent(subject, sid, reply, header, payload))
        if ping:
            wire += b"PING\r\n"
            expected.append(Ping())
    parser = Parser()
    events: list = []
    last = 0
    for cut in sorted(c % (len(wire) + 1) for c in cuts):
        events += parser.feed(wire[last:cut])
        last = cut
    events += parser.feed(wire[last:])
    assert events == expected


@settings(max_examples=500, deadline=None)
@given(
    subject=st.from_regex(r"[a-z]{1,8}(\.[a-z0-9]{1,8}){0,2}", fullmatch=True),
    sid=st.integers(min_value=1, max_value=10**6),
    reply=st.one_of(st.none(), st.from_regex(r"_INBOX\.[a-z0-9]{1,10}", fullmatch=True)),
    header=st.one_of(st.none(), st.binary(max_size=40).map(header_block)),
    payload=st.one_of(st.binary(max_size=100), st.sampled_from([b"a\r\nMSG b 2 1\r\nz", b"MSG b 2 1\r\nz\r\n"])),
    damage=st.one_of(st.none(), st.tuples(st.integers(min_value=0, max_value=400), st.binary(max_size=3))),
    then=st.sampled_from([b"", b"PING\r\n", b"MSG b 2 1\r\nz\r\n", b"HMSG b 2 12 12\r\nNATS/1.0\r\n\r\n\r\n"]),
)
def test_feed_one_takes_a_lone_frame_exactly_as_feed_does(
    subject: str, sid: int, reply: str | None, header: bytes | None, payload: bytes, damage: tuple | None,
    then: bytes,
) -> None:
    """The reply fast path: one whole frame (or a damaged one) gives feed()'s events, or None and feed decides.

    A read holding more than the frame (``then``), or text that looks like another frame, is left to feed().
    """
    r = f" {reply}".encode() if reply else b""
    if header is None:
        wire = b"MSG %s %d%s %d\r\n%s\r\n" % (subject.encode(), sid, r, len(payload), payload)
    else:
        wire = b"HMSG %s %d%s %d %d\r\n%s%s\r\n" % (
            subject.encode(), sid, r, len(header), len(header) + len(payload), header, payload,
        )
    if damage is not None:
        at = damage[0] % (len(wire) + 1)
        wire = wire[:at] + damage[1] + wire[at + len(damage[1]) :]
    wire += then
    one = Parser().feed_one(memoryview(wire))
    if damage is None and not then and b"MSG " not in (header or b"") + payload:  # that text: left to feed()
        assert one == MsgEvent(subject, sid, reply, header, payload)
    if then:
        assert one is None
    if one is not None:
        parser = Parser()
        assert parser.feed(wire) == [one] and parser.buffered == 0
    busy = Parser()
    busy.feed(b"MSG a 1 5\r\nhel")  # something buffered: never the fast path
    assert busy.feed_one(wire) is None


@settings(max_examples=500, deadline=None)
@given(
    sid=st.integers(min_value=1, max_value=10**6),
    token=st.integers(min_value=1, max_value=10**9),
    reply=st.one_of(st.none(), st.just("_INBOX.x")),
    header=st.one_of(st.none(), st.binary(max_size=40).map(header_block)),
    payload=st.one_of(st.binary(max_size=100), st.just(b"MSG _INBOX.mux.1 1 1\r\nz")),
    damage=st.one_of(st.none(), st.tuples(st.integers(min_value=0, max_value=400), st.binary(max_size=3))),
    then=st.sampled_from([b"", b"PING\r\n", b"MSG b 2 1\r\nz\r\n"]),
    other=st.sampled_from(["", "token", "sid"]),
    as_view=st.booleans(),
)
def test_feed_reply_takes_its_own_reply_exactly_as_feed_does(
    sid: int, token: int, reply: str | None, header: bytes | None, payload: bytes, damage: tuple | None,
    then: bytes, other: str, as_view: bool,
) -> None:
    """A request() caller's own reply: its frame with the bounds of the header block and payload as feed()
    reads them, or None and feed() decides.

    Another token's or sid's reply, a reply field, a second frame, or damage anywhere never comes out as
    a different answer: at worst None.
    """
    subject = b"_INBOX.mux.%d" % (token + (other == "token"))
    frame_sid = sid + (other == "sid")
    r = f" {reply}".encode() if reply else b""
    if header is None:
        wire = b"MSG %s %d%s %d\r\n%s\r\n" % (subject, frame_sid, r, len(payload), payload)
    else:
        wire = b"HMSG %s %d%s %d %d\r\n%s%s\r\n" % (
            subject, frame_sid, r, len(header), len(header) + len(payload), header, payload,
        )
    if damage is not None:
        at = damage[0] % (len(wire) + 1)
        wire = wire[:at] + damage[1] + wire[at + len(damage[1]) :]
    wire += then
    line = REPLY_LINE % (b"_INBOX.mux.", token, sid)
    frame = Parser().feed_reply(memoryview(wire) if as_view else wire, line)
    got = None
    if frame is not None:
        raw, body, split, stop = frame
        assert raw == wire and body <= split <= stop == len(wire) - 2
        got = (raw[body:split] if split > body else None), raw[split:stop]
    if damage is None and not then and not other and reply is None:
        assert got == (header, payload)
    if then or other or reply is not None:
        assert got is None
    if got is not None:
        parser = Parser()
        events = parser.feed(wire)
        assert len(events) == 1 and parser.buffered == 0
        assert (events[0].subject, events[0].sid, events[0].reply) == (subject.decode(), sid, None)
        assert (events[0].header, events[0].data) == got
    busy = Parser()
    busy.feed(b"MSG a 1 5\r\nhel")  # something buffered: never the fast path
    assert busy.feed_reply(wire, line) is None


def test_feed_reply_leaves_an_empty_header_block_to_feed() -> None:
    """HMSG with a header size of 0 (or 00): feed() keeps an empty block (b""), which bounds cannot say."""
    line = REPLY_LINE % (b"_INBOX.mux.", 5, 1)
    for size in (b"0", b"00"):
        wire = b"HMSG _INBOX.mux.5 1 %s 2\r\nhi\r\n" % size
        assert Parser().feed_reply(wire, line) is None
        (event,) = Parser().feed(wire)
        assert (event.header, event.data) == (b"", b"hi")


#: The shape the tests read: a header block of one "X: <hex>" line, its value a group of its own.
X_SHAPE = ReplyShape(
    reply_pattern(rb"NATS/1\.0\r\nX: ([0-9a-f]*)\r\n\r\n"), lambda groups: groups, decode=lambda msg: msg, headers=True
)
PLAIN_SHAPE = ReplyShape(reply_pattern(None), lambda groups: groups, decode=lambda msg: msg, headers=False)


@settings(max_examples=500, deadline=None)
@given(
    token=st.integers(min_value=1, max_value=10**9),
    value=st.binary(max_size=20),
    payload=st.one_of(st.binary(max_size=100), st.just(b"MSG _INBOX.mux.1 1 1\r\nz"), st.just(b"a\r\nPING")),
    plain=st.booleans(),
    damage=st.one_of(st.none(), st.tuples(st.integers(min_value=0, max_value=400), st.binary(max_size=3))),
    then=st.sampled_from([b"", b"PING\r\n", b"MSG b 2 1\r\nz\r\n"]),
    other=st.sampled_from(["", "token", "sid", "sizes"]),
)
def test_feed_shaped_takes_its_own_reply_of_that_shape_exactly_as_feed_does(
    token: int, value: bytes, payload: bytes, plain: bool, damage: tuple | None, then: bytes, other: str,
) -> None:
    """One match of a reply's shape: the groups of exactly the header block and payload feed() reads, or
    None (and feed() decides).  Another token or sid, a second frame after it (even one the payload's own
    bytes would let a match take in), sizes that disagree with the match, or damage anywhere: never a
    different answer."""
    subject = b"_INBOX.mux.%d" % (token + (other == "token"))
    sid = 7 + (other == "sid")
    header = header_block(value)
    extra = 1 if other == "sizes" else 0
    if plain:
        wire = b"MSG %s %d %d\r\n%s\r\n" % (subject, sid, len(payload) + extra, payload)
    else:
        wire = b"HMSG %s %d %d %d\r\n%s%s\r\n" % (
            subject, sid, len(header), len(header) + len(payload) + extra, header, payload,
        )
    if damage is not None:
        at = damage[0] % (len(wire) + 1)
        wire = wire[:at] + damage[1] + wire[at + len(damage[1]) :]
    wire += then
    shape = PLAIN_SHAPE if plain else X_SHAPE
    line = shape.line + REPLY_LINE % (b"_INBOX.mux.", token, 7)
    got = Parser().feed_shaped(wire, line, shape)
    if damage is None and not then and not other:
        assert got == ((b"%d" % len(payload), payload) if plain else (
            b"%d" % len(header), b"%d" % (len(header) + len(payload)), header, value.hex().encode(), payload))
    if then or other:
        assert got is None
    if got is not None:
        parser = Parser()
        events = parser.feed(wire)
        assert len(events) == 1 and parser.buffered == 0
        assert (events[0].subject, events[0].sid, events[0].reply) == (subject.decode(), 7, None)
        assert (events[0].header, events[0].data) == ((None, got[1]) if plain else (got[2], got[4]))
    busy = Parser()
    busy.feed(b"MSG a 1 5\r\nhel")  # something buffered: never the fast path
    assert busy.feed_shaped(wire, line, shape) is None


@settings(max_examples=300, deadline=None)
@given(
    frames=st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=10**6),  # token
            st.sampled_from([b"", b"a", b"ab"]),  # the header's value: few, so frames come again
            st.sampled_from([b"", b"p", b"pq", b"p\r\nq", b"x" * 1100]),  # the last is over REPEAT_MAX
            st.one_of(st.none(), st.tuples(st.integers(min_value=0, max_value=60), st.binary(min_size=1, max_size=2))),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_a_repeating_shape_gives_every_frame_what_a_fresh_match_gives(frames: list[tuple]) -> None:
    """A shape that keeps its last frame answers a frame that came again (under another token) with that
    frame's groups, the same tuple, and any other frame, however close, with a match of its own: never
    groups of another frame."""
    repeating = ReplyShape(X_SHAPE.pattern, X_SHAPE.read, decode=X_SHAPE.decode, headers=True, repeats=True)
    last: tuple[bytes, tuple[bytes, ...]] | None = None  # what the shape should keep: (after the line, groups)
    for token, value, payload, damage in frames:
        header = header_block(value)
        line = repeating.line + REPLY_LINE % (b"_INBOX.mux.", token, 7)
        wire = line + b"%d %d\r\n%s%s\r\n" % (len(header), len(header) + len(payload), header, payload)
        if damage is not None:
            at = len(line) + damage[0]
            wire = wire[:at] + damage[1] + wire[at + len(damage[1]) :]
        got = Parser().feed_shaped(wire, line, repeating)
        assert got == Parser().feed_shaped(wire, line, X_SHAPE)  # the same as a shape that keeps nothing
        if last is not None and wire[len(line) :] == last[0]:
            assert got is last[1]  # the kept groups, not a match
        elif got is not None and len(wire) - len(line) <= REPEAT_MAX:
            last = (wire[len(line) :], got)
        assert repeating.last == last


def test_a_repeating_shape_matches_a_frame_read_over_and_over_once() -> None:
    repeating = ReplyShape(X_SHAPE.pattern, X_SHAPE.read, decode=X_SHAPE.decode, headers=True, repeats=True)
    header = header_block(b"ab")
    seen = []
    for token in (1, 2, 30, 400):
        line = repeating.line + REPLY_LINE % (b"_INBOX.mux.", token, 7)
        wire = line + b"%d %d\r\n%sval\r\n" % (len(header), len(header) + 3, header)
        seen.append(Parser().feed_shaped(wire, line, repeating))
    assert seen[0] is not None and all(groups is seen[0] for groups in seen)
    bent = wire.replace(b"val", b"vaL")  # the same length, one byte apart: matched again
    assert Parser().feed_shaped(bent, line, repeating) == (*seen[0][:-1], b"vaL")
    assert PLAIN_SHAPE.last is None and not PLAIN_SHAPE.repeats  # a shape keeps nothing unless asked


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_garbage_never_hangs_or_crashes_unexpectedly(data: bytes) -> None:
    """Arbitrary bytes either parse or raise ProtocolError; nothing else escapes."""
    parser = Parser(max_control_line=256)
    try:
        for i in range(0, len(data), 7):
            parser.feed(data[i : i + 7])
    except ProtocolError:
        pass


def test_encoders() -> None:
    assert encode_pub("a.b", b"hi") == b"PUB a.b 2\r\nhi\r\n"
    assert encode_pub("a.b", b"hi", "r.1") == b"PUB a.b r.1 2\r\nhi\r\n"
    hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
    assert encode_hpub("a", hdr, b"xy") == b"HPUB a %d %d\r\n%sxy\r\n" % (len(hdr), len(hdr) + 2, hdr)
    assert encode_hpub("a", hdr, b"", "r") == b"HPUB a r %d %d\r\n%s\r\n" % (len(hdr), len(hdr), hdr)
    assert encode_sub("a.*", 7) == b"SUB a.* 7\r\n"
    assert encode_sub("a.*", 7, "q") == b"SUB a.* q 7\r\n"
    assert encode_unsub(7) == b"UNSUB 7\r\n"
    assert encode_unsub(7, 10) == b"UNSUB 7 10\r\n"
    assert encode_connect({"verbose": False}) == b'CONNECT {"verbose":false}\r\n'


def test_encoded_frames_parse_back() -> None:
    hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
    wire = encode_pub("a.b", b"hi", "r.1").replace(b"PUB", b"MSG a.b 5", 1).replace(b"MSG a.b 5 a.b", b"MSG a.b 5", 1)
    assert Parser().feed(wire) == [MsgEvent("a.b", 5, "r.1", None, b"hi")]
    wire = encode_hpub("x", hdr, b"yz").replace(b"HPUB x", b"HMSG x 2", 1)
    assert Parser().feed(wire) == [MsgEvent("x", 2, None, hdr, b"yz")]


@pytest.mark.parametrize("subject", ["", " ", "a b", "a\tb", "a..b", ".a", "a.", "a.*", "a.>", ">", "a\r\nb"])
def test_bad_publish_subjects(subject: str) -> None:
    with pytest.raises(BadSubjectError):
        check_publish_subject(subject)


@pytest.mark.parametrize("subject", ["a", "a.b", "a.*.c", "a.>", "*", ">", "a*.b", "$JS.API.INFO"])
def test_good_subscribe_subjects(subject: str) -> None:
    check_subscribe_subject(subject)


@pytest.mark.parametrize("subject", ["", "a..b", "a.>.b", "a b", 5])
def test_bad_subscribe_subjects(subject: str) -> None:
    with pytest.raises(BadSubjectError):
        check_subscribe_subject(subject)  # type: ignore[arg-type]
