"""The parser: bytes in, events out; the one reading of a MSG/HMSG control line and the entries over it.

:func:`parse_msg_line` is the one reading of a message's control line; the
fast entries (:meth:`Parser.feed_one`, ``feed_reply``, ``feed_shaped``,
``feed_replies``, the runs of ``feed``) take only what they can take whole
and sure, so every entry gives the general loop's events and errors (how
each does: docs/guides/internals.rst, "The parser's entries").  Sans-IO: no socket, thread or clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ..errors import ProtocolError
from .events import Err, Event, Info, MsgEvent, Ok, Ping, Pong

#: Longest control line (everything up to CRLF that is not payload) we accept.
#: INFO lines carry a server's connect URLs, so this is larger than the
#: server's own limit for client lines.
MAX_CONTROL_LINE = 64 * 1024

_PING = Ping()
_PONG = Pong()
_OK = Ok()


def _bad(what: str, data: bytes | bytearray) -> ProtocolError:
    return ProtocolError(f"{what}: {bytes(data[:200])!r}")


#: What a MSG or HMSG control line says: subject, sid, reply subject (None: none), header size (None
#: for MSG: no block, where HMSG's may be empty) and total size (header block and payload).
MsgLine = tuple[str, int, str | None, int | None, int]


def parse_msg_line(line: bytes | bytearray) -> MsgLine:
    """Read a whole MSG or HMSG control line (without its CRLF; the operation in any case, as the caller
    found it): the one reading of such a line.  Anything malformed raises ProtocolError naming the line."""
    args = line.split()
    hlen: int | None = None
    try:
        if len(args[0]) == 4:  # HMSG
            if len(args) == 5:
                _, subject, sid, hsize, tsize = args
                reply = None
            elif len(args) == 6:
                _, subject, sid, rep, hsize, tsize = args
                reply = rep.decode()
            else:
                raise _bad("HMSG needs 4 or 5 arguments", line)
            hlen = int(hsize)
            total = int(tsize)
            if hlen < 0 or total < hlen:
                raise _bad("HMSG sizes out of range", line)
        else:
            if len(args) == 4:
                _, subject, sid, tsize = args
                reply = None
            elif len(args) == 5:
                _, subject, sid, rep, tsize = args
                reply = rep.decode()
            else:
                raise _bad("MSG needs 3 or 4 arguments", line)
            total = int(tsize)
            if total < 0:
                raise _bad("MSG size out of range", line)
        return subject.decode(), int(sid), reply, hlen, total
    except ValueError:  # UnicodeDecodeError included
        raise _bad("malformed MSG arguments", line) from None


#: Every byte but the whitespace ``bytes.split()`` cuts at.
_NOT_SPACE = bytes(set(range(256)) - set(b" \t\n\x0b\x0c\r"))


def _plain(lines: list[bytes], fields: int) -> bool:
    """Whether each of ``lines`` (a control line less its operation and sizes) is ``fields`` words of
    ASCII one space apart, without other whitespace, the second all digits: words :func:`parse_msg_line`
    reads as they are, a sid among them.  For a whole read in a few C calls: reading each line would cost
    a bulk read a third more time, and even counting each line's spaces a tenth."""
    text = b"\n".join(lines)
    gaps = b" " * (fields - 1)
    words = text.split()
    return (
        text.translate(None, _NOT_SPACE) == (gaps + b"\n") * (len(lines) - 1) + gaps  # the spaces: no more, no other
        and len(words) == fields * len(lines)  # and none of them next to another, or at an end
        and text.isascii()
        and b"".join(words[1::fields]).isdigit()
    )


#: What :meth:`Parser.feed_replies` makes of a read besides the messages: the status block (None: none
#: yet), the other events, where it stopped, and the size the frame begun there needs.
_Cut = tuple[bytes | None, list[Event], int, int]
#: The largest input :meth:`Parser.feed_one` looks at: bigger reads are streams, not a lone reply.
ONE_FRAME_MAX = 4096
#: One whole reply frame as :meth:`Parser.feed_reply` finds it: the bytes, where the header block
#: starts, where the payload starts (the same for MSG) and where it stops.
OwnFrame = tuple[bytes, int, int, int]
R = TypeVar("R")


class Parser:
    """Incremental parser: ``feed(chunk)`` returns the events completed by it.

    The connection's reader thread owns one (or a caller holding its read
    token, see :mod:`jsclient.core.reader`); a bulk reader owns one for its
    link.  It is not safe to share one parser between threads, and it needs
    no lock because only its owner uses it.  Unconsumed input is kept in one
    ``bytearray`` with a scan offset, compacted once per feed, so a large
    payload arriving in many chunks is copied a bounded number of times.
    """

    __slots__ = ("_buf", "_need", "_pending", "_pos", "max_control_line", "msg_class")

    def __init__(self, max_control_line: int = MAX_CONTROL_LINE, msg_class: type[MsgEvent] = MsgEvent) -> None:
        self.msg_class = msg_class
        self._buf = bytearray()
        self._pos = 0
        # The control line of a MSG/HMSG whose payload is incomplete (feed() only).
        self._pending: MsgLine | None = None
        # feed_replies(): the buffered size the frame at _pos needs to be whole (0: not known).
        self._need = 0
        self.max_control_line = max_control_line

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into events."""
        return len(self._buf) - self._pos

    def take_buffered(self) -> tuple[bytes, int]:
        """Take out what :meth:`feed_replies` kept (a frame begun, or what followed a status), with the size the
        frame begun needs to be whole (0: not known yet): for a caller that cuts runs of frames itself, then
        feeds the parser the rest from a frame's start."""
        kept, need = bytes(memoryview(self._buf)[self._pos :]), self._need
        del self._buf[:]
        self._pos = self._need = 0
        return kept, need

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
        limit = self.max_control_line
        view = memoryview(buf)
        run = True  # one _msg_run per feed at most, so mixed input costs one extra split, not one per frame
        try:
            while True:
                if pending is None:
                    if run and buf.startswith(b"MSG ", pos):
                        run = False
                        pos = self._msg_run(view[pos:size], pos, append)
                        continue
                    nl = buf.find(b"\r\n", pos)
                    if nl < 0:
                        if size - pos > limit:
                            raise _bad("control line too long", buf[pos : pos + 200])
                        break
                    if nl - pos > limit:
                        raise _bad("control line too long", buf[pos : pos + 200])
                    if buf.startswith(b"HMSG ", pos):
                        end = self._hmsg_run(buf, view, pos, size, append)
                        if end != pos:
                            pos = end
                            continue
                        pending = parse_msg_line(buf[pos:nl])
                    elif buf.startswith(b"MSG ", pos):
                        pending = parse_msg_line(buf[pos:nl])
                    else:
                        pending = self._control(bytes(buf[pos:nl]), append)
                    pos = nl + 2
                    if pending is None:
                        continue
                # A message's control line is read: its payload, when all of it is here.
                subject, sid, reply, hlen, total = pending
                stop = pos + total
                if size < stop + 2:
                    break
                if buf[stop] != 13 or buf[stop + 1] != 10:
                    raise _bad("message payload is not followed by CRLF", buf[stop : stop + 2])
                if hlen is None:
                    header: bytes | None = None
                    payload = bytes(view[pos:stop])
                else:
                    header = bytes(view[pos : pos + hlen])
                    payload = bytes(view[pos + hlen : stop])
                append(make(subject, sid, reply, header, payload))
                pos = stop + 2
                pending = None
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
        if not raw.startswith((b"MSG ", b"HMSG ")):
            return None
        try:
            subject, sid, reply, hlen, total = parse_msg_line(raw[:nl])
        except ProtocolError:
            return None  # feed() names it
        body = nl + 2
        stop = body + total
        if stop + 2 != len(raw) or raw[stop:] != b"\r\n":
            return None
        if hlen is None:
            return self.msg_class(subject, sid, reply, None, raw[body:stop])
        return self.msg_class(subject, sid, reply, raw[body : body + hlen], raw[body + hlen : stop])

    def feed_reply(self, data: bytes | bytearray | memoryview, line: bytes) -> OwnFrame | None:
        """``data`` as (frame, body, split, stop) when it is exactly one whole frame whose control line
        starts with ``line`` (``MSG <subject> <sid> ``, with an H before it for HMSG) and nothing is buffered.

        A request() caller reading its own reply knows the reply's subject and
        sid: one comparison stands for parsing and decoding them (half of
        :meth:`feed_one`'s work).  Only the sizes are read, and only plain
        digits (a subset of what :func:`parse_msg_line` takes).  The header
        block is ``frame[body:split]`` (empty for MSG) and the payload
        ``frame[split:stop]``.  None means "not that case": :meth:`feed` then
        takes the same bytes, so the result never differs.
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

    def feed_replies(
        self, data: bytes | bytearray | memoryview, headers: list[bytes], payloads: list[bytes],
        args: list[bytes] | None = None,
    ) -> tuple[bytes | None, list[Event]]:
        """Cut the replies to one bulk request into header blocks and payloads, up to the status that ends them.

        For a link that carries nothing but such replies
        (:class:`jsclient.jetstream.bulk.BulkReader`): no event object per
        message, and each block and payload is ``bytes`` copied once.  Returns
        the header block of the status reply that ended the batch (None: more
        bytes are needed) and the other events met before it (PING, -ERR,
        ...) for the caller to act on.  What follows the status stays
        buffered: feed ``b""`` to go on with it.

        With ``args`` (a pull consumer's deliveries, whose subject and ack
        reply are the message's details), MSG frames are taken too, with an
        empty header block, and each message's control line less its
        operation and sizes (``<subject> <sid> <reply>``) goes to ``args``.
        Feed from a frame's start, as the handshake leaves a parser: this and
        :meth:`feed` do not take turns within a frame.
        """
        buf = self._buf
        if self.buffered + len(data) < self._need:  # the frame begun is not all here yet: kept, not scanned
            if self._pos:
                del buf[: self._pos]
                self._pos = 0
            buf += data
            return None, []
        # One copy of what was kept and what came, so that each block and payload is a slice, copied once more.
        raw = b"".join((memoryview(buf)[self._pos :], data))
        with_args = args is not None
        lines: list[bytes] = args if args is not None else []
        marks = len(headers), len(payloads), len(lines)
        cut = self._cut_fast(raw, headers, payloads, lines, with_args)
        if cut is None:  # the lists back as they were, and every line read by parse_msg_line
            del headers[marks[0] :], payloads[marks[1] :], lines[marks[2] :]
            cut = self._cut_read(raw, headers, payloads, lines, with_args)
        status, events, pos, self._need = cut
        del buf[:]
        buf += memoryview(raw)[pos:]  # what is not cut yet (a frame begun, what follows the status)
        self._pos = 0
        return status, events

    def _cut_fast(
        self, raw: bytes, headers: list[bytes], payloads: list[bytes], lines: list[bytes], with_args: bool
    ) -> _Cut | None:
        """:meth:`feed_replies` of ``raw`` when every message's line is of the form the server writes on
        such a link (None: a line of another form, or a fault: :meth:`_cut_read` reads it all again).

        The sizes are read where the server writes them, each as :func:`parse_msg_line` reads its word;
        the rest of each line (``<subject> <sid>``, then `` <reply>`` with ``with_args``, which goes to
        ``lines``) is checked with the rest of the others, in one go (:func:`_plain`).
        """
        events: list[Event] = []
        add_block = headers.append
        add_body = payloads.append
        add_line = lines.append
        checked = lines if with_args else []  # the lines to check: from first on
        first = len(checked)
        fields = 3 if with_args else 2  # in a line less its operation and sizes
        head = b""  # without args: the start of a line checked, up to its sizes
        size = len(raw)
        find = raw.find
        rfind = raw.rfind
        limit = self.max_control_line
        pos = need = 0
        status = None
        try:
            while True:
                nl = find(b"\r\n", pos, pos + limit + 2)
                if nl < 0:
                    if size - pos > limit:
                        return None
                    break
                last = rfind(b" ", pos, nl)
                body = nl + 2
                if head and raw.startswith(head, pos):  # the line of a reply before it, but for its sizes
                    start = 0
                    end = pos + len(head) - 1
                    split = body + int(raw[end + 1 : last])
                elif raw.startswith(b"HMSG ", pos):
                    start = pos + 5
                    end = rfind(b" ", pos, last)
                    split = body + int(raw[end + 1 : last])
                elif with_args and raw.startswith(b"MSG ", pos):
                    start = pos + 4
                    end = last
                    split = body
                elif self._control(raw[pos:nl], events.append) is None:
                    pos = body
                    continue
                else:
                    return None  # a message's line in a form of its own (another case, tabs)
                stop = body + int(raw[last + 1 : nl])
                if not body <= split <= stop:
                    return None
                if stop + 2 > size:
                    need = stop + 2 - pos
                    break
                if raw[stop] != 13 or raw[stop + 1] != 10:  # CR LF
                    return None
                header = raw[body:split]
                if header[8:9] == b" ":  # "NATS/1.0 <status>": the end of the batch (or its error)
                    if parse_msg_line(raw[pos:nl])[3:] != (split - body, stop - body):
                        return None
                    status = header
                    pos = stop + 2
                    break
                if with_args:
                    add_line(raw[start:end])
                elif start:  # replies to a direct get all say "HMSG <inbox> <sid> ": one is checked
                    head = raw[pos : end + 1]
                    checked.append(raw[start:end])
                add_block(header)
                add_body(raw[split:stop])
                pos = stop + 2
        except (ValueError, ProtocolError):  # a word that is no size; a line read below names what is wrong
            return None
        if len(checked) > first and not _plain(checked[first:], fields):
            return None
        return status, events, pos, need

    def _cut_read(
        self, raw: bytes, headers: list[bytes], payloads: list[bytes], lines: list[bytes], with_args: bool
    ) -> _Cut:
        """:meth:`feed_replies` of ``raw``, every line read by :func:`parse_msg_line` (which names a fault)."""
        events: list[Event] = []
        size = len(raw)
        pos = need = 0
        status = None
        while True:
            nl = raw.find(b"\r\n", pos, pos + self.max_control_line + 2)
            if nl < 0:
                if size - pos > self.max_control_line:
                    raise _bad("control line too long", raw[pos : pos + 200])
                break
            line = raw[pos:nl]
            if line.startswith((b"HMSG ", b"MSG ")):
                read: MsgLine | None = parse_msg_line(line)
            else:
                read = self._control(line, events.append)
            if read is None:
                pos = nl + 2
                continue
            hlen, total = read[3], read[4]
            if hlen is None and not with_args:
                raise _bad("a bulk reply without headers", line)
            body = nl + 2
            stop = body + total
            if stop + 2 > size:
                need = stop + 2 - pos
                break
            if raw[stop : stop + 2] != b"\r\n":
                raise _bad("message payload is not followed by CRLF", raw[stop : stop + 2])
            split = body if hlen is None else body + hlen
            header = raw[body:split]
            pos = stop + 2
            if header[8:9] == b" ":
                status = header
                break
            if with_args:
                lines.append(b" ".join(line.split()[1 : -1 if hlen is None else -2]))  # its words, one space apart
            headers.append(header)
            payloads.append(raw[split:stop])
        return status, events, pos, need

    def _msg_run(self, rest: memoryview, pos: int, append: Any) -> int:
        """Parse the run of plain MSG frames at the start of ``rest`` (input from ``pos``); return where it ends.

        One split at CRLF cuts a run of replies, acks or core messages into
        lines and payloads; it stops at the first frame it cannot take whole
        and sure (another operation, a payload containing CRLF, anything
        malformed, the end), where the general loop goes on.
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
            args = line.split()  # as parse_msg_line splits it
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
            except ValueError:  # UnicodeDecodeError included: the general loop names it
                break
            append(msg)
            pos += len(line) + len(payload) + 4
            i += 2
        return pos

    def _hmsg_run(self, buf: bytearray, view: memoryview, pos: int, size: int, append: Any) -> int:
        """Parse the run of whole HMSG frames at ``pos`` (JetStream deliveries, direct-get batches); return where
        it ends (``pos``: none taken).  Each frame is taken in one go and a repeated subject decoded once; it
        stops, as :meth:`_msg_run` does, at anything it cannot take whole and sure."""
        make = self.msg_class
        limit = self.max_control_line
        find = buf.find
        last_raw: bytes | bytearray = b""
        last_subject = ""
        while buf.startswith(b"HMSG ", pos):
            nl = find(b"\r\n", pos, pos + limit + 2)
            if nl < 0:
                break
            args = buf[pos + 5 : nl].split()  # as parse_msg_line splits it
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
            except ValueError:  # UnicodeDecodeError included: the general loop names it
                break
            append(msg)
            pos = stop + 2
        return pos

    @staticmethod
    def _control(line: bytes, append: Any) -> MsgLine | None:
        """A control line other than a message's: its event appended.  A MSG or HMSG in another case, or
        separated by tabs, is read by :func:`parse_msg_line` and returned."""
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
        elif op == b"MSG" or op == b"HMSG":
            return parse_msg_line(line)
        else:
            raise _bad("unknown protocol operation", line)
        return None


class ReplyShape(Generic[R]):
    """What a request() caller knows of its reply: its frame, read in one match, and its one decoder.

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

    ``decode`` is given every reply ``read`` did not answer, as a message
    (the reader thread routed it, or ``read`` did not know it), once the
    request found responders: it returns the caller's answer or raises what
    the reply means, so a caller never decides on a bare message.
    """

    __slots__ = ("decode", "headers", "last", "line", "pattern", "read", "repeats")

    def __init__(
        self,
        pattern: re.Pattern[bytes],
        read: Callable[[tuple[bytes, ...]], R | None],
        *,
        decode: Callable[[Any], R],
        headers: bool,
        repeats: bool = False,
    ) -> None:
        self.pattern = pattern
        self.read = read
        self.decode = decode  # given a jsclient.Msg, which this layer does not know: hence Any
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

