"""NATS/1.0 message headers: an ordered multi-value mapping, its parser and encoder.

Sans-IO like :mod:`jsclient.protocol`: pure functions and a value type, no
threads, no locks.  A :class:`Headers` object is not synchronised; a message's
headers belong to whoever holds the message.

A header block looks like ``NATS/1.0[ <status>[ <description>]]\\r\\n``
followed by ``Name: value\\r\\n`` lines and a blank line.  The server uses the
status form for no-responders (503), JetStream pull statuses (404, 408, 409),
heartbeats and flow control (100).

Besides :class:`Headers`, the blocks and lines that hot loops build or read
without one live here: an atomic batch member's block, a block with a message
id, a direct get's delivery block and its fields (see :mod:`jsclient.jetstream`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any, Union

from .errors import BadHeaderError, ProtocolError

VERSION_LINE = b"NATS/1.0"

HeadersInput = Union["Headers", Mapping[str, str | Iterable[str]]]


def pair(item: Any) -> tuple[Any, Any]:
    """A (name, value) item of a headers iterable: a tuple or list of two (a two-letter str is not one)."""
    if not isinstance(item, (tuple, list)):
        raise TypeError(item)
    name, value = item
    return name, value


class Headers(MutableMapping[str, str]):
    """Ordered header mapping where a name may carry several values.

    ``h[name]`` is the first value, ``h[name] = v`` replaces every value,
    :meth:`add` appends one, :meth:`get_all` returns them all.  Names are
    case-sensitive, as NATS servers and other clients treat them.

    ``by_name`` (each name's values, in order) is internal, not part of the
    public API: it has no underscore so that this module's parser and
    encoder fill and read it directly, unchecked, at a dict's speed.

    Args:
        initial: The headers to start with: a mapping of names to a value or a list of values, another
            Headers (its names and values are copied, not its status), or (name, value) pairs.
        status: The status code of the block's first line (``NATS/1.0 503``), as the server sends on
            statuses; None for ordinary headers.  :meth:`encode` does not write it.
        description: The text after the status code.

    Raises:
        BadHeaderError: ``initial`` is a str or bytes, or holds a name or value that cannot be sent.
    """

    __slots__ = ("by_name", "description", "status")

    def __init__(
        self,
        initial: HeadersInput | Iterable[tuple[str, str]] | None = None,
        *,
        status: int | None = None,
        description: str = "",
    ) -> None:
        self.by_name: dict[str, list[str]] = {}
        self.status = status
        self.description = description
        if initial is None:
            return
        if isinstance(initial, (str, bytes, bytearray)):  # type: ignore[unreachable]  # users pass them anyway
            raise BadHeaderError(
                f"headers must be a mapping of names to values (or a Headers), not {type(initial).__name__}"
            )
        if isinstance(initial, Headers):
            self.by_name = {k: list(v) for k, v in initial.by_name.items()}
            return
        if isinstance(initial, Mapping):
            for name, value in initial.items():
                if isinstance(value, (list, tuple)):
                    for item in value:
                        self.add(name, item)
                else:
                    self.add(name, value)  # type: ignore[arg-type]  # add() names a bad type
            return
        try:
            pairs = [pair(item) for item in initial]
        except (TypeError, ValueError):  # not iterable, or an item that is not a (name, value) pair
            raise BadHeaderError(
                f"headers must be a mapping, a Headers or (name, value) pairs, not {initial!r:.80}"
            ) from None
        for name, value in pairs:
            self.add(name, value)

    # -- mapping protocol -------------------------------------------------
    def __getitem__(self, name: str) -> str:
        return self.by_name[name][0]

    def __setitem__(self, name: str, value: str) -> None:
        _check_name(name)
        _check_value(name, value)
        self.by_name[name] = [value]

    def __delitem__(self, name: str) -> None:
        del self.by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_name)

    def __len__(self) -> int:
        return len(self.by_name)

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return (self.by_name, self.status, self.description) == (
                other.by_name,
                other.status,
                other.description,
            )
        if isinstance(other, Mapping):
            return self.status is None and self.by_name == {k: [v] for k, v in other.items()}
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        status = f", status={self.status}" if self.status is not None else ""
        desc = f", description={self.description!r}" if self.description else ""
        return f"Headers({self.multi_items()!r}{status}{desc})"

    # -- multi-value access ------------------------------------------------
    def add(self, name: str, value: str) -> None:
        """Append a value to ``name``, after those it has.

        Args:
            name: The header's name: printable ASCII, no spaces or ``:``.
            value: One value: a str without line breaks.

        Raises:
            BadHeaderError: A name or value that cannot be sent.
        """
        _check_name(name)
        _check_value(name, value)
        self.by_name.setdefault(name, []).append(value)

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in order.

        Args:
            name: The header's name (case-sensitive).

        Returns:
            A new list of its values; empty when the name is not there.

        Raises:
            : Nothing.
        """
        return list(self.by_name.get(name, ()))

    def multi_items(self) -> list[tuple[str, str]]:
        """Every (name, value) pair, in order: a name with several values comes once per value.

        Returns:
            A new list of the pairs.

        Raises:
            : Nothing.
        """
        return [(k, v) for k, values in self.by_name.items() for v in values]

    def copy(self) -> Headers:
        """An independent copy, status and description included.

        Returns:
            The copy.

        Raises:
            : Nothing.
        """
        h = Headers(self)
        h.status, h.description = self.status, self.description
        return h

    # -- wire form -----------------------------------------------------------
    def encode(self) -> bytes:
        """The NATS/1.0 header block, as a message carries it (without a status line).

        Returns:
            The block: ``NATS/1.0``, a ``Name: value`` line per value, and a blank line.

        Raises:
            : Nothing.
        """
        return encode(self)

    @classmethod
    def parse(cls, block: bytes) -> Headers:
        """Headers from a raw NATS/1.0 block (as a received message carries it).

        Args:
            block: The block, from ``NATS/1.0`` to the blank line.

        Returns:
            The headers, with the status and description of the first line if it has them.

        Raises:
            ProtocolError: ``block`` is not a well-formed header block.
        """
        return parse(block)


def _check_name(name: str) -> None:
    if not isinstance(name, str):
        raise BadHeaderError(f"header name must be a str, not {type(name).__name__}")
    if not name:
        raise BadHeaderError("header name must not be empty")
    if name.isascii() and name.isprintable() and " " not in name and ":" not in name:  # every char in 33..126
        return
    for ch in name:
        if ch == ":" or ord(ch) <= 32 or ord(ch) >= 127:
            raise BadHeaderError(f"header name {name!r} contains {ch!r}; names are printable ASCII without ':'")


def _check_value(name: str, value: str) -> None:
    if not isinstance(value, str):
        raise BadHeaderError(f"header {name!r} value must be a str, not {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise BadHeaderError(f"header {name!r} value contains a line break")


def encode(headers: HeadersInput) -> bytes:
    """Encode headers (a :class:`Headers` or a plain mapping) as a NATS/1.0 block."""
    if not isinstance(headers, Headers):
        headers = Headers(headers)
    lines = [VERSION_LINE]
    for name, values in headers.by_name.items():
        for value in values:
            lines.append(f"{name}: {value}".encode())
    lines.append(b"")
    lines.append(b"")
    return b"\r\n".join(lines)


def encode_lines(headers: HeadersInput) -> bytes:
    """The ``Name: value`` lines of :func:`encode`'s block alone: what a batch adds its own lines to."""
    return encode(headers)[len(VERSION_LINE) + 2 : -2]


def encode_line(name: str, value: str) -> bytes:
    """One ``Name: value`` line, checked: BadHeaderError unless it can travel as one header line (a line break
    in the value would smuggle lines of its own in).  For code that gathers a block's lines itself."""
    _check_name(name)
    _check_value(name, value)
    return f"{name}: {value}\r\n".encode()


def block_of(lines: bytes) -> bytes:
    """The header block of ``Name: value`` lines already encoded (:func:`encode_lines`, :func:`encode_line`)."""
    return b"NATS/1.0\r\n%s\r\n" % lines


#: Message-path tracing (ADR-41, nats-server 2.11+): the subject every server a message crosses sends its
#: report to; ``Nats-Trace-Only: true`` traces the message without delivering it.
TRACE_DEST_HEADER = "Nats-Trace-Dest"
TRACE_ONLY_HEADER = "Nats-Trace-Only"
#: Set by a server on a traced message it forwards to another server (``1``, ``2``, then ``1.1`` ...): the
#: id by which that server's report is tied to the forwarding server's egress.
TRACE_HOP_HEADER = "Nats-Trace-Hop"
#: A header of servers before 2.11's release that turns a message's tracing off.
TRACE_ORIGIN_ACCOUNT_HEADER = "Nats-Trace-Origin-Account"
#: How a traced message asks for its reports compressed (``gzip``, ``snappy``), and how a report says it is.
ACCEPT_ENCODING_HEADER = "Accept-Encoding"
CONTENT_ENCODING_HEADER = "Content-Encoding"

#: An atomic batch member's block (ADR-50), a template for the loop that frames a batch: the user's
#: ``Name: value`` lines, then the batch's id and the member's sequence.
BATCH_MEMBER_BLOCK = b"NATS/1.0\r\n%sNats-Batch-Id: %s\r\nNats-Batch-Sequence: %d\r\n\r\n"  # lines, id, sequence


def msg_id_block(lines: bytes, msg_id: bytes) -> bytes:
    """The block of ``lines`` with a ``Nats-Msg-Id: <msg_id>`` line after them, unless they name an id of their own."""
    if b"Nats-Msg-Id: " in lines:
        return block_of(lines)
    return b"NATS/1.0\r\n%sNats-Msg-Id: %s\r\n\r\n" % (lines, msg_id)


def header_value(block: bytes, name: bytes) -> bytes | None:
    """The first value of header ``name`` in a raw block, found without parsing the rest (None: not there)."""
    at = block.find(b"\r\n%s: " % name)
    if at < 0:
        return None
    start = at + len(name) + 4
    end = block.find(b"\r\n", start)
    return block[start:end] if end >= 0 else None


# -- a direct get's delivery block -------------------------------------------------
#
# A message stored without headers of its own comes back from a direct get in one block the server
# always writes alike: stream, subject, sequence and time stamp.  Reads of single values take it in one
# match instead of a parse.

#: That block as a regular expression for a reply's shape (see :func:`jsclient.protocol.reply_pattern`):
#: groups (the block up to the sequence (see :func:`delivery_head`), sequence, time stamp).  A value runs
#: to the next CR, not to CR or LF: a single excluded byte is a scan the regular-expression engine does
#: without looking up a set (the match took 0.42 us instead of 0.73).  A stray LF cannot pass for a good
#: reply: the block up to the sequence must equal the caller's (which has none), and a stamp with one is
#: kept as the header parser reads it (a direct get) or fails to parse (``kv.get``, which then reads it
#: the general way).
DELIVERY_BLOCK = (
    rb"(NATS/1\.0\r\nNats-Stream: [^\r]*\r\nNats-Subject: [^\r]*\r\nNats-Sequence: )"
    rb"(\d+)\r\nNats-Time-Stamp: ([^\r]*)\r\n\r\n"
)
_DELIVERY = re.compile(
    rb"NATS/1\.0\r\nNats-Stream: ([^\r\n]*)\r\nNats-Subject: ([^\r\n]*)\r\n"
    rb"Nats-Sequence: (\d+)\r\nNats-Time-Stamp: ([^\r\n]*)\r\n\r\n"
)
_DELIVERY_TAIL = re.compile(rb"(\d+)\r\nNats-Time-Stamp: ([^\r\n]*)\r\n\r\n")


#: Headers a server adds to a direct get's reply: fields of the stored message, not headers of its own.
DELIVERY_HEADERS = frozenset(
    {"Nats-Stream", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Subject", "Nats-Num-Pending", "Nats-Last-Sequence",
     "Nats-UpTo-Sequence"}
)


def split_delivery(block: bytes) -> tuple[dict[str, str], int]:
    """A direct get reply's delivery headers, and the bytes its other lines take (the message's own headers,
    each line with its CRLF, as the server counts them against a batch's ``max_bytes``; 0: it has none)."""
    found: dict[str, str] = {}
    own = 0
    ascii_only = block.isascii()  # then a line's length in characters is its length in bytes
    for line in block.decode("utf-8", "replace").split("\r\n")[1:]:  # decoded once, not line by line
        name, _, value = line.partition(": ")  # the server writes its own lines "Name: value"
        if name in DELIVERY_HEADERS:
            found[name] = value
        elif line:
            own += (len(line) if ascii_only else len(line.encode())) + 2
    return found, own


def delivery_head(stream: str, subject: str) -> bytes:
    """The start of that block for a message of ``stream`` on ``subject``, up to its sequence."""
    return b"NATS/1.0\r\nNats-Stream: %s\r\nNats-Subject: %s\r\nNats-Sequence: " % (stream.encode(), subject.encode())


def delivery_fields(block: bytes) -> tuple[bytes, bytes, bytes, bytes] | None:
    """Stream, subject, sequence and time stamp of that block, undecoded; None for any other block."""
    m = _DELIVERY.fullmatch(block)
    return None if m is None else (m[1], m[2], m[3], m[4])


def delivery_tail(block: bytes, head: bytes) -> tuple[bytes, bytes] | None:
    """Sequence and time stamp of that block when it starts with ``head`` (:func:`delivery_head`), undecoded."""
    if not block.startswith(head):
        return None
    m = _DELIVERY_TAIL.fullmatch(block, len(head))
    return None if m is None else (m[1], m[2])


def status_of(block: bytes | None) -> int | None:
    """The inline status code of a raw header block, without parsing the rest.

    The reader thread uses this on hot paths (request replies, JetStream
    statuses) where building a :class:`Headers` would be wasted work.
    """
    if block is None or len(block) < 12 or block[8] != 32 or not block.startswith(VERSION_LINE):
        return None
    code = block[9:12]
    if code.isdigit():
        return int(code)
    return None


def parse(block: bytes) -> Headers:
    """Parse a raw NATS/1.0 header block (as carried by HMSG).

    Values keep their own leading and trailing spaces (only the single space
    after the colon is a separator), so a header read and written back is
    unchanged.
    """
    if not block.startswith(VERSION_LINE):
        raise ProtocolError(f"header block does not start with NATS/1.0: {block[:64]!r}")
    text = block.decode("utf-8", "replace")  # once per block, not once per line
    first_end = text.find("\r\n")
    if first_end < 0:
        raise ProtocolError(f"header block has no line end: {block[:64]!r}")
    headers = Headers()
    rest = text[len(VERSION_LINE) : first_end].strip()
    if rest:
        code, _, desc = rest.partition(" ")
        if len(code) != 3 or not code.isdigit():
            raise ProtocolError(f"bad status in header block: {block[:first_end]!r}")
        headers.status = int(code)
        headers.description = desc.strip()
    hmap = headers.by_name
    for line in text[first_end + 2 :].split("\r\n"):
        if not line:
            continue
        name, sep, value = line.partition(":")
        name = name.strip()
        if not sep or not name:
            raise ProtocolError(f"malformed header line: {line[:64]!r}")
        if value[:1] == " ":
            value = value[1:]  # the one space encode() writes; the rest is the value, byte for byte
        values = hmap.get(name)
        if values is None:
            hmap[name] = [value]
        else:
            values.append(value)
    return headers
