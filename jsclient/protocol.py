"""Sans-IO NATS wire protocol: a parser that turns bytes into events, and encoders.

Nothing here touches a socket, a thread or a clock, so every line of it can be
tested by feeding bytes (whole, byte by byte, split anywhere).  The connection's
reader thread owns one :class:`Parser`; it is not safe to share one parser
between threads, and it needs no lock because only that thread uses it.

The parser keeps unconsumed input in one ``bytearray`` with a scan offset and
compacts it once per :meth:`Parser.feed`, so a large payload arriving in many
chunks is copied a bounded number of times (no quadratic re-scanning).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from .errors import BadSubjectError, MaxPayloadError, ProtocolError

#: Longest control line (everything up to CRLF that is not payload) we accept.
#: INFO lines carry a server's connect URLs, so this is larger than the
#: server's own limit for client lines.
MAX_CONTROL_LINE = 64 * 1024

CRLF = b"\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"


class Info:
    """The server's INFO: its id, limits, features and cluster URLs."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"Info({self.data!r})"


class MsgEvent(msgspec.Struct):
    """A MSG or HMSG frame: ``header`` is the raw NATS/1.0 block or None.

    :class:`jsclient.Msg` subclasses this, and the connection's parser builds
    Msg objects directly, so a message is allocated once on its way in.  A
    msgspec Struct is built in C: parsing a run of acks took 740 ns a frame
    with a Python ``__init__`` and 580 ns with this.
    """

    subject: str
    sid: int
    reply: str | None
    header: bytes | None
    data: bytes

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(subject={self.subject!r}, sid={self.sid}, reply={self.reply!r}, "
            f"header={self.header!r}, data={self.data[:64]!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MsgEvent):
            return NotImplemented
        return (self.subject, self.sid, self.reply, self.header, self.data) == (
            other.subject,
            other.sid,
            other.reply,
            other.header,
            other.data,
        )

    __hash__ = None  # type: ignore[assignment]


class Ping:
    """The server asks for a PONG."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Ping()"

    def __eq__(self, other: object) -> bool:
        return type(other) is Ping

    __hash__ = object.__hash__


class Pong:
    """The answer to one of our PINGs."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Pong()"

    def __eq__(self, other: object) -> bool:
        return type(other) is Pong

    __hash__ = object.__hash__


class Ok:
    """``+OK`` (only sent in verbose mode)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Ok()"

    def __eq__(self, other: object) -> bool:
        return type(other) is Ok

    __hash__ = object.__hash__


class Err:
    """``-ERR 'text'``: the server's error text without the quotes."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Err({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Err) and other.text == self.text

    __hash__ = None  # type: ignore[assignment]


Event = Info | MsgEvent | Ping | Pong | Ok | Err

_PING = Ping()
_PONG = Pong()
_OK = Ok()


def _bad(what: str, data: bytes | bytearray) -> ProtocolError:
    return ProtocolError(f"{what}: {bytes(data[:200])!r}")


#: The largest input :meth:`Parser.feed_one` looks at: bigger reads are streams, not a lone reply.
ONE_FRAME_MAX = 4096


class Parser:
    """Incremental parser: ``feed(chunk)`` returns the events completed by it."""

    __slots__ = ("_buf", "_pending", "_pos", "max_control_line", "msg_class")

    def __init__(self, max_control_line: int = MAX_CONTROL_LINE, msg_class: type[MsgEvent] = MsgEvent) -> None:
        self.msg_class = msg_class
        self._buf = bytearray()
        self._pos = 0
        # (subject, sid, reply, header_len, total_len) of a MSG/HMSG whose payload is incomplete.
        self._pending: tuple[str, int, str | None, int, int] | None = None
        self.max_control_line = max_control_line

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into events."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
        buf = self._buf
        if self._pos:
            del buf[: self._pos]
        buf += data
        events: list[Event] = []
        append = events.append
        pos = 0
        size = len(buf)
        pending = self._pending
        make = self.msg_class
        view = memoryview(buf)
        run = True  # one _msg_run per feed at most, so mixed input costs one extra split, not one per frame
        try:
            while True:
                if run and pending is None and buf.startswith(b"MSG ", pos):
                    run = False
                    pos = self._msg_run(view[pos:size], pos, append)
                    continue
                if pending is not None:
                    subject, sid, reply, hlen, total = pending
                    stop = pos + total
                    if size < stop + 2:
                        break
                    if buf[stop] != 13 or buf[stop + 1] != 10:
                        raise _bad("message payload is not followed by CRLF", buf[stop : stop + 2])
                    if hlen:
                        header: bytes | None = bytes(view[pos : pos + hlen])
                        payload = bytes(view[pos + hlen : stop])
                    else:
                        header = None
                        payload = bytes(view[pos:stop])
                    append(make(subject, sid, reply, header, payload))
                    pos = stop + 2
                    pending = None
                    continue
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    if size - pos > self.max_control_line:
                        raise _bad("control line too long", buf[pos : pos + 200])
                    break
                if nl - pos > self.max_control_line:
                    raise _bad("control line too long", buf[pos : pos + 200])
                if buf.startswith(b"MSG ", pos):
                    # Fast path: a plain MSG whose payload is already here.
                    args = buf[pos + 4 : nl].split()
                    if len(args) == 3:
                        start = nl + 2
                        try:
                            stop = start + int(args[2])
                            sid = int(args[1])
                            subject = args[0].decode()
                        except ValueError:  # UnicodeDecodeError included
                            raise _bad("malformed MSG arguments", buf[pos:nl]) from None
                        if stop + 2 <= size and stop >= start and buf[stop] == 13 and buf[stop + 1] == 10:
                            append(make(subject, sid, None, None, bytes(view[start:stop])))
                            pos = stop + 2
                            continue
                    pending = self._msg_args(buf[pos + 4 : nl], False)
                elif buf.startswith(b"HMSG ", pos):
                    end = self._hmsg_run(buf, view, pos, size, append)
                    if end != pos:
                        pos = end
                        continue
                    pending = self._msg_args(buf[pos + 5 : nl], True)
                else:
                    pending = self._control(bytes(buf[pos:nl]), append)
                pos = nl + 2
        finally:
            view.release()
            self._pos = pos
            self._pending = pending
        return events

    def feed_one(self, data: bytes | bytearray | memoryview) -> MsgEvent | None:
        """``data`` as its one message when it is exactly one whole MSG or HMSG frame and nothing is buffered.

        A request's reply usually arrives alone, and this takes it in a few
        steps (a third of :meth:`feed`'s time).  None means "not that case":
        :meth:`feed` then takes the same bytes, so the result never differs.
        """
        if len(data) > ONE_FRAME_MAX or self._pending is not None or self._pos != len(self._buf):
            return None
        raw = bytes(data)
        nl = raw.find(b"\r\n")
        if nl < 0 or nl > self.max_control_line or raw.find(b"MSG ", nl) >= 0:
            return None  # no line yet, or (likely) more than one frame: not worth parsing twice
        if raw.startswith(b"HMSG "):
            args = raw[5:nl].split()
            if len(args) == 5:
                subject, sid, reply, hsize, tsize = args
            elif len(args) == 4:
                subject, sid, hsize, tsize = args
                reply = b""
            else:
                return None
        elif raw.startswith(b"MSG "):
            args = raw[4:nl].split()
            hsize = b"0"
            if len(args) == 4:
                subject, sid, reply, tsize = args
            elif len(args) == 3:
                subject, sid, tsize = args
                reply = b""
            else:
                return None
        else:
            return None
        try:
            hlen, total, sid_n = int(hsize), int(tsize), int(sid)
            subject_s, reply_s = subject.decode(), reply.decode() if reply else None
        except ValueError:  # UnicodeDecodeError included: feed() names it
            return None
        body = nl + 2
        split = body + hlen
        stop = body + total
        if hlen < 0 or total < hlen or stop + 2 != len(raw) or raw[stop:] != b"\r\n":
            return None
        header = raw[body:split] if raw[0] == 72 else None  # 72: "H"
        return self.msg_class(subject_s, sid_n, reply_s, header, raw[split:stop])

    def feed_reply(self, data: bytes | bytearray | memoryview, line: bytes) -> OwnFrame | None:
        """``data`` as (frame, body, split, stop) when it is exactly one whole frame whose control line
        starts with ``line`` (``MSG <subject> <sid> ``, with an H before it for HMSG) and nothing is buffered.

        A request() caller reading its own reply knows the reply's subject and
        sid: one comparison stands for parsing and decoding them (half of
        :meth:`feed_one`'s work).  The header block is ``frame[body:split]``
        (empty for MSG) and the payload ``frame[split:stop]``.  None means
        "not that case": :meth:`feed` then takes the same bytes, so the
        result never differs.
        """
        if len(data) > ONE_FRAME_MAX or self._pending is not None or self._pos != len(self._buf):
            return None
        raw = data if type(data) is bytes else bytes(data)
        if raw[:1] == b"H":
            at = 1 + len(line)
            nl = raw.find(b"\r\n", at)
            if nl < 0 or nl > self.max_control_line or not raw.startswith(line, 1):
                return None
            hsize, _, tsize = raw[at:nl].partition(b" ")
            if not (hsize.isdigit() and tsize.isdigit()):  # ASCII digits only: what int() takes and feed() too
                return None
            body = nl + 2
            split = body + int(hsize)
            if split == body:
                return None  # an empty header block ("0", "00"): left to feed(), which keeps it as b""
        else:
            at = len(line)
            nl = raw.find(b"\r\n", at)
            if nl < 0 or nl > self.max_control_line or not raw.startswith(line):
                return None
            tsize = raw[at:nl]
            if not tsize.isdigit():
                return None
            body = split = nl + 2
        stop = body + int(tsize)
        if split > stop or stop + 2 != len(raw) or raw[stop:] != b"\r\n":
            return None
        return raw, body, split, stop

    def feed_shaped(self, data: bytes, line: bytes, shape: ReplyShape[Any]) -> tuple[bytes, ...] | None:
        """``shape``'s groups of ``data`` when it is exactly one whole frame whose control line starts
        with ``line`` (``shape.line`` then REPLY_LINE), of that shape, and nothing is buffered.

        One match stands for the whole of :meth:`feed_reply` and for reading
        the header block after it; the sizes on the control line must be
        those of the block and payload matched, so a frame followed by
        another, or cut short, is not taken.  None: :meth:`feed` decides.
        A frame equal to the last one a repeating shape matched (but for its
        line, where the token differs) gives that frame's groups again.
        """
        if self._pending is not None or self._pos != len(self._buf) or not data.startswith(line):
            return None
        start = len(line)
        last = shape.last
        if last is not None and len(data) - start == len(last[0]) and data.endswith(last[0]):
            return last[1]  # byte for byte the frame matched last time after its line: the same groups
        m = shape.pattern.fullmatch(data, start)
        if m is None:
            return None
        groups = m.groups()
        payload = groups[-1]
        if shape.headers:
            block = groups[2]
            if int(groups[0]) != len(block) or int(groups[1]) != len(block) + len(payload):
                return None
        elif int(groups[0]) != len(payload):
            return None
        if shape.repeats and len(data) - start <= REPEAT_MAX:
            shape.last = (data[start:], groups)  # one store: a thread reading it sees both or neither
        return groups

    def _msg_run(self, rest: memoryview, pos: int, append: Any) -> int:
        """Parse the run of plain MSG frames at the start of ``rest`` (input from ``pos``); return where it ends.

        Replies, acks and core messages arrive as long runs of MSG frames
        without headers.  One split at CRLF cuts a whole run into control
        lines and payloads, far cheaper than finding each frame's bounds.  The
        run stops at the first frame it cannot take whole and sure: another
        operation, a payload containing CRLF (its length will not match),
        anything malformed, or the end of the input.  The frame-by-frame loop
        goes on from there, so the events are the same as when fed byte by byte.
        """
        lines = bytes(rest).split(b"\r\n")
        make = self.msg_class
        limit = self.max_control_line
        last = len(lines) - 1  # lines[last] is not followed by CRLF (yet)
        i = 0
        while i + 1 < last:
            line = lines[i]
            payload = lines[i + 1]
            if not line.startswith(b"MSG ") or len(line) > limit:
                break
            args = line.split()  # after "MSG ", as the frame-by-frame loop splits it
            try:
                if len(args) == 4:
                    _, subject, sid, size = args
                    reply = None
                elif len(args) == 5:
                    _, subject, sid, reply_bytes, size = args
                    reply = reply_bytes.decode()
                else:
                    break
                if int(size) != len(payload):
                    break
                msg = make(subject.decode(), int(sid), reply, None, payload)
            except ValueError:  # UnicodeDecodeError included: the frame-by-frame loop names it
                break
            append(msg)
            pos += len(line) + len(payload) + 4
            i += 2
        return pos

    def _hmsg_run(self, buf: bytearray, view: memoryview, pos: int, size: int, append: Any) -> int:
        """Parse the run of whole HMSG frames at ``pos``; return where it ends (``pos``: none taken).

        JetStream deliveries and direct-get batches arrive as long runs of
        HMSG frames to one subject.  This loop takes each frame in one go
        (control line, header block and payload) and decodes a repeated
        subject once; it stops at anything it cannot take whole and sure,
        and the frame-by-frame loop goes on from there with the same result.
        """
        make = self.msg_class
        limit = self.max_control_line
        find = buf.find
        last_raw: bytes | bytearray = b""
        last_subject = ""
        start = pos
        while buf.startswith(b"HMSG ", pos):
            nl = find(b"\r\n", pos, pos + limit + 2)
            if nl < 0:
                break
            args = buf[pos + 5 : nl].split()
            try:
                if len(args) == 4:
                    raw, sid, hsize, tsize = args
                    reply = None
                elif len(args) == 5:
                    raw, sid, rep, hsize, tsize = args
                    reply = rep.decode()
                else:
                    break
                hlen = int(hsize)
                body = nl + 2
                stop = body + int(tsize)
                if hlen < 0 or stop < body + hlen or stop + 2 > size or buf[stop] != 13 or buf[stop + 1] != 10:
                    break
                if raw != last_raw:
                    last_subject = raw.decode()
                    last_raw = raw
                split = body + hlen
                msg = make(last_subject, int(sid), reply, bytes(view[body:split]), bytes(view[split:stop]))
            except ValueError:  # UnicodeDecodeError included: the frame-by-frame loop names it
                break
            append(msg)
            pos = stop + 2
        return pos if pos != start else start

    @staticmethod
    def _msg_args(line: bytearray | bytes, with_header: bool) -> tuple[str, int, str | None, int, int]:
        args = line.split()
        try:
            if with_header:
                if len(args) == 4:
                    subj, sid, hsize, tsize = args
                    reply = None
                elif len(args) == 5:
                    subj, sid, rep, hsize, tsize = args
                    reply = rep.decode()
                else:
                    raise _bad("HMSG needs 4 or 5 arguments", line)
                hlen = int(hsize)
                total = int(tsize)
                if hlen < 0 or total < hlen:
                    raise _bad("HMSG sizes out of range", line)
            else:
                if len(args) == 3:
                    subj, sid, tsize = args
                    reply = None
                elif len(args) == 4:
                    subj, sid, rep, tsize = args
                    reply = rep.decode()
                else:
                    raise _bad("MSG needs 3 or 4 arguments", line)
                hlen = 0
                total = int(tsize)
                if total < 0:
                    raise _bad("MSG size out of range", line)
            return subj.decode(), int(sid), reply, hlen, total
        except (ValueError, UnicodeDecodeError):
            raise _bad("malformed MSG arguments", line) from None

    def _control(self, line: bytes, append: Any) -> tuple[str, int, str | None, int, int] | None:
        op, _, rest = line.partition(b" ")
        if not rest and b"\t" in op:
            op, _, rest = line.partition(b"\t")
        op = op.upper()
        if op == b"PING":
            append(_PING)
        elif op == b"PONG":
            append(_PONG)
        elif op == b"+OK":
            append(_OK)
        elif op == b"-ERR":
            text = rest.strip().decode("utf-8", "replace")
            if len(text) >= 2 and text[0] == text[-1] == "'":
                text = text[1:-1]
            append(Err(text))
        elif op == b"INFO":
            try:
                data = json.loads(rest)
            except ValueError:
                raise _bad("INFO is not valid JSON", line) from None
            if not isinstance(data, dict):
                raise _bad("INFO is not a JSON object", line)
            append(Info(data))
        elif op == b"MSG":
            return self._msg_args(rest, False)
        elif op == b"HMSG":
            return self._msg_args(rest, True)
        else:
            raise _bad("unknown protocol operation", line)
        return None


def split_replies(
    buf: bytes,
    pos: int,
    headers: list[bytes],
    payloads: list[bytes],
    max_control_line: int = MAX_CONTROL_LINE,
    *,
    args: list[bytes] | None = None,
) -> tuple[int, bytes | None, list[bytes]]:
    """Cut whole HMSG frames at ``pos`` into header blocks and payloads, up to the first status reply.

    For a link that carries nothing but the replies to one bulk request
    (:class:`jsclient.jetstream.bulk.BulkReader`): no event object per
    message, and neither subject nor sid is decoded.  ``buf`` is immutable
    ``bytes`` so that each slice is the value itself, copied once.  Returns
    where parsing stopped, the header block of the status reply that ended
    the batch (None: more bytes are needed), and the other control lines met
    on the way (PING, INFO, -ERR, ...) for the caller to act on.

    With ``args`` (a pull consumer's deliveries, whose subject and ack reply
    are the message's details): MSG frames are taken too, with an empty
    header block, and each message's ``<subject> <sid> <reply>`` goes to
    ``args``.
    """
    size = len(buf)
    find = buf.find
    rfind = buf.rfind
    controls: list[bytes] = []
    add_header = headers.append
    add_payload = payloads.append
    while True:
        nl = find(b"\r\n", pos, pos + max_control_line + 2)
        if nl < 0:
            if size - pos > max_control_line:
                raise _bad("control line too long", buf[pos : pos + 200])
            return pos, None, controls
        last_space = rfind(b" ", pos, nl)  # [H]MSG <subject> <sid> [reply] [<header size>] <total size>
        body = nl + 2
        if buf.startswith(b"HMSG ", pos):
            start = pos + 5
            size_space = rfind(b" ", start, last_space)
            try:
                split = body + int(buf[size_space + 1 : last_space])
                stop = body + int(buf[last_space + 1 : nl])
            except ValueError:
                raise _bad("malformed HMSG arguments", buf[pos:nl]) from None
        elif buf.startswith(b"MSG ", pos) and args is not None:
            start = pos + 4
            split = body
            try:
                stop = body + int(buf[last_space + 1 : nl])
            except ValueError:
                raise _bad("malformed MSG arguments", buf[pos:nl]) from None
            size_space = last_space
        else:
            if buf.startswith(b"MSG ", pos):
                raise _bad("a bulk reply without headers", buf[pos:nl])
            controls.append(buf[pos:nl])
            pos = body
            continue
        if stop + 2 > size:
            return pos, None, controls
        if split < body or stop < split or buf[stop] != 13 or buf[stop + 1] != 10:
            raise _bad("message sizes do not match its payload", buf[pos:nl])
        header = buf[body:split]
        if header[8:9] == b" ":  # "NATS/1.0 <status>": the end of the batch (or its error)
            return stop + 2, header, controls
        if args is not None:
            args.append(buf[start:size_space])
        add_header(header)
        add_payload(buf[split:stop])
        pos = stop + 2


# -- subjects --------------------------------------------------------------

_WHITESPACE = (" ", "\t", "\r", "\n")


def _check_tokens(subject: str, what: str) -> list[str]:
    if not isinstance(subject, str):
        raise BadSubjectError(f"{what} must be a str, not {type(subject).__name__}")
    if not subject:
        raise BadSubjectError(f"{what} must not be empty")
    for ch in _WHITESPACE:
        if ch in subject:
            raise BadSubjectError(f"{what} {subject!r} contains whitespace")
    tokens = subject.split(".")
    if "" in tokens:
        raise BadSubjectError(f"{what} {subject!r} has an empty token")
    return tokens


def check_publish_subject(subject: str, what: str = "subject") -> None:
    """A subject we may publish to: no wildcard tokens."""
    for token in _check_tokens(subject, what):
        if token == "*" or token == ">":
            raise BadSubjectError(f"{what} {subject!r} contains a wildcard; publish needs a literal subject")


def check_subscribe_subject(subject: str, what: str = "subject") -> None:
    """A subject we may subscribe to: ``*`` tokens anywhere, ``>`` only last."""
    tokens = _check_tokens(subject, what)
    for token in tokens[:-1]:
        if token == ">":
            raise BadSubjectError(f"{what} {subject!r}: '>' must be the last token")


def check_queue_name(queue: str) -> None:
    if not isinstance(queue, str):
        raise BadSubjectError(f"queue must be a str, not {type(queue).__name__}")
    if not queue:
        raise BadSubjectError("queue must not be empty")
    for ch in _WHITESPACE:
        if ch in queue:
            raise BadSubjectError(f"queue {queue!r} contains whitespace")


# -- encoders --------------------------------------------------------------


def encode_connect(options: dict[str, Any]) -> bytes:
    return b"CONNECT " + json.dumps(options, separators=(",", ":")).encode() + CRLF


#: Frame templates for loops that build many frames from subjects already checked and
#: encoded (batch publish, the Spark sink, bulk reads): ``template % (...)``, nothing else.
PUB_FRAME = b"PUB %s %d\r\n%s\r\n"  # subject, payload size, payload
PUB_REPLY_FRAME = b"PUB %s %s %d\r\n%s\r\n"  # subject, reply, payload size, payload
HPUB_FRAME = b"HPUB %s %d %d\r\n%s%s\r\n"  # subject, header size, total size, header, payload
HPUB_REPLY_FRAME = b"HPUB %s %s %d %d\r\n%s%s\r\n"  # subject, reply, header size, total size, header, payload
#: A request's PUB line in two parts: a head cached per subject, then its reply token and size.
REQUEST_HEAD = b"PUB %s %s"  # subject, reply inbox prefix
REQUEST_LINE = b"%s%d %d\r\n"  # request head, reply token, payload size
REQUEST_FRAME = b"%s%d %d\r\n%s\r\n"  # the same with the payload: a whole frame in one step
#: The start of the reply's control line that :meth:`Parser.feed_reply` expects.
REPLY_LINE = b"MSG %s%d %d "  # reply inbox prefix, reply token, sid
#: One whole reply frame as :meth:`Parser.feed_reply` finds it: the bytes, where the header block
#: starts, where the payload starts (the same for MSG) and where it stops.
OwnFrame = tuple[bytes, int, int, int]
R = TypeVar("R")


class ReplyShape(Generic[R]):
    """What a request() caller knows of its reply's frame, so that it reads it in one match.

    ``pattern`` matches what follows ``HMSG <subject> <sid> `` (or ``MSG``
    without ``headers``) in the whole frame: its groups are the sizes, the
    header block, the block's own groups and, last, the payload (see
    :func:`reply_pattern`); :meth:`Parser.feed_shaped` checks the sizes.
    ``read`` makes the caller's answer of the groups, or None for "not what
    I know" (a status, a message with headers of its own): the reply then
    becomes a message as any other.  ``read`` runs on the caller's thread
    only and must not raise.  A JetStream read takes a direct get's sequence
    and time, or a publish ack, this way, without a message in between.
    With ``repeats``, ``read`` is given the very same groups (the same tuple)
    for a frame that came again: a reader whose answer cannot change under
    its caller may keep it for that case.
    """

    __slots__ = ("headers", "last", "line", "pattern", "read", "repeats")

    def __init__(
        self,
        pattern: re.Pattern[bytes],
        read: Callable[[tuple[bytes, ...]], R | None],
        *,
        headers: bool,
        repeats: bool = False,
    ) -> None:
        self.pattern = pattern
        self.read = read
        self.headers = headers
        self.line = b"H" if headers else b""  # what comes before REPLY_LINE
        #: The answer may come again byte for byte (a key or subject read again, its value unchanged):
        #: the last frame of at most REPEAT_MAX bytes is kept, after its line, with its groups, and
        #: the same frame again costs a comparison instead of a match.  Not for answers that differ
        #: every time (a publish ack's sequence), which would only pay for the copy.
        self.repeats = repeats
        self.last: tuple[bytes, tuple[bytes, ...]] | None = None


#: The largest frame (after its line) a repeating :class:`ReplyShape` keeps: a shape is kept per key
#: or subject (up to PREFIX_CACHE_MAX of them), each holding the frame and its groups, about twice this.
REPEAT_MAX = 1024


def reply_pattern(block: bytes | None) -> re.Pattern[bytes]:
    """For a :class:`ReplyShape`: an HMSG reply whose header block matches ``block`` (a regular expression,
    with groups of its own or none), or with ``block`` None a MSG reply.

    Groups: HMSG (header size, total size, block, the block's groups..., payload); MSG (size, payload).
    """
    if block is None:
        return re.compile(rb"(\d+)\r\n(.*)\r\n", re.DOTALL)
    return re.compile(rb"(\d+) (\d+)\r\n(" + block + rb")(.*)\r\n", re.DOTALL)


def encode_pub(subject: str, payload: bytes, reply: str | None = None) -> bytes:
    if reply:
        return PUB_REPLY_FRAME % (subject.encode(), reply.encode(), len(payload), payload)
    return PUB_FRAME % (subject.encode(), len(payload), payload)


def encode_hpub(subject: str, header: bytes, payload: bytes, reply: str | None = None) -> bytes:
    hlen = len(header)
    if reply:
        return HPUB_REPLY_FRAME % (subject.encode(), reply.encode(), hlen, hlen + len(payload), header, payload)
    return HPUB_FRAME % (subject.encode(), hlen, hlen + len(payload), header, payload)


def encode_sub(subject: str, sid: int, queue: str | None = None) -> bytes:
    if queue:
        return b"SUB %s %s %d\r\n" % (subject.encode(), queue.encode(), sid)
    return b"SUB %s %d\r\n" % (subject.encode(), sid)


def encode_unsub(sid: int, max_msgs: int | None = None) -> bytes:
    if max_msgs:
        return b"UNSUB %d %d\r\n" % (sid, max_msgs)
    return b"UNSUB %d\r\n" % sid


#: Subjects remembered by a :class:`PubEncoder` (and the request heads beside it)
#: before the cache starts again: every request has a reply subject of its own,
#: and a responder must not keep one entry per request.
PREFIX_CACHE_MAX = 4096
K = TypeVar("K")
V = TypeVar("V")


def remember(cache: dict[K, V], key: K, value: V) -> V:
    """Keep ``value`` in a cache of checked subjects (or what is built of them), started again when full."""
    if len(cache) >= PREFIX_CACHE_MAX:
        cache.clear()
    cache[key] = value
    return value


class PubEncoder:
    """PUB/HPUB frames for one connection, with the caches that make a repeated subject cost one dict lookup.

    ``lines`` maps a subject to ``(payload size, PUB line)`` of its last
    plain publish (size -1: validated, no line yet); a subject is in it only
    once it passed :func:`check_publish_subject`.  Any thread may use it:
    dict reads and writes are atomic, and a race only builds a line twice.
    """

    __slots__ = ("lines", "max_payload", "own_inbox")

    def __init__(self) -> None:
        self.lines: dict[str, tuple[int, bytes]] = {}
        self.max_payload = 1024 * 1024
        self.own_inbox = "\0"  # replies under our own request inbox need no check

    def set_max_payload(self, max_payload: int) -> None:
        if max_payload != self.max_payload:
            self.max_payload = max_payload
            self.lines.clear()  # cached lines were checked against the old limit

    def check_once(self, subject: str) -> None:
        """Validate a subject not seen lately and remember it (at most PREFIX_CACHE_MAX of them)."""
        if subject not in self.lines:
            check_publish_subject(subject)
            remember(self.lines, subject, (-1, b""))

    def pub_line(self, subject: str, size: int) -> bytes:
        """The ``PUB <subject> <size>`` line, validated (once per subject) and cached for this size."""
        self.check_once(subject)
        if size > self.max_payload:
            raise MaxPayloadError(
                f"payload of {size} bytes exceeds the server's max_payload of {self.max_payload} bytes"
            )
        line = b"PUB %s %d\r\n" % (subject.encode(), size)
        self.lines[subject] = (size, line)
        return line

    def frame(self, subject: str, payload: bytes, reply: str | None, header: bytes) -> bytes:
        """A whole PUB (or HPUB, with an encoded ``header``) frame, everything checked."""
        if subject not in self.lines:
            self.check_once(subject)
        if reply is not None and reply not in self.lines and not reply.startswith(self.own_inbox):
            check_publish_subject(reply, "reply subject")
        size = len(payload) + len(header)
        if size > self.max_payload:
            raise MaxPayloadError(
                f"message of {size} bytes (headers included) exceeds the server's "
                f"max_payload of {self.max_payload} bytes"
            )
        if header:
            return encode_hpub(subject, header, payload, reply)
        return encode_pub(subject, payload, reply)
