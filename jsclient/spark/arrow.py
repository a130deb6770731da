"""Pulled messages and direct-get replies to Arrow record batches, in bulk.

Pure functions on the calling thread (an executor's task thread); no locks.
pyarrow is imported lazily by the callers' modules, never by ``jsclient``.

Reading from a consumer: each message's ``<subject> <sid> <ack reply>``
line is split at spaces and its ack reply at dots, in C++; the stream
sequence and the time stamp (nanoseconds) sit at fixed places among the
reply's tokens, and the header block is the message's own.

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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..headers import Headers, parse
from ..jetstream.direct import StoredMessage
from ..jetstream.kv import MARKER_REASON_HEADER as MARKER_REASON
from ..jetstream.metadata import parse_metadata

if TYPE_CHECKING:
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
    "arrow_schema", "deliveries_to_batch", "header_map", "replies_to_batch", "stored_to_batch",
    "subject_filter_regex",
]
