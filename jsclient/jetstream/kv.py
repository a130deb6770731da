"""Key-value store on JetStream, in the standard bucket layout other NATS clients use.

Bucket ``B`` is the stream ``KV_B`` with subjects ``$KV.B.>``; key ``k`` is
the subject ``$KV.B.k``; deletes and purges are empty messages with a
``KV-Operation`` header (a purge also rolls the subject up with
``Nats-Rollup: sub``).  Reads use direct get; watches, ``keys`` and
``history`` use ordered consumers.  A bucket with limit markers (ADR-48,
server 2.11+) also gets markers from the server, with a
``Nats-Marker-Reason`` header: MaxAge and Purge read as a purge, Remove as
a delete.

Runs on the caller's thread; a :class:`KeyValue` may be shared: its only
mutable state is a cache of checked keys, which threads fill in any order.
A :class:`KeyWatcher` belongs to the thread that reads it.
"""

from __future__ import annotations

import datetime as dt
import inspect
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from msgspec import UNSET

from ..checks import seconds, whole, whole_seconds
from ..errors import (
    BucketNotFoundError,
    InvalidArgumentError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyWrongRevisionError,
    MessageNotFoundError,
    NoRespondersError,
    StreamNotFoundError,
    WrongLastSequenceError,
)
from ..headers import Headers, delivery_head, status_of
from ..message import Msg
from ..protocol import ReplyShape, remember
from ..timeouts import take_limit
from . import api
from .api import ConsumerConfig, DeliverPolicy, PubAck, StreamConfig
from .direct import (
    DELIVERY_REPLY,
    LastRequest,
    StoredMessage,
    fixed_delivery,
    fixed_tail,
    no_direct,
    parse_timestamp,
)
from .msgopts import TTL, ttl_value
from .status import Request, classify_header, reply_error
from .watch import Watch

if TYPE_CHECKING:
    from .context import JetStream
    from .ordered import OrderedSubscription

PUT, DEL, PURGE = "PUT", "DEL", "PURGE"
OPERATION_HEADER = "KV-Operation"
MARKER_REASON_HEADER = "Nats-Marker-Reason"
#: ADR-48: what a server marker means to a bucket.
_MARKER_OPERATIONS = {"MaxAge": PURGE, "Purge": PURGE, "Remove": DEL}
_BUCKET = re.compile(r"^[a-zA-Z0-9_-]+$")
_KEY = re.compile(r"^[-/_=.a-zA-Z0-9]+$")
_KEY_FILTER = re.compile(r"^[-/_=.a-zA-Z0-9*>]+$")


def check_bucket(bucket: Any) -> str:
    if not isinstance(bucket, str) or not _BUCKET.match(bucket):
        raise InvalidArgumentError(f"bucket name {bucket!r} must be letters, digits, '-' or '_'")
    return bucket


def check_key(key: Any, allow_wildcards: bool = False) -> str:
    pattern = _KEY_FILTER if allow_wildcards else _KEY
    what = "key filter" if allow_wildcards else "key"
    if not isinstance(key, str) or not pattern.match(key):
        allowed = "letters, digits and - / _ = ." + (" * >" if allow_wildcards else "")
        raise InvalidArgumentError(f"{what} {key!r} must use only {allowed}")
    if key.startswith(".") or key.endswith(".") or ".." in key:
        raise InvalidArgumentError(f"{what} {key!r} has an empty token")
    if not allow_wildcards and key.startswith("_kv"):
        raise InvalidArgumentError(f"key {key!r}: keys starting with '_kv' are reserved")
    return key


class KeyValueEntry(NamedTuple):
    """One entry of a key: a value, or a delete or purge marker (see ``operation``)."""

    #: The bucket's name.
    bucket: str
    #: The key.
    key: str
    #: The value (``b""`` for a marker, and for every entry of a ``meta_only`` watch).
    value: bytes
    #: The entry's revision, its stream sequence (what ``update``, ``delete`` and ``purge`` take as ``last``).
    revision: int
    #: When the entry was stored (None when not known).
    created: dt.datetime | None
    #: "PUT" for a value, "DEL" for a delete marker, "PURGE" for a purge marker.
    operation: str = PUT
    #: Entries after this one for the same key filter (watch and history).
    delta: int = 0


#: Builds a KeyValueEntry from all its fields without the Python-level ``__new__`` a NamedTuple has
#: (kv.get's hot path: a frame less between the reply's arrival and the return).
_new_entry = tuple.__new__
_fromisoformat = dt.datetime.fromisoformat


class KeyValueStatus(NamedTuple):
    """A bucket's settings and size, from its stream's info (``kv.status()``, ``js.key_values()``)."""

    #: The bucket's name.
    bucket: str
    #: How many entries it holds (values and markers, history included).
    values: int
    #: How many entries it keeps per key.
    history: int
    #: Seconds an entry lives (0 for no limit).
    ttl: float
    #: How many bytes its stream holds.
    bytes: int
    #: Where its stream is stored ("file" or "memory").
    backing_store: str
    #: The info of the stream behind it.
    info: api.StreamInfo
    #: How long the server's markers of removed keys live (0 when the bucket has no limit markers).
    limit_marker_ttl: float = 0.0


def _entry_shape(bucket: str, stream: str, key: str, head: bytes) -> ReplyShape[KeyValueEntry]:
    """How get()'s caller reads its own reply: the entry of a value put without headers, in one match
    (else read in full, or the error its status means).

    The same answer again (the value unchanged since) comes with the same groups, and gets the same
    entry: a tuple of immutable values, which no caller can change under another.
    """
    last: tuple[tuple[bytes, ...], KeyValueEntry | None] = ((), None)  # (groups, their entry)

    def read(groups: tuple[bytes, ...]) -> KeyValueEntry | None:
        nonlocal last
        seen_groups, seen_entry = last
        if groups is seen_groups:
            return seen_entry
        _, _, _, block_head, seq, stamp, value = groups
        entry = None
        if block_head == head:  # else another stream's (a mirror's) or subject's
            try:
                created = _fromisoformat(stamp.decode())
            except ValueError:  # UnicodeDecodeError included: get() reads any other form the long way
                pass
            else:
                entry = _new_entry(KeyValueEntry, (bucket, key, value, int(seq), created, PUT, 0))
        last = (groups, entry)  # one store: another thread reads both or neither
        return entry

    def decode(reply: Msg) -> KeyValueEntry:
        # A value put without headers: no KV-Operation, so a put, and only two fields to read.
        header = reply.header
        if header:
            tail = fixed_tail(header, head)
            if tail is not None:
                return _new_entry(KeyValueEntry, (bucket, key, reply.data, tail.seq, tail.time, PUT, 0))
            code = status_of(header)
            if code == 404:
                raise KeyNotFoundError(f"key {key!r} not found in bucket {bucket!r}")
            if code is not None:
                raise reply_error(classify_header(header), Request.DIRECT_GET, stream)
            fixed = fixed_delivery(header)  # another stream answered (a mirror, say)
            if fixed is not None:
                return KeyValueEntry(bucket, key, reply.data, fixed.seq, parse_timestamp(fixed.stamp))
        return _stored_entry(bucket, key, StoredMessage(reply))

    return ReplyShape(DELIVERY_REPLY, read, decode=decode, headers=True, repeats=True)


def _stored_entry(bucket: str, key: str, stored: StoredMessage) -> KeyValueEntry:
    """The entry get() returns; KeyDeletedError for a delete or purge marker."""
    operation = entry_operation(stored.get_header(OPERATION_HEADER), stored.get_header(MARKER_REASON_HEADER))
    entry = KeyValueEntry(bucket, key, stored.data, stored.seq, stored.time, operation)
    if operation != PUT:
        raise KeyDeletedError(f"key {key!r} was {'deleted' if operation == DEL else 'purged'}", entry)
    return entry


def entry_operation(op: str | None, reason: str | None = None) -> str:
    """The entry's operation from its KV-Operation header, or a server marker's reason (neither: a put)."""
    if op in (DEL, PURGE):
        return op
    return _MARKER_OPERATIONS.get(reason, PUT) if reason is not None else PUT


class KeyValue:
    """One bucket.  Get it from ``js.create_key_value`` or ``js.key_value``.

    Share it between threads.  Its calls wait the context's ``timeout`` for
    the server's answer.  A key is letters, digits and ``- / _ = .``, with no
    empty token, and does not start with ``_kv``.

    Every call may raise:
        InvalidArgumentError: A bad key (as above), or another argument its Args do not allow; raised before
            anything is sent.
        BadPayloadError: A value that is not bytes-like.
        FeatureNotSupportedError: A ``ttl`` on a server before 2.11; raised before anything is sent.
        MessageTTLError: A ``ttl`` given to a bucket that takes none (it was made without ``limit_marker_ttl``).
        StreamNotFoundError: The bucket was deleted (a write says it as NoStreamResponseError: no stream
            stores the key).
        JetStreamAPIError: Any other refusal by the server, such as a value over the bucket's
            ``max_value_size``; ``err_code`` carries the server's code.
        TimeoutError: No answer within the context's timeout.
        ConnectionClosedError: The connection is closed or draining.
    """

    def __init__(self, js: JetStream, bucket: str, direct: bool, *, origin: str | None = None) -> None:
        """Bind to the bucket; the context's calls make these, users do not.

        Args:
            js: The context whose requests it makes.
            bucket: The bucket's name.
            direct: Whether its stream allows direct gets, which reads then use (else the stream's API).
            origin: The bucket this one mirrors, or None.

        Raises:
            : Nothing; it only keeps what it is given.
        """
        self._js = js
        self.bucket = bucket
        self.stream = f"KV_{bucket}"
        #: The bucket this one mirrors (None for none); its keys keep the origin's subjects, and writes go there.
        self.origin = origin
        self._prefix = f"$KV.{origin or bucket}."
        self._direct = direct
        #: key -> how get() reads its value (the shape of its answer: :func:`_entry_shape`), for keys
        #: already checked (a cache: losing it costs a check).
        self._last_requests: dict[str, LastRequest[KeyValueEntry]] = {}

    def __repr__(self) -> str:
        return f"<KeyValue bucket={self.bucket!r}>"

    # -- reading ---------------------------------------------------------------------
    def get(self, key: str, revision: int | None = None) -> KeyValueEntry:
        """The current value (or the entry at ``revision``); KeyNotFoundError if none.

        Args:
            key: The key (no wildcards).
            revision: The revision of the entry wanted; left out, the latest.

        Returns:
            The entry, with its value, its revision and the time it was stored.

        Raises:
            KeyNotFoundError: The key has no value: never set, its entries removed, or no entry at ``revision``.
            KeyDeletedError: A KeyNotFoundError for an entry that is a delete or purge marker (its ``entry``).
        """
        if revision is None and self._direct:
            # The hot path: a key checked before has its direct-get subject ready.
            known = self._last_requests.get(key) if type(key) is str else None
            if known is None:
                known = self._last_request(key)
            js = self._js
            try:
                return js.conn.core.request(known.request, b"", js.timeout, None, known.shape)
            except NoRespondersError:
                raise no_direct(js, self.stream) from None
        check_key(key)
        subject = self._prefix + key
        try:
            if revision is None:
                stored = self._read(last_by_subj=subject)
            else:
                whole("revision", revision)
                stored = self._read(seq=revision)
                if stored.subject != subject:
                    raise KeyNotFoundError(f"key {key!r} has no revision {revision} in bucket {self.bucket!r}")
        except MessageNotFoundError:
            raise KeyNotFoundError(f"key {key!r} not found in bucket {self.bucket!r}") from None
        return _stored_entry(self.bucket, key, stored)

    def _last_request(self, key: str) -> LastRequest[KeyValueEntry]:
        """What get() needs to know of ``key``, once the key is checked (then remembered)."""
        check_key(key)
        subject = self._prefix + key
        request = f"{self._js.prefix}.DIRECT.GET.{self.stream}.{subject}"
        head = delivery_head(self.stream, subject)
        shape = _entry_shape(self.bucket, self.stream, key, head)
        return remember(self._last_requests, key, LastRequest(request, head, shape))

    def _read(self, *, last_by_subj: str | None = None, seq: int | None = None) -> StoredMessage:
        if self._direct:
            return self._js.direct_get(self.stream, seq, last_by_subj=last_by_subj)
        raw = self._js.get_msg(self.stream, seq=seq, last_by_subj=last_by_subj)
        msg = Msg.make(
            raw.subject,
            raw.data,
            header=_with_delivery_headers(raw.hdrs, self.stream, raw.subject, raw.seq, raw.time),
        )
        return StoredMessage(msg)

    # -- writing ---------------------------------------------------------------------
    def put(self, key: str, value: bytes) -> int:
        """Set the value; returns its revision.

        Args:
            key: The key.
            value: The value (bytes-like).

        Returns:
            The new entry's revision.

        Raises:
            InvalidArgumentError: A bad key, or a value over the server's max_payload, raised before anything
                is sent.
            TimeoutError: No ack within the context's timeout; the value may still have been stored.
            JetStreamAPIError: The bucket refused the value, for example one over its ``max_value_size``, or a
                full bucket.
        """
        check_key(key)
        return self._js.publish(self._prefix + key, value).seq

    def create(self, key: str, value: bytes, *, ttl: TTL | None = None) -> int:
        """Set the value only if the key has none (never set, deleted or purged).

        Args:
            key: The key.
            value: The value (bytes-like).
            ttl: Remove the key after this long, leaving a purge marker: whole seconds >= 1 (an int, a float
                without a fraction or a timedelta), or "never".  ADR-48: the bucket must be made with
                ``limit_marker_ttl``.

        Returns:
            The new entry's revision.

        Raises:
            InvalidArgumentError: A bad key or ``ttl``, or a value over the server's max_payload, raised before
                anything is sent.
            KeyExistsError: The key has a value.
            TimeoutError: No ack within the context's timeout; the value may still have been stored.
            JetStreamAPIError: Any other refusal, such as a value over the bucket's ``max_value_size``.
        """
        check_key(key)
        if ttl is not None:
            ttl_value("ttl", ttl)
        try:
            return self._js.publish(self._prefix + key, value, expected_last_subject_seq=0, ttl=ttl).seq
        except WrongLastSequenceError as exc:
            refused = exc  # the server's refusal, which KeyExistsError carries
        try:
            self.get(key)
        except KeyDeletedError as deleted:
            try:
                return self._update(key, value, deleted.entry.revision, ttl)
            except KeyWrongRevisionError:
                pass
        except KeyNotFoundError:
            pass
        raise KeyExistsError(
            f"key {key!r} already exists in bucket {self.bucket!r}",
            code=refused.code, err_code=refused.err_code, description=refused.description, outcome=refused.outcome,
        ) from refused

    def update(self, key: str, value: bytes, last: int) -> int:
        """Set the value only if the key's revision is still ``last``.

        Args:
            key: The key.
            value: The value (bytes-like).
            last: The revision of the key's latest entry (a marker's too); 0 for a key that has no entry at all.

        Returns:
            The new entry's revision.

        Raises:
            InvalidArgumentError: A bad key or ``last``, or a value over the server's max_payload, raised
                before anything is sent.
            KeyWrongRevisionError: The key is at another revision.
            TimeoutError: No ack within the context's timeout; the value may still have been stored.
            JetStreamAPIError: Any other refusal, such as a value over the bucket's ``max_value_size``.
        """
        return self._update(key, value, last, None)

    def _update(self, key: str, value: bytes, last: int, ttl: TTL | None) -> int:
        check_key(key)
        whole("last", last, 0)
        try:
            return self._js.publish(self._prefix + key, value, expected_last_subject_seq=last, ttl=ttl).seq
        except WrongLastSequenceError as exc:
            raise KeyWrongRevisionError(
                f"key {key!r} in bucket {self.bucket!r} is not at revision {last}: {exc.description}",
                code=exc.code, err_code=exc.err_code, description=exc.description, outcome=exc.outcome,
            ) from exc

    def delete(self, key: str, last: int | None = None) -> int:
        """Mark the key deleted (history is kept); with ``last``, only if still at that revision.

        Args:
            key: The key.
            last: Delete only if the key's latest entry has this revision.

        Returns:
            The revision of the delete marker.

        Raises:
            KeyWrongRevisionError: ``last`` was given and the key is at another revision.
            TimeoutError: No ack within the context's timeout; the marker may still have been stored.
        """
        return self._marker(key, Headers({OPERATION_HEADER: DEL}), last)

    def purge(self, key: str, last: int | None = None, *, ttl: TTL | None = None) -> int:
        """Delete the key and its history, leaving one purge marker (that lives ``ttl``, when given: ADR-48).

        Args:
            key: The key.
            last: Purge only if the key's latest entry has this revision.
            ttl: How long the purge marker lives: whole seconds >= 1, or "never"; the bucket must be made with
                ``limit_marker_ttl``.

        Returns:
            The revision of the purge marker.

        Raises:
            KeyWrongRevisionError: ``last`` was given and the key is at another revision.
            TimeoutError: No ack within the context's timeout; the marker may still have been stored.
        """
        return self._marker(key, Headers({OPERATION_HEADER: PURGE, "Nats-Rollup": "sub"}), last, ttl)

    def _marker(self, key: str, headers: Headers, last: int | None, ttl: TTL | None = None) -> int:
        check_key(key)
        if ttl is not None:
            ttl_value("ttl", ttl)
        try:
            ack: PubAck = self._js.publish(
                self._prefix + key, b"", headers=headers, expected_last_subject_seq=last, ttl=ttl
            )
        except WrongLastSequenceError as exc:
            raise KeyWrongRevisionError(
                f"key {key!r} is not at revision {last}: {exc.description}",
                code=exc.code, err_code=exc.err_code, description=exc.description, outcome=exc.outcome,
            ) from exc
        return ack.seq

    # -- scanning ----------------------------------------------------------------------
    def watch(
        self,
        keys: str | list[str] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> KeyWatcher:
        """Updates for matching keys: current values first, then ``None`` once, then live changes.

        Args:
            keys: One key filter or a non-empty list of them (``*`` matches a token, ``>`` the rest).
            include_history: Every retained entry of each key first, not only the latest.
            ignore_deletes: Leave deletes and purges out.
            meta_only: Leave the values out: entries carry ``b""`` (for keys and revisions alone).
            updates_only: Skip the current values: the ``None`` comes at once.
            resume_from_revision: Start at that revision, every entry from there on counting as initial.

        Returns:
            The watcher; ``stop()`` (or a with block) ends it.

        Raises:
            InvalidArgumentError: A bad filter, flag or revision, or ``updates_only``, ``include_history`` and
                ``resume_from_revision`` together (any two), raised before anything is sent.
            TimeoutError: Creating the watch's consumer got no answer, retried for up to a minute; or its info
                got none within the context's timeout.
        """
        filters = [keys] if isinstance(keys, str) else keys
        if not isinstance(filters, list) or not filters:
            raise InvalidArgumentError(f"keys must be a key filter or a non-empty list of them, not {keys!r}")
        for key in filters:
            check_key(key, allow_wildcards=True)
        for name, flag in (("include_history", include_history), ("ignore_deletes", ignore_deletes),
                           ("meta_only", meta_only), ("updates_only", updates_only)):
            if not isinstance(flag, bool):
                raise InvalidArgumentError(f"{name} must be True or False, not {flag!r}")
        if resume_from_revision is not None:
            whole("resume_from_revision", resume_from_revision)
        if updates_only and (include_history or resume_from_revision is not None):
            other = "include_history" if include_history else "resume_from_revision"
            raise InvalidArgumentError(f"updates_only cannot be combined with {other}")
        if include_history and resume_from_revision is not None:
            raise InvalidArgumentError("include_history cannot be combined with resume_from_revision")
        if resume_from_revision is not None:
            start = {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE.value, "opt_start_seq": resume_from_revision}
        elif updates_only:
            start = {"deliver_policy": DeliverPolicy.NEW.value}
        else:
            start = {"deliver_policy": (DeliverPolicy.ALL if include_history else DeliverPolicy.LAST_PER_SUBJECT).value}
        return KeyWatcher(
            self, self._js, self._prefix, filters, start, ignore_deletes=ignore_deletes, meta_only=meta_only
        )

    def keys(self, filter: str = ">") -> list[str]:  # noqa: A002 - the natural name
        """Keys that currently have a value.

        Args:
            filter: Only keys matching this filter (``*`` matches a token, ``>`` the rest).

        Returns:
            The keys.

        Raises:
            TimeoutError: An entry did not come within the context's timeout, or the consumer that reads them
                could not be made in time.
        """
        found: dict[str, None] = {}
        with self.watch(filter, ignore_deletes=False, meta_only=True) as watcher:
            for entry in watcher.initial():
                if entry.operation == PUT:
                    found[entry.key] = None
                else:
                    found.pop(entry.key, None)
        return list(found)

    def purge_deletes(self, older_than: float = 1800.0) -> int:
        """Remove deleted and purged keys' markers older than ``older_than`` seconds (with what remains
        of their history); younger markers stay, alone, so watchers still see those keys go.

        Args:
            older_than: Seconds a marker must be older than to go (default 30 minutes); a negative number
                removes every marker.

        Returns:
            How many keys were cleaned.

        Raises:
            InvalidArgumentError: ``older_than`` is not a finite number, raised before anything is sent.
            TimeoutError: An entry did not come, or a purge got no answer, within the context's timeout.
        """
        if isinstance(older_than, bool) or not isinstance(older_than, (int, float)) or older_than != older_than:
            raise InvalidArgumentError(f"older_than must be a number of seconds, not {older_than!r}")
        try:
            cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=older_than)
        except OverflowError:  # infinite, or further back than a datetime goes: every marker is younger
            raise InvalidArgumentError(f"older_than must be a finite number of seconds, not {older_than!r}") from None
        markers: dict[str, KeyValueEntry] = {}
        with self.watch(">", meta_only=True) as watcher:
            for entry in watcher.initial():
                if entry.operation == PUT:
                    markers.pop(entry.key, None)
                else:
                    markers[entry.key] = entry
        for key, entry in markers.items():
            old = entry.created is None or entry.created < cutoff
            self._js.purge_stream(self.stream, subject=self._prefix + key, keep=None if old else 1)
        return len(markers)

    def history(self, key: str) -> list[KeyValueEntry]:
        """Every retained entry of the key, oldest first (deletes and purges included).

        Args:
            key: The key (no wildcards).

        Returns:
            The entries, oldest first.

        Raises:
            KeyNotFoundError: The key has no entry at all.
            TimeoutError: An entry did not come within the context's timeout, or the consumer that reads them
                could not be made in time.
        """
        check_key(key)
        with self.watch(key, include_history=True) as watcher:
            entries = list(watcher.initial())
        if not entries:
            raise KeyNotFoundError(f"key {key!r} not found in bucket {self.bucket!r}")
        return entries

    def status(self) -> KeyValueStatus:
        """The bucket's settings and size, asked of the server.

        Returns:
            The bucket's status.
        """
        return bucket_status(self.bucket, self._js.stream_info(self.stream))


def _with_delivery_headers(
    hdrs: bytes | None, stream: str, subject: str, seq: int, time: dt.datetime | None
) -> bytes:
    """Headers of a STREAM.MSG.GET reply in the shape a direct get reply has."""
    from ..headers import parse

    headers = parse(hdrs) if hdrs else Headers()
    headers["Nats-Stream"] = stream
    headers["Nats-Subject"] = subject
    headers["Nats-Sequence"] = str(seq)
    headers["Nats-Time-Stamp"] = (time or dt.datetime.now(dt.UTC)).isoformat()
    return headers.encode()


class KeyWatcher(Watch[KeyValueEntry]):
    """``next(timeout)`` gives entries; ``None`` once marks the end of the initial values.

    Made by :meth:`KeyValue.watch`.  Iterating it gives the same (the
    ``None`` too) until it is stopped; ``stop()`` or a with block ends it.
    It belongs to the thread that reads it.
    """

    def __init__(
        self, kv: KeyValue, js: JetStream, prefix: str, keys: list[str], start: dict[str, Any], *,
        ignore_deletes: bool, meta_only: bool,
    ) -> None:
        """Start an ordered consumer on the keys; :meth:`KeyValue.watch` makes watchers.

        Args:
            kv: The bucket watched.
            js: The context whose requests it makes.
            prefix: The subject prefix of the bucket's keys (the origin's, for a mirror).
            keys: The key filters.
            start: Where the consumer starts (its deliver policy fields).
            ignore_deletes: Leave deletes and purges out.
            meta_only: Leave the values out.

        Raises:
            StreamNotFoundError: The bucket was deleted.
            TimeoutError: Creating the consumer got no answer, retried for up to a minute; or its info got
                none within the context's timeout.
            JetStreamAPIError: Any other refusal.
            ConnectionClosedError: The connection is closed.
        """
        self._bucket = kv.bucket
        self._prefix_size = len(prefix)  # a key's subject is the bucket's prefix + the key
        self._ignore_deletes = ignore_deletes
        self._timeout = js.timeout
        subjects = [prefix + key for key in keys]
        config = ConsumerConfig(
            **start,
            headers_only=True if meta_only else UNSET,
            filter_subjects=subjects if len(subjects) > 1 else UNSET,
        )
        self._sub: OrderedSubscription = js.subscribe(
            subjects[0] if len(subjects) == 1 else None, stream=kv.stream, ordered=True, config=config
        )
        # Only live changes: no initial values, so the end of them (None) comes first (ADR-8).
        updates_only = start["deliver_policy"] == DeliverPolicy.NEW.value
        self._initial_done = updates_only or self._initial_pending(js, kv.stream) == 0
        self._marker_sent = False

    def next(self, timeout: float | None = 1.0) -> KeyValueEntry | None:
        """The next entry; ``None`` exactly once, after the initial values.  TimeoutError if none comes.

        Args:
            timeout: Seconds to wait; ``None``, no limit; ``0``, only what already arrived.

        Returns:
            The next entry (see its ``operation``), or None, once, at the end of the initial values.

        Raises:
            TimeoutError: Nothing came within ``timeout``.
            InvalidArgumentError: A bad ``timeout``.
            SubscriptionClosedError: The watcher was stopped.
            JetStreamAPIError: Recreating the watch's consumer failed, for example with StreamNotFoundError once
                the bucket was deleted.
            ConnectionClosedError: The connection is closed.
        """
        timeout = take_limit(timeout)
        if self._initial_done and not self._marker_sent:
            self._marker_sent = True
            return None
        while True:
            msg = self._sub.next_msg(timeout=timeout)
            meta = msg.metadata
            key = msg.subject[self._prefix_size :]
            op = entry_operation(msg.headers.get(OPERATION_HEADER), msg.headers.get(MARKER_REASON_HEADER))
            if meta.num_pending == 0:
                self._initial_done = True
            if self._ignore_deletes and op != PUT:
                if self._initial_done and not self._marker_sent:
                    self._marker_sent = True
                    return None
                continue
            value = b"" if msg.headers.get("Nats-Msg-Size") is not None else msg.data
            return KeyValueEntry(
                self._bucket, key, value, meta.sequence.stream, meta.timestamp, op, meta.num_pending
            )


def bucket_config(
    bucket: str,
    *,
    history: int = 1,
    ttl: float | None = None,
    max_bytes: int | None = None,
    max_value_size: int | None = None,
    storage: str = "file",
    replicas: int = 1,
    description: str | None = None,
    limit_marker_ttl: float | None = None,
    compression: bool = False,
    mirror: str | None = None,
    sources: list[str] | None = None,
) -> StreamConfig:
    """The standard stream for a bucket (the layout other NATS clients expect).

    ``limit_marker_ttl`` (ADR-48): keys may have TTLs, and a key removed by
    age leaves a marker that lives that long, so watchers see it go.
    ``mirror``: a read-only copy of that bucket (its writes go to the
    origin); ``sources``: buckets whose keys are copied into this one.
    """
    check_bucket(bucket)
    if whole("history", history) > 64:
        raise InvalidArgumentError(f"history must be 1 to 64, not {history!r}")
    if ttl is not None:
        seconds("ttl", ttl, allow_zero=True)
    duplicate_window = 120.0 if not ttl else min(float(ttl), 120.0)
    fields: dict[str, Any] = {
        "name": f"KV_{bucket}",
        "subjects": [f"$KV.{bucket}.>"],
        "max_msgs_per_subject": history,
        "max_bytes": max_bytes if max_bytes is not None else -1,
        "max_msg_size": max_value_size if max_value_size is not None else -1,
        "storage": storage,
        "num_replicas": replicas,
        "discard": "new",
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
        "duplicate_window": duplicate_window,
        "max_age": float(ttl or 0),
    }
    if description is not None:
        fields["description"] = description
    if not isinstance(compression, bool):
        raise InvalidArgumentError(f"compression must be True or False, not {compression!r}")
    if compression:
        fields["compression"] = "s2"
    if mirror is not None:
        if sources is not None or limit_marker_ttl is not None:
            other = "sources" if sources is not None else "limit_marker_ttl"
            raise InvalidArgumentError(f"a mirror bucket cannot have {other} (it copies its origin as it is)")
        del fields["subjects"]
        fields["mirror"] = api.StreamSource(name=f"KV_{check_bucket(mirror)}")
        fields["mirror_direct"] = True
    if sources is not None:
        if not isinstance(sources, list) or not sources:
            raise InvalidArgumentError(f"sources must be a non-empty list of bucket names, not {sources!r}")
        fields["sources"] = [
            api.StreamSource(
                name=f"KV_{check_bucket(source)}",
                subject_transforms=[api.SubjectTransform(src=f"$KV.{source}.>", dest=f"$KV.{bucket}.>")],
            )
            for source in sources
        ]
    if limit_marker_ttl is not None:
        # A marker's TTL is a per-message TTL: whole seconds, like ttl= on create and purge.
        marker_ttl = whole_seconds("limit_marker_ttl", limit_marker_ttl, int(api.MIN_MESSAGE_TTL))
        fields["allow_msg_ttl"] = True
        fields["subject_delete_marker_ttl"] = float(marker_ttl)
    return api.validate_stream_config(StreamConfig(**fields))


def bucket_status(bucket: str, info: api.StreamInfo) -> KeyValueStatus:
    """A bucket's status from its stream's info."""
    cfg = info.config
    history = cfg.max_msgs_per_subject if isinstance(cfg.max_msgs_per_subject, int) else 1
    ttl = float(cfg.max_age) if isinstance(cfg.max_age, float) else 0.0
    markers = cfg.subject_delete_marker_ttl
    return KeyValueStatus(
        bucket, info.state.messages, history, ttl, info.state.bytes, str(cfg.storage), info,
        float(markers) if isinstance(markers, float) else 0.0,
    )


#: The options of a bucket (create_key_value's, which update_key_value takes too).
BUCKET_OPTIONS = frozenset(inspect.signature(bucket_config).parameters) - {"bucket"}


def open_bucket(js: JetStream, bucket: str) -> KeyValue:
    check_bucket(bucket)
    try:
        info = js.stream_info(f"KV_{bucket}")
    except StreamNotFoundError:
        raise BucketNotFoundError(f"bucket {bucket!r} not found") from None
    return KeyValue(js, bucket, bool(info.config.allow_direct), origin=mirror_origin(info.config))


def mirror_origin(config: StreamConfig) -> str | None:
    """The bucket a bucket's stream mirrors, if it is a mirror of one."""
    mirror = config.mirror
    if isinstance(mirror, api.StreamSource) and mirror.name.startswith("KV_"):
        return mirror.name[3:]
    return None

