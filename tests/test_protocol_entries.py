"""The one reading of a MSG/HMSG control line, every parser entry checked against it, and the frame encoders.

:func:`parse_msg_line` is the reference.  :func:`reference` below reads a
stream frame by frame with it and nothing else; whatever a fast entry of the
parser takes (a run, a lone frame, a bulk request's replies), it must take as
that reading does, and what it does not take it leaves to the general loop,
which names what is wrong as the reference does.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jsclient.errors import ProtocolError
from jsclient.headers import (
    BATCH_MEMBER_BLOCK,
    Headers,
    block_of,
    delivery_fields,
    delivery_head,
    delivery_tail,
    encode,
    encode_line,
    encode_lines,
    header_value,
    msg_id_block,
    parse,
)
from jsclient.protocol import (
    FAST_APPEND_FRAME,
    REQUEST_HEAD,
    Err,
    MsgEvent,
    Parser,
    Ping,
    Pong,
    encode_fast_ingest,
    encode_hpub,
    encode_pub,
    hpub_frame,
    parse_msg_line,
    pub_frame,
)


@pytest.mark.parametrize(
    "line, fields",
    [
        (b"MSG a.b 1 5", ("a.b", 1, None, None, 5)),
        (b"MSG a.b 22 r.1 0", ("a.b", 22, "r.1", None, 0)),
        (b"HMSG a 3 12 17", ("a", 3, None, 12, 17)),
        (b"HMSG a 3 r 0 2", ("a", 3, "r", 0, 2)),  # an empty header block: 0, not None
        (b"msg\ta\t1\t2", ("a", 1, None, None, 2)),
        (b"hmsg a  1  2 2", ("a", 1, None, 2, 2)),
    ],
)
def test_the_reference_reads_a_control_line(line: bytes, fields: tuple) -> None:
    assert parse_msg_line(line) == fields
    assert parse_msg_line(bytearray(line)) == fields


@pytest.mark.parametrize(
    "line, words",
    [
        (b"MSG a 1", "MSG needs 3 or 4 arguments"),
        (b"MSG a 1 r s 5", "MSG needs 3 or 4 arguments"),
        (b"HMSG a 1 5", "HMSG needs 4 or 5 arguments"),
        (b"HMSG a 1 9 3", "HMSG sizes out of range"),
        (b"HMSG a 1 -1 3", "HMSG sizes out of range"),
        (b"MSG a 1 -1", "MSG size out of range"),
        (b"MSG a one 1", "malformed MSG arguments"),
        (b"MSG \xff 1 1", "malformed MSG arguments"),
        (b"HMSG a 1 r\xff 1 1", "malformed MSG arguments"),
    ],
)
def test_the_reference_names_a_malformed_line(line: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words) as info:
        parse_msg_line(line)
    assert repr(line[4:])[2:-1] in str(info.value)


def reference(wire: bytes) -> tuple[list, bytes]:
    """The events of ``wire`` read one frame at a time with parse_msg_line alone, and what is left of it.

    Control lines other than a message's are left to a parser of their own (they are not what the fast
    entries read).  Raises ProtocolError as the reference does.
    """
    events: list = []
    pos = 0
    while True:
        nl = wire.find(b"\r\n", pos)
        if nl < 0:
            return events, wire[pos:]
        line = wire[pos:nl]
        if not line.startswith((b"MSG ", b"HMSG ")):
            events += Parser().feed(line + b"\r\n")
            pos = nl + 2
            continue
        subject, sid, reply, hlen, total = parse_msg_line(line)
        body = nl + 2
        stop = body + total
        if len(wire) < stop + 2:
            return events, wire[pos:]
        if wire[stop : stop + 2] != b"\r\n":
            raise ProtocolError("message payload is not followed by CRLF")
        split = body if hlen is None else body + hlen
        events.append(MsgEvent(subject, sid, reply, None if hlen is None else wire[body:split], wire[split:stop]))
        pos = stop + 2


def outcome(read: object) -> object:
    try:
        return read()  # type: ignore[operator]
    except ProtocolError:
        return ProtocolError


def frame(subject: str, sid: int, reply: str | None, header: bytes | None, payload: bytes) -> bytes:
    r = f" {reply}".encode() if reply else b""
    if header is None:
        return b"MSG %s %d%s %d\r\n%s\r\n" % (subject.encode(), sid, r, len(payload), payload)
    return b"HMSG %s %d%s %d %d\r\n%s%s\r\n" % (
        subject.encode(), sid, r, len(header), len(header) + len(payload), header, payload,
    )


SUBJECTS = st.from_regex(r"[a-z]{1,8}(\.[a-z0-9]{1,8}){0,2}", fullmatch=True)
REPLIES = st.one_of(st.none(), st.from_regex(r"_INBOX\.[a-z0-9]{1,10}", fullmatch=True))
BLOCKS = st.one_of(
    st.none(),
    st.just(b""),
    st.just(b"NATS/1.0\r\n\r\n"),
    st.binary(max_size=20).map(lambda v: b"NATS/1.0\r\nX: " + v.hex().encode() + b"\r\n\r\n"),
)
FRAMES = st.lists(
    st.tuples(SUBJECTS, st.integers(1, 10**6), REPLIES, BLOCKS, st.binary(max_size=60), st.booleans()),
    min_size=1,
    max_size=30,
)
DAMAGE = st.lists(st.tuples(st.integers(0, 4000), st.binary(min_size=1, max_size=3)), max_size=2)


def wire_of(frames: list, damage: list) -> bytes:
    wire = b"".join(frame(*f[:5]) + (b"PING\r\n" if f[5] else b"") for f in frames)
    for at, junk in damage:
        at %= len(wire) + 1
        wire = wire[:at] + junk + wire[at + len(junk) :]
    return wire


@settings(max_examples=400, deadline=None)
@given(frames=FRAMES, damage=DAMAGE)
def test_the_runs_and_the_general_loop_read_as_the_reference_does(frames: list, damage: list) -> None:
    """Whole (the runs take what they can), byte by byte (the general loop alone) and the reference: the same
    events, or the same refusal."""
    wire = wire_of(frames, damage)
    expected = outcome(lambda: reference(wire)[0])
    assert outcome(lambda: Parser(max_control_line=4096).feed(wire)) == expected
    one_by_one = Parser(max_control_line=4096)
    assert outcome(lambda: [ev for i in range(len(wire)) for ev in one_by_one.feed(wire[i : i + 1])]) == expected


@settings(max_examples=400, deadline=None)
@given(
    subject=SUBJECTS, sid=st.integers(1, 10**6), reply=REPLIES, header=BLOCKS, payload=st.binary(max_size=60),
    damage=DAMAGE,
)
def test_a_lone_frame_is_taken_as_the_reference_reads_it_or_left_to_feed(
    subject: str, sid: int, reply: str | None, header: bytes | None, payload: bytes, damage: list
) -> None:
    wire = wire_of([(subject, sid, reply, header, payload, False)], damage)
    one = Parser().feed_one(wire)
    if not damage and b"MSG " not in (header or b"") + payload:
        assert one == MsgEvent(subject, sid, reply, header, payload)
    if one is not None:
        events, rest = reference(wire)
        assert events == [one] and rest == b""


def replies_of(wire: bytes, args: list | None, step: int = 0) -> tuple:
    """What feed_replies makes of ``wire`` (fed in pieces of ``step``), up to the status that ends it."""
    parser = Parser()
    headers: list[bytes] = []
    payloads: list[bytes] = []
    events: list = []
    status = None
    for i in range(0, len(wire), step or len(wire) or 1):
        status, more = parser.feed_replies(wire[i : i + (step or len(wire))], headers, payloads, args)
        events += more
        if status is not None:
            break
    return headers, payloads, status, events, parser.buffered


@settings(max_examples=400, deadline=None)
@given(frames=FRAMES, damage=DAMAGE, pull=st.booleans(), step=st.integers(0, 50))
@example(  # damage that turns a sid of 10000 into 00000: the same sid, written otherwise
    frames=[("aaaaaa", 1000, None, b"", b"\0" * 17, False), ("aaaaaaaa.0.0000", 1, None, None, b"\0" * 13, True),
            ("aaaaaa", 10000, None, b"", b"\0" * 2, True), ("aaaaaaaa.0", 1, None, None, b"\0" * 5, False)],
    damage=[(851, b"0")], pull=True, step=0,
)
def test_a_bulk_requests_replies_are_cut_as_the_reference_reads_them(
    frames: list, damage: list, pull: bool, step: int
) -> None:
    """feed_replies against the reference: the same header blocks (empty for MSG, with ``args`` only) and
    payloads, each message's line less its operation and sizes, the status that ends it, the same events
    before it, or the same refusal; however the bytes arrive."""
    if not pull:  # a direct get's replies all have headers (one without is refused: see below)
        frames = [(s, sid, r, b"" if h is None else h, p, ping) for s, sid, r, h, p, ping in frames]
    status_block = b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\n\r\n"
    wire = wire_of(frames, damage) + frame("_INBOX.a", 1, None, status_block, b"") + b"PONG\r\n"
    try:
        events, _ = reference(wire)
    except ProtocolError:
        events = None
    got = outcome(lambda: replies_of(wire, [] if pull else None, step))
    if events is None or (not pull and any(type(e) is MsgEvent and e.header is None for e in events)):
        assert got is ProtocolError  # or, with MSG frames and no args, refused as not a bulk reply
        return
    messages = []
    for event in events:
        if type(event) is MsgEvent and (event.header or b"")[8:9] == b" ":
            status = event.header
            break
        messages.append(event)
    else:
        status = None
    args: list[bytes] = []
    assert got != ProtocolError
    assert replies_of(wire, args if pull else None, step)[:4] == (
        [e.header or b"" for e in messages if type(e) is MsgEvent],
        [e.data for e in messages if type(e) is MsgEvent],
        status,
        [e for e in messages if type(e) is not MsgEvent],
    )
    if pull:  # the line's words as sent; the reference gives the sid as a number (``00000`` is 0)
        words = [arg.split(b" ") for arg in args]
        assert [(w[0], int(w[1]), *w[2:]) for w in words] == [
            (e.subject.encode(), e.sid, *([e.reply.encode()] if e.reply else []))
            for e in messages if type(e) is MsgEvent
        ]


@settings(max_examples=400, deadline=None)
@given(
    words=st.lists(
        st.tuples(
            st.sampled_from([b"s.1", b"\xc3\xa4", b"\xff", b"r.2", b"", b"x\x00y"]),
            st.sampled_from([b"1", b"+1", b"01", b"x", b"", b"1_0"]),
            st.sampled_from([b"$JS.ACK.a.b.1.2.3.4.0", b"r\tq", b"", b"\xc3\xa4"]),
            st.sampled_from([b" ", b"  ", b"\t", b" \t", b"\x0b", b"\n"]),  # between the sid and the reply
            st.booleans(),  # with a header block
        ),
        min_size=1,
        max_size=6,
    ),
    pull=st.booleans(),
)
def test_bulk_lines_of_every_form_are_read_as_the_reference_reads_them(words: list, pull: bool) -> None:
    """Lines a server does not write (other whitespace, words that are no sid, UTF-8 or none): the read is
    taken as parse_msg_line reads each line, its ``args`` in single spaces, or refused as it refuses it."""
    wire = b""
    said = []  # each line's words between the operation and the sizes, one space apart
    block = b"NATS/1.0\r\n\r\n"
    for subject, sid, reply, gap, headed in words:
        if headed:
            line = b"HMSG %s %s%s%s %d %d" % (subject, sid, gap, reply, len(block), len(block) + 1)
            wire += line + b"\r\n" + block + b"p\r\n"
        else:
            line = b"MSG %s %s%s%s 1" % (subject, sid, gap, reply)
            wire += line + b"\r\np\r\n"
        said.append(b" ".join(line.split()[1 : -2 if headed else -1]))
    wire += frame("_INBOX.a", 1, None, b"NATS/1.0 204 EOB\r\n\r\n", b"")
    try:
        events, _ = reference(wire)
    except ProtocolError:
        events = None
    got = outcome(lambda: replies_of(wire, [] if pull else None))
    if events is None or (not pull and any(e.header is None for e in events)):
        assert got is ProtocolError
        return
    args: list[bytes] = []
    assert replies_of(wire, args if pull else None)[:3] == (
        [e.header or b"" for e in events[:-1]], [e.data for e in events[:-1]], events[-1].header
    )
    if pull:
        assert args == said


STORED = b"NATS/1.0\r\nA: b\r\nNats-Stream: S\r\nNats-Subject: x\r\nNats-Sequence: 1\r\n\r\n"
EOB = b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 2\r\n\r\n"


def hmsg(header: bytes, payload: bytes, sid: int = 1, reply: bytes = b"") -> bytes:
    args = b" ".join(x for x in (b"_INBOX.a", b"%d" % sid, reply) if x)
    return b"HMSG %s %d %d\r\n%s%s\r\n" % (args, len(header), len(header) + len(payload), header, payload)


@pytest.mark.parametrize(
    "second",
    [
        b"HMSG _INBOX.a 1 r %d %d",  # a reply subject after the sid
        b"HMSG _INBOX.a 1  %d %d",  # two spaces
        b"HMSG _INBOX.a 1 %d\t%d",  # a tab
        b"HMSG _INBOX.a 2 %d %d",  # another sid
        b"HMSG _INBOX.a 1 %d %d",  # the same as the first
    ],
)
def test_direct_get_replies_whose_lines_differ_from_the_first_are_read_as_the_reference_reads_them(
    second: bytes,
) -> None:
    block = b"NATS/1.0\r\nA: b\r\n\r\n"
    other = second % (len(block), len(block) + 1) + b"\r\n" + block + b"q\r\n"
    wire = hmsg(block, b"p") + other + hmsg(block, b"s") + hmsg(EOB, b"")
    events, _ = reference(wire)
    assert replies_of(wire, None)[:3] == ([block] * 3, [b"p", b"q", b"s"], EOB) and len(events) == 4


def test_bulk_replies_stop_at_the_status_and_keep_what_follows() -> None:
    data = hmsg(STORED, b"one\r\ntwo") + b"PING\r\n" + hmsg(STORED, b"") + hmsg(EOB, b"") + b"PONG\r\n"
    parser = Parser()
    headers: list[bytes] = []
    payloads: list[bytes] = []
    status, events = parser.feed_replies(data, headers, payloads)
    assert (headers, payloads) == ([STORED, STORED], [b"one\r\ntwo", b""])
    assert status == EOB and events == [Ping()]
    assert all(type(x) is bytes for x in headers + payloads)
    assert parser.buffered == len(b"PONG\r\n")
    assert parser.feed_replies(b"", headers, payloads) == (None, [Pong()])
    assert parser.buffered == 0 and len(headers) == 2


def test_a_large_reply_in_many_pieces_is_taken_once_whole() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB, with CRLF and "HMSG" inside
    data = hmsg(STORED, payload) + b"-ERR 'Slow Consumer'\r\n" + hmsg(EOB, b"")
    parser = Parser()
    headers: list[bytes] = []
    payloads: list[bytes] = []
    events: list = []
    status = None
    for i in range(0, len(data), 1000):
        assert status is None
        status, more = parser.feed_replies(data[i : i + 1000], headers, payloads)
        events += more
        assert bool(payloads) == (i + 1000 >= len(hmsg(STORED, payload)))  # nothing until the whole frame
    assert payloads == [payload] and status == EOB and events == [Err("Slow Consumer")]


def test_bulk_replies_with_args_take_a_consumers_deliveries_with_and_without_headers() -> None:
    """A pull consumer's messages: MSG frames too, and each one's subject, sid and ack reply go to ``args``."""
    plain = b"MSG orders.1 1 $JS.ACK.S.C.1.7.7.1700000000000000000.3 5\r\nhello\r\n"
    headed = hmsg(b"NATS/1.0\r\nA: b\r\n\r\n", b"x\r\ny", reply=b"$JS.ACK.S.C.1.8.8.1700000000000000001.2")
    done = hmsg(b"NATS/1.0 409 Batch Completed\r\n\r\n", b"")
    args: list[bytes] = []
    headers: list[bytes] = []
    payloads: list[bytes] = []
    parser = Parser()
    status, _ = parser.feed_replies(plain + headed + done, headers, payloads, args)
    assert args == [
        b"orders.1 1 $JS.ACK.S.C.1.7.7.1700000000000000000.3", b"_INBOX.a 1 $JS.ACK.S.C.1.8.8.1700000000000000001.2"
    ]
    assert headers == [b"", b"NATS/1.0\r\nA: b\r\n\r\n"] and payloads == [b"hello", b"x\r\ny"]
    assert status == b"NATS/1.0 409 Batch Completed\r\n\r\n" and parser.buffered == 0
    with pytest.raises(ProtocolError, match="malformed MSG"):
        Parser().feed_replies(b"MSG a 1 r x\r\n", [], [], [])


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"MSG _INBOX.a 1 3\r\nabc\r\n", "without headers"),
        (b"HMSG _INBOX.a 1 x 3\r\n", "malformed"),
        (b"HMSG _INBOX.a 1 9 3\r\nabc\r\n", "out of range"),
        (b"HMSG _INBOX.a 1 3 3\r\nabcXY", "not followed by CRLF"),
        (b"BOGUS\r\n", "unknown protocol operation"),
        (b"X" * 70_000, "too long"),
    ],
)
def test_bulk_replies_name_bad_frames(data: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words):
        Parser().feed_replies(data, [], [])


def test_an_empty_header_block_is_kept_empty_however_it_arrives() -> None:
    """HMSG with a header size of 0: an empty block (b""), whole, byte by byte or alone; MSG: None."""
    wire = b"HMSG a 1 0 2\r\nhi\r\nMSG b 2 2\r\nho\r\n"
    expected = [MsgEvent("a", 1, None, b"", b"hi"), MsgEvent("b", 2, None, None, b"ho")]
    assert Parser().feed(wire) == expected
    one_by_one = Parser()
    assert [ev for i in range(len(wire)) for ev in one_by_one.feed(wire[i : i + 1])] == expected
    assert Parser().feed_one(wire[:18]) == expected[0]


def test_frame_encoders() -> None:
    hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
    assert pub_frame(b"a.b", b"hi") == encode_pub("a.b", b"hi") == b"PUB a.b 2\r\nhi\r\n"
    assert pub_frame(b"a.b", b"hi", b"r.1") == encode_pub("a.b", b"hi", "r.1") == b"PUB a.b r.1 2\r\nhi\r\n"
    assert hpub_frame(b"a", hdr, b"xy") == encode_hpub("a", hdr, b"xy")
    assert hpub_frame(b"a", hdr, b"", b"r") == encode_hpub("a", hdr, b"", "r")
    assert Parser().feed(hpub_frame(b"x", hdr, b"yz", b"r").replace(b"HPUB x r", b"HMSG x 2 r", 1)) == [
        MsgEvent("x", 2, "r", hdr, b"yz")
    ]


def test_fast_ingest_frames() -> None:
    """The send loop's template and the general encoder give one frame; its reply carries the batch's state."""
    prefix = b"_INBOX.x.id.500.fail."
    assert encode_fast_ingest(b"s.1", prefix, 7, 1, b"", b"pay") == b"PUB s.1 _INBOX.x.id.500.fail.7.1.$FI 3\r\npay\r\n"
    assert FAST_APPEND_FRAME % (REQUEST_HEAD % (b"s.1", prefix), 7, 3, b"pay") == encode_fast_ingest(
        b"s.1", prefix, 7, 1, b"", b"pay"
    )
    hdr = encode({"A": "b"})
    assert encode_fast_ingest(b"s", prefix, 1, 0, hdr, b"p") == hpub_frame(b"s", hdr, b"p", prefix + b"1.0.$FI")


def test_header_blocks_built_without_a_headers_object() -> None:
    headers = Headers([("A", "1"), ("A", "2"), ("B", " x ")])
    assert block_of(encode_lines(headers)) == encode(headers) == headers.encode()
    assert encode_lines({}) == b"" and block_of(b"") == b"NATS/1.0\r\n\r\n"
    assert encode_line("A", "1") == b"A: 1\r\n"
    with pytest.raises(Exception, match="line break"):
        encode_line("A", "x\r\nB: smuggled")
    member = parse(BATCH_MEMBER_BLOCK % (b"A: 1\r\n", b"bid", 3))
    assert member.by_name == {"A": ["1"], "Nats-Batch-Id": ["bid"], "Nats-Batch-Sequence": ["3"]}
    assert parse(msg_id_block(b"A: 1\r\n", b"w-7")).by_name == {"A": ["1"], "Nats-Msg-Id": ["w-7"]}
    assert parse(msg_id_block(b"Nats-Msg-Id: mine\r\n", b"w-7")).by_name == {"Nats-Msg-Id": ["mine"]}
    assert header_value(STORED, b"Nats-Sequence") == b"1" and header_value(STORED, b"Nats-Subject") == b"x"
    assert header_value(STORED, b"Missing") is None and header_value(b"NATS/1.0\r\nA: b", b"A") is None


def test_a_delivery_block_is_read_in_one_match() -> None:
    stamp = b"2026-11-21T20:13:00.820235495Z"
    block = delivery_head("S", "a.b") + b"12\r\nNats-Time-Stamp: " + stamp + b"\r\n\r\n"
    assert delivery_fields(block) == (b"S", b"a.b", b"12", stamp)
    assert delivery_tail(block, delivery_head("S", "a.b")) == (b"12", stamp)
    assert delivery_tail(block, delivery_head("S", "a.c")) is None
    mine = block[:-2] + b"Mine: 1\r\n\r\n"
    assert delivery_fields(mine) is None and delivery_tail(mine, delivery_head("S", "a.b")) is None
