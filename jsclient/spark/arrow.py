"""Pulled messages and direct-get replies to Arrow record batches, in bulk.

Pure functions on the calling thread (an executor's task thread); no locks.
pyarrow and numpy are imported lazily by the callers' modules, never by
``jsclient``.

Reading from a consumer: each message's ``<subject> <sid> <ack reply>``
line is split at spaces and its ack reply at dots, in C++; the stream
sequence and the time stamp (nanoseconds) sit at fixed places among the
reply's tokens, and the header block is the message's own.  Most of a
pull's bytes are runs of plain MSG frames, which :func:`cut_deliveries`
cuts in bulk (for :meth:`jsclient.jetstream.bulk.BulkReader.pull_runs`):
numpy finds every CRLF, the spaces of the lines and the dots of the
replies, each in one scan, and Arrow copies out only the columns' bytes.
A frame is taken only where its line has the one form the server writes
and its payload the size the line says, so that a payload holding CRLF,
or any other frame, ends the run and goes to the reader's own parser.

Reading by direct get: a batched direct-get reply's header block is the message's own
headers followed by eight lines the server appends (``Nats-Stream``,
``Nats-Subject``, ``Nats-Sequence``, ``Nats-Time-Stamp``, ``Nats-Num-Pending``,
``Nats-Last-Sequence`` and the blank end), so after one split of every block
at CRLF, in C++, the subject, sequence and time of each message sit at fixed
distances from the end of its list.  Only rows that carry headers of their
own take a step in Python.

Headers named ``Nats-*`` belong to the server (delivery details, expectation
checks, batch control, TTL, rollups): the ``headers`` column leaves them out
except ``Nats-Msg-Id``, which is the publisher's and which the sink uses as
the message id, and ``Nats-Marker-Reason``, which says why the server left a
marker (ADR-48: a key removed by age, for a bucket's changes).  The sink never
sends the others, nor the marker's reason, from that column.
Values are kept byte for byte.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..headers import Headers, parse
from ..jetstream.bulk import Cut, Run
from ..jetstream.direct import StoredMessage
from ..jetstream.kv import MARKER_REASON_HEADER as MARKER_REASON
from ..jetstream.metadata import parse_metadata
from ..protocol.parser import MAX_CONTROL_LINE

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

SCHEMA = (
    "subject string, data binary, headers map<string,array<string>>, stream string, seq long, timestamp timestamp"
)
MSG_ID = "Nats-Msg-Id"
_DELIVERY_LINES = 8  # the server's six headers, then the blank line and the empty tail of the split
_SUBJECT, _SEQUENCE, _TIME = b"Nats-Subject: ", b"Nats-Sequence: ", b"Nats-Time-Stamp: "


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("subject", pa.string()),
            ("data", pa.binary()),
            ("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
            ("stream", pa.string()),
            ("seq", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


def user_header(name: str) -> bool:
    """Whether a header is the publisher's to keep (not one of the server's ``Nats-*`` control headers)."""
    return not name.startswith("Nats-") or name == MSG_ID


def header_map(headers: Headers) -> list[tuple[str, list[str]]] | None:
    """Headers as map entries (values grouped by name, in order): user headers, and a marker's reason."""
    entries = [(name, headers.get_all(name)) for name in headers if user_header(name) or name == MARKER_REASON]
    return entries or None


def subject_filter_regex(filters: Sequence[str]) -> str:
    """One RE2 pattern matching any of the NATS subject filters (``*`` one token, ``>`` the rest)."""

    def one(pattern: str) -> str:
        parts = []
        for token in pattern.split("."):
            parts.append("[^.]+" if token == "*" else ".+" if token == ">" else re.escape(token))
        return "\\.".join(parts)

    return "^(?:" + "|".join(one(f) for f in filters) + ")$"


def replies_to_batch(
    headers: Sequence[bytes], payloads: Sequence[bytes], stream: str, last: int, subject_regex: str | None = None
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """Rows for direct-get replies (header blocks and payloads) up to sequence ``last`` (and matching
    ``subject_regex``), how many were in range, and the sequences of every reply.

    The count is taken before the subject filter, so a caller can compare it
    with what the stream held when the range was planned.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    blocks = pa.array(headers, pa.binary())
    lines = pc.split_pattern(blocks, "\r\n")
    ends = pc.cast(lines.offsets[1:], pa.int64())
    flat = lines.values

    def field(back: int, prefix: bytes) -> pa.Array | None:
        taken = pc.take(flat, pc.subtract(ends, back))
        if not pc.all(pc.starts_with(taken, prefix.decode())).as_py():
            return None
        return pc.utf8_slice_codeunits(taken.cast(pa.string()), len(prefix))

    subject = field(7, _SUBJECT)
    seq_text = field(6, _SEQUENCE)
    time_text = field(5, _TIME)
    if subject is None or seq_text is None or time_text is None:
        return _replies_to_batch_slowly(headers, payloads, last, subject_regex)
    seq = pc.cast(seq_text, pa.int64())
    try:
        stamp = pc.cast(pc.cast(time_text, pa.timestamp("ns", "UTC")), pa.timestamp("us", "UTC"), safe=False)
    except pa.ArrowInvalid:  # an older server's time format
        return _replies_to_batch_slowly(headers, payloads, last, subject_regex)
    own = pc.subtract(pc.list_value_length(lines), 1 + _DELIVERY_LINES)  # less the version line: the user's
    with_headers = pc.indices_nonzero(pc.greater(own, 0)).to_pylist()
    return _filtered(
        [subject, pa.array(payloads, pa.binary()), _header_column(headers, with_headers),
         pa.array([stream] * len(headers), pa.string()), seq, stamp],
        last, subject_regex,
    )


#: Where the stream sequence and the time stamp sit among an ack reply's tokens, by their count:
#: ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`` and the form with
#: domain and account hash before the stream (and a token after the pending count).
_ACK_TOKENS = {9: (5, 7), 11: (7, 9), 12: (7, 9)}


def deliveries_to_batch(
    args: Sequence[bytes], headers: Sequence[bytes], payloads: Sequence[bytes], stream: str, last: int,
    subject_regex: str | None = None,
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """:func:`replies_to_batch` for a pull consumer's messages (``args``: their ``<subject> <sid> <reply>``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    words = pc.split_pattern(pa.array(args, pa.binary()), " ")
    if pc.min_max(pc.list_value_length(words)).as_py() != {"min": 3, "max": 3}:
        return _deliveries_to_batch_slowly(args, headers, payloads, stream, last, subject_regex)
    tokens = pc.split_pattern(pc.list_element(words, 2), ".")
    counts = pc.min_max(pc.list_value_length(tokens)).as_py()
    places = _ACK_TOKENS.get(counts["min"]) if counts["min"] == counts["max"] else None
    if places is None:
        return _deliveries_to_batch_slowly(args, headers, payloads, stream, last, subject_regex)
    seq = pc.cast(pc.list_element(tokens, places[0]).cast(pa.string()), pa.int64())
    nanos = pc.cast(pc.list_element(tokens, places[1]).cast(pa.string()), pa.int64())
    subject = pc.list_element(words, 0).cast(pa.string())
    stamp = pc.cast(nanos.cast(pa.timestamp("ns", "UTC")), pa.timestamp("us", "UTC"), safe=False)
    return _filtered(
        [subject, pa.array(payloads, pa.binary()), _own_headers(headers), pa.array([stream] * len(args), pa.string()),
         seq, stamp],
        last, subject_regex,
    )


class PulledRun:
    """A run of plain MSG deliveries as :func:`cut_deliveries` found them: subjects, ack replies and payloads,
    binary arrays (a :class:`jsclient.jetstream.bulk.Run`)."""

    __slots__ = ("payloads", "replies", "subjects")

    def __init__(self, subjects: pa.Array, replies: pa.Array, payloads: pa.Array) -> None:
        self.subjects = subjects
        self.replies = replies
        self.payloads = payloads

    @property
    def count(self) -> int:
        return len(self.payloads)

    @property
    def counted(self) -> int:
        """Bytes toward a pull's max_bytes, as the server counts them: subject, reply and payload."""
        import pyarrow.compute as pc

        return sum(pc.sum(pc.binary_length(a)).as_py() or 0 for a in (self.subjects, self.replies, self.payloads))

    @property
    def last_reply(self) -> bytes:
        last: bytes = self.replies[-1].as_py()
        return last


_cache = threading.local()  # this thread's reusable arrays (a fresh large one costs the kernel a page fault a page)


#: Scratch arrays are kept up to this size; a larger one (bytes gathered around one large message) is not kept.
_SCRATCH_KEPT = 8 << 20


def _scratch(n: int, slot: int) -> npt.NDArray[np.uint8]:
    """``n`` bytes of this thread's scratch array ``slot`` (0 or 1), reused from call to call."""
    import numpy as np

    if n > _SCRATCH_KEPT:
        return np.empty(n, np.uint8)
    arrays: list[npt.NDArray[np.uint8]] | None = getattr(_cache, "scratch", None)
    if arrays is None:
        arrays = _cache.scratch = [np.empty(0, np.uint8), np.empty(0, np.uint8)]
    if len(arrays[slot]) < n:
        arrays[slot] = np.empty(min(max(n, 2 * len(arrays[slot])), _SCRATCH_KEPT), np.uint8)
    return arrays[slot][:n]


def _evens(n: int) -> pa.Array:
    """Indexes 0, 2, 4, ... (n of them), from this thread's cache, which grows as needed."""
    import pyarrow as pa

    have: pa.Array | None = getattr(_cache, "evens", None)
    if have is None or len(have) < n:
        have = _cache.evens = pa.array(range(0, 2 * max(n, 2 * len(have or ())), 2), pa.int64())
    return have.slice(0, n)


def _spans(values: pa.Buffer, starts: npt.NDArray[np.integer[Any]], ends: npt.NDArray[np.integer[Any]]) -> pa.Array:
    """The bytes ``values[starts[i]:ends[i]]`` as one binary array, copied out back to back.

    The spans must not overlap and must be in order: the array of spans and
    the gaps between them is made over ``values`` without a copy, and the
    spans are taken from it.
    """
    import numpy as np
    import pyarrow as pa

    n = len(starts)
    if not n:
        return pa.array([], pa.binary())
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = starts
    bounds[1::2] = ends
    whole = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds), values])
    return whole.take(_evens(n))


def _layout(array: pa.Array) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8], pa.Buffer]:
    """A binary array's offsets (``len + 1`` of them), its value bytes and their buffer, as numpy views."""
    import numpy as np

    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], np.int32, n + 1, 4 * array.offset)
    values = array.buffers()[2]
    return offsets, np.frombuffer(values, np.uint8, int(offsets[n])), values


def _first(bad: npt.NDArray[np.bool_]) -> int:
    """The index of the first True, or the length when there is none."""
    import numpy as np

    i = int(np.argmax(bad)) if len(bad) else 0
    return i if len(bad) and bad[i] else len(bad)


#: The shortest line of a frame taken: ``MSG a 1 b 0``.
_SHORTEST_LINE = 11


def cut_deliveries(raw: bytes | bytearray) -> tuple[int, PulledRun | None]:
    """The run of plain MSG frames at the start of ``raw`` (a frame's start): how many bytes it takes, and the
    run (None: the first frame is of another kind, or not whole yet).  ``raw`` is only read, and not kept.

    A frame is taken when its line is ``MSG <subject> <sid> <reply> <size>``,
    single spaces apart, in printable ASCII, no longer than the parser
    allows, and the ``size`` bytes after the line end where a CRLF starts:
    what :func:`~jsclient.protocol.parse_msg_line` reads from such a line,
    read in bulk.  The run ends at the first frame that is not so (a status,
    a PING, headers, a payload holding CRLF, what has not all come).

    Every CRLF is found in one scan; lines and payloads take turns between
    them, so each check runs on all the frames at once (numpy) and the run
    ends at the first frame any check refuses.  Only the lines, and then the
    columns, are copied out of ``raw`` (Arrow).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(raw) < _SHORTEST_LINE + 4:  # not even one frame
        return 0, None
    whole = np.frombuffer(raw, np.uint8)
    cr = np.flatnonzero(np.equal(whole[:-1], 13, out=_scratch(len(whole) - 1, 0).view(np.bool_)))
    crlf = cr[whole[cr + 1] == 10]
    n = len(crlf) // 2  # frames followed by their CRLF
    if not n:
        return 0, None
    line_end, payload_end = crlf[0 : 2 * n : 2], crlf[1 : 2 * n : 2]
    line_start = np.empty(n, np.int64)
    line_start[0] = 0
    line_start[1:] = payload_end[:-1] + 2
    length = line_end - line_start
    n = _first((length < _SHORTEST_LINE) | (length > MAX_CONTROL_LINE))
    if n:
        n = _first((whole[line_start[:n, None] + np.arange(4)] != np.frombuffer(b"MSG ", np.uint8)).any(axis=1))
    if not n:
        return 0, None
    raw_buffer = pa.py_buffer(raw)
    lines = _spans(raw_buffer, line_start[:n] + 4, line_end[:n])  # less "MSG "
    offsets, chars, line_buffer = _layout(lines)
    shifted = np.subtract(chars, np.uint8(32), out=_scratch(len(chars), 1))  # below 32 wraps around
    unprintable = np.greater(shifted, 94, out=_scratch(len(chars), 0).view(np.bool_))
    if unprintable.any():
        n = int(np.searchsorted(offsets, np.argmax(unprintable), "right")) - 1
    spaces = np.flatnonzero(np.equal(chars[: offsets[n]], 32, out=_scratch(int(offsets[n]), 0).view(np.bool_)))
    firsts, lasts = offsets[:n], offsets[1 : n + 1]
    if len(spaces) != 3 * n or not (np.all(spaces[0::3] >= firsts) and np.all(spaces[2::3] < lasts)):
        counts = np.diff(np.searchsorted(spaces, offsets[: n + 1]))
        n = _first(counts != 3)  # a line of more or fewer words
        spaces, firsts, lasts = spaces[: 3 * n], firsts[:n], lasts[:n]
    if not n:
        return 0, None
    after_subject, after_sid, after_reply = spaces[0::3], spaces[1::3], spaces[2::3]
    sids = _spans(line_buffer, after_subject + 1, after_sid).view(pa.string())
    sizes = _spans(line_buffer, after_reply + 1, lasts).view(pa.string())
    digits = pc.and_(pc.utf8_is_digit(sids), pc.utf8_is_digit(sizes)).to_numpy(zero_copy_only=False)
    shaped = (after_subject > firsts) & (after_reply > after_sid + 1) & (lasts - after_reply - 1 <= 9) & digits
    n = _first(~shaped)  # an empty subject or reply, a sid or size not in digits, a size past what is read in bulk
    if n:
        payload_start = line_end[:n] + 2
        n = _first(pc.cast(sizes.slice(0, n), pa.int64()).to_numpy() != payload_end[:n] - payload_start)
    if not n:
        return 0, None
    subjects = _spans(line_buffer, firsts[:n], after_subject[:n])
    replies = _spans(line_buffer, after_sid[:n] + 1, after_reply[:n])
    payloads = _spans(raw_buffer, payload_start[:n], payload_end[:n])
    return int(payload_end[n - 1]) + 2, PulledRun(subjects, replies, payloads)


def _ack_fields(replies: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """Stream sequences and time stamps (nanoseconds, as text) from ack replies, or None where they are not all
    of one form in :data:`_ACK_TOKENS`.  Every dot is found in one scan; where each reply has as many as the
    first, the fields are cut between the dots at their places."""
    import numpy as np
    import pyarrow.compute as pc

    n = len(replies)
    offsets, chars, values = _layout(replies)
    tail = chars[offsets[0] :]
    dots = np.flatnonzero(np.equal(tail, 46, out=_scratch(len(tail), 0).view(np.bool_))) + offsets[0]
    each = int(np.searchsorted(dots, offsets[1]))  # the first reply's dots
    places = _ACK_TOKENS.get(each + 1)
    if (places is not None and len(dots) == each * n and np.all(dots[0::each] >= offsets[:-1])
            and np.all(dots[each - 1 :: each] < offsets[1:])):  # each reply has exactly ``each`` dots
        sequence, stamp = (_spans(values, dots[place - 1 :: each] + 1, dots[place::each]) for place in places)
        return sequence, stamp
    split = pc.split_pattern(replies, ".")
    counts = pc.min_max(pc.list_value_length(split)).as_py()
    places = _ACK_TOKENS.get(counts["min"]) if counts["min"] == counts["max"] else None
    if places is None:
        return None
    return pc.list_element(split, places[0]), pc.list_element(split, places[1])


def run_to_batch(
    run: PulledRun, stream: str, last: int, subject_regex: str | None = None
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """:func:`deliveries_to_batch` for a run :func:`cut_deliveries` cut."""
    import pyarrow as pa
    import pyarrow.compute as pc

    subjects, replies, payloads = run.subjects, run.replies, run.payloads
    fields = _ack_fields(replies)
    if fields is None:
        args = [b"%s 1 %s" % pair for pair in zip(subjects.to_pylist(), replies.to_pylist(), strict=True)]
        return _deliveries_to_batch_slowly(args, [b""] * len(args), payloads.to_pylist(), stream, last, subject_regex)
    seq = pc.cast(fields[0].view(pa.string()), pa.int64())
    nanos = pc.cast(fields[1].view(pa.string()), pa.int64())
    stamp = pc.cast(nanos.cast(pa.timestamp("ns", "UTC")), pa.timestamp("us", "UTC"), safe=False)
    map_type = pa.map_(pa.string(), pa.list_(pa.string()))
    return _filtered(
        [subjects.view(pa.string()), payloads, pa.nulls(len(payloads), map_type),
         pa.repeat(pa.scalar(stream, pa.string()), len(payloads)), seq, stamp],
        last, subject_regex,
    )


def parts_to_batches(
    parts: Sequence[Cut | Run], stream: str, last: int, subject_regex: str | None = None
) -> list[tuple[pa.RecordBatch, int, pa.Array]]:
    """One pull's messages (:meth:`~jsclient.jetstream.bulk.BulkReader.pull_runs` with :func:`cut_deliveries`)
    as record batches, in order: each run one batch (its columns as cut, not copied again), and each part the
    reader's parser cut another."""
    out = []
    for part in parts:
        if isinstance(part, Cut):
            out.append(deliveries_to_batch(part.args, part.headers, part.payloads, stream, last, subject_regex))
        else:
            assert isinstance(part, PulledRun)  # the cutter's
            out.append(run_to_batch(part, stream, last, subject_regex))
    return out


def _deliveries_to_batch_slowly(
    args: Sequence[bytes], headers: Sequence[bytes], payloads: Sequence[bytes], stream: str, last: int,
    subject_regex: str | None,
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """One message at a time (an ack reply of another form: :func:`parse_metadata` reads it or names it)."""
    import pyarrow as pa

    metas = [parse_metadata(a.rpartition(b" ")[2].decode()) for a in args]
    subjects = [a.split(b" ", 1)[0].decode() for a in args]
    return _filtered(
        [pa.array(subjects, pa.string()), pa.array(payloads, pa.binary()), _own_headers(headers),
         pa.array([stream] * len(args), pa.string()), pa.array([m.sequence.stream for m in metas], pa.int64()),
         pa.array([m.timestamp_ns // 1000 for m in metas], pa.timestamp("us", "UTC"))],
        last, subject_regex,
    )


def _own_headers(blocks: Sequence[bytes]) -> pa.Array:
    """The ``headers`` column of pulled messages: a block is the message's own, empty when it has none."""
    return _header_column(blocks, [i for i, block in enumerate(blocks) if block])


def _header_column(blocks: Sequence[bytes], own: list[int]) -> pa.Array:
    """The ``headers`` column: the blocks of rows ``own`` (the others carry no headers of their own) as maps of
    their user headers (the server's delivery headers left out)."""
    import pyarrow as pa

    map_type = pa.map_(pa.string(), pa.list_(pa.string()))
    if not own:
        return pa.nulls(len(blocks), map_type)
    values: list[Any] = [None] * len(blocks)
    for i in own:
        values[i] = header_map(parse(blocks[i]))
    return pa.array(values, map_type)


def _filtered(columns: list[pa.Array], last: int, subject_regex: str | None) -> tuple[pa.RecordBatch, int, pa.Array]:
    """The batch of rows up to sequence ``last`` matching ``subject_regex``, how many were in range, and every
    row's sequence."""
    import pyarrow as pa
    import pyarrow.compute as pc

    batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema())
    seq = columns[4]
    keep = pc.less_equal(seq, last)
    in_range = pc.sum(keep).as_py() or 0
    if subject_regex is not None:
        keep = pc.and_(keep, pc.match_substring_regex(columns[0], subject_regex))
    if in_range == len(seq) and subject_regex is None:
        return batch, in_range, seq
    return batch.filter(keep), in_range, seq


def _replies_to_batch_slowly(
    headers: Sequence[bytes], payloads: Sequence[bytes], last: int, subject_regex: str | None
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """One message at a time (a reply whose server lines are not where the fast path expects them)."""
    from ..message import Msg

    stored = [StoredMessage(Msg.make("", p, header=h)) for h, p in zip(headers, payloads, strict=True)]
    in_range = [m for m in stored if m.seq <= last]
    if subject_regex is not None:
        matcher = re.compile(subject_regex)
        kept = [m for m in in_range if matcher.match(m.subject)]
    else:
        kept = in_range
    import pyarrow as pa

    return stored_to_batch(kept), len(in_range), pa.array([m.seq for m in stored], pa.int64())


def stored_to_batch(rows: Sequence[StoredMessage]) -> pa.RecordBatch:
    """Rows from messages already parsed (the ordered-consumer fallback for streams without direct get)."""
    import pyarrow as pa

    headers = [
        header_map(m.headers) if len(m.headers) else None
        for m in rows
    ]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.subject for m in rows], pa.string()),
            pa.array([m.data for m in rows], pa.binary()),
            pa.array(headers, pa.map_(pa.string(), pa.list_(pa.string()))),
            pa.array([m.stream for m in rows], pa.string()),
            pa.array([m.seq for m in rows], pa.int64()),
            pa.array([m.time for m in rows], pa.timestamp("us", tz="UTC")),
        ],
        schema=arrow_schema(),
    )


__all__ = [
    "MARKER_REASON", "SCHEMA",
    "PulledRun", "arrow_schema", "cut_deliveries", "deliveries_to_batch", "header_map", "parts_to_batches",
    "replies_to_batch", "run_to_batch", "stored_to_batch", "subject_filter_regex",
]
