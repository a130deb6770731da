"""Object store on JetStream (ADR-20), in the layout the other NATS clients use.

Bucket ``B`` is the stream ``OBJ_B``.  An object's bytes are chunks on
``$O.B.C.<nuid>`` (a fresh nuid per put); its description is a JSON message
on ``$O.B.M.<base64url(name)>``, rolled up so only the latest stays.  The
description goes last: until it is stored, readers see the previous version
(or nothing), so a put cut short never shows a half object.  The previous
version's chunks are purged once the new description is stored; a put that
fails purges the chunks it stored, and when the stream cannot be reached
(perhaps why it failed) or chunks are still landing, a ``jsclient-obj-purge``
thread purges until the subject stays empty, for ``PURGE_RETRY`` (ten
minutes) while the connection is open.

Runs on the caller's thread.  An :class:`ObjectStore` holds no mutable state
and may be shared; an :class:`ObjectReader` or :class:`ObjectWatcher` belongs
to the thread that reads it.  Memory stays bounded: a put keeps at most
``PUT_WINDOW`` chunks unacknowledged, a get asks for ``GET_BATCH_BYTES`` at a
time (see :mod:`.objectreader`).

This module holds the bucket: :class:`ObjectStore` (put, get, delete, links,
watch), its stream's config and status.  Objects' descriptions are in
:mod:`.objectinfo`, the reading of their bytes in :mod:`.objectreader`; both are
re-exported here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from msgspec import UNSET
from tenacity import RetryError

from ..backoff import Backoff
from ..checks import seconds, whole
from ..errors import (
    DirectGetDisabledError,
    Error,
    InvalidArgumentError,
    MessageNotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStoreNotFoundError,
    StreamNotFoundError,
)
from ..timeouts import DEFAULT, Timeout, answer_limit, take_limit
from . import api
from .api import ConsumerConfig, DeliverPolicy, PubAck, StreamConfig
from .kv import check_bucket
from .objectinfo import (
    DEFAULT_CHUNK_SIZE,
    DIGEST_PREFIX,
    HeadersArg,
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    check_headers,
    check_metadata,
    check_name,
    digest_bytes,
    digest_of,
    encode_name,
)
from .objectreader import GET_BATCH_BYTES, ObjectReader
from .watch import Watch

if TYPE_CHECKING:
    from .context import JetStream
    from .ordered import OrderedSubscription

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DIGEST_PREFIX",
    "GET_BATCH_BYTES",
    "PUT_WINDOW",
    "ROLLUP",
    "Data",
    "HeadersArg",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectReader",
    "ObjectStore",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "bucket_status",
    "check_name",
    "digest_bytes",
    "digest_of",
    "encode_name",
    "open_store",
    "store_config",
]

#: Chunks a put leaves unacknowledged at most: their bytes are the put's memory (8 MiB of default chunks),
#: and a deeper window gained little throughput on loopback.
PUT_WINDOW = 64
#: How a failed put's chunks are purged when the stream cannot be reached at once: for up to ten minutes.
PURGE_RETRY = Backoff(initial=0.1, maximum=5.0, within=600.0)
#: After a purge, how long chunks still on their way get to land before the subject is looked at again.
STRAGGLER_WAIT = 0.5
ROLLUP = {"Nats-Rollup": "sub"}

Data = bytes | bytearray | memoryview | IO[bytes] | os.PathLike[str]


class ObjectStoreStatus(NamedTuple):
    """An object store's settings and size, from its stream's info (``obs.status()``, ``js.object_stores()``)."""

    #: The bucket's name.
    bucket: str
    #: Its description, if it has one.
    description: str | None
    #: Seconds an object lives (0 for no limit).
    ttl: float
    #: Where its stream is stored ("file" or "memory").
    storage: str
    #: How many replicas its stream has.
    replicas: int
    #: Whether it is sealed (no more changes, ever).
    sealed: bool
    #: How many bytes its stream holds (the chunks and the descriptions).
    size: int
    #: Whether its stream compresses what it stores (s2).
    compressed: bool
    #: The bucket's metadata.
    metadata: dict[str, str]
    #: The info of the stream behind it.
    info: api.StreamInfo
    #: Always "JetStream".
    backing_store: str = "JetStream"


def _now() -> dt.datetime:
    """ADR-20: what a put returns carries the current time as its mtime (the stored one has none)."""
    return dt.datetime.now(dt.UTC)



class ObjectStore:
    """One bucket.  Get it from ``js.create_object_store`` or ``js.object_store``.

    Share it between threads.  Its calls wait the context's ``timeout`` for
    the server's answer; ``put`` and the gets take a ``timeout`` of their own
    for the object's chunks.

    Every call may raise:
        InvalidArgumentError: A bad object name, or another argument its Args do not allow; raised before
            anything is sent.
        ObjectStoreNotFoundError: The bucket was deleted (``seal`` says StreamNotFoundError).
        JetStreamAPIError: Any other refusal by the server, for example from a sealed bucket; ``err_code``
            carries the server's code.
        TimeoutError: No answer within the context's timeout (or the call's ``timeout``, for the chunks).
        ConnectionClosedError: The connection is closed or draining.
    """

    def __init__(self, js: JetStream, bucket: str) -> None:
        """Bind to the bucket; the context's calls make these, users do not.

        Args:
            js: The context whose requests it makes.
            bucket: The bucket's name.

        Raises:
            : Nothing; it only keeps what it is given.
        """
        self._js = js
        self.bucket = bucket
        self.stream = f"OBJ_{bucket}"

    def __repr__(self) -> str:
        return f"<ObjectStore bucket={self.bucket!r}>"

    def _meta_subject(self, name: str) -> str:
        return f"$O.{self.bucket}.M.{encode_name(name)}"

    def _chunk_subject(self, nuid: str) -> str:
        return f"$O.{self.bucket}.C.{nuid}"

    # -- reading descriptions -----------------------------------------------------------
    def info(self, name: str, *, include_deleted: bool = False) -> ObjectInfo:
        """The object's description; ObjectNotFoundError if there is none (or it is deleted).

        Args:
            name: The object's name.
            include_deleted: Give a deleted object's description too (its ``deleted`` is True).

        Returns:
            The description (size, chunks, digest, headers and metadata), or the link it is.

        Raises:
            ObjectNotFoundError: No object of that name (or only a deleted one, unless ``include_deleted``).
        """
        found = self._info(check_name(name))
        if found is None or (found.deleted and not include_deleted):
            raise ObjectNotFoundError(f"object {name!r} not found in bucket {self.bucket!r}")
        return found

    def _info(self, name: str) -> ObjectInfo | None:
        subject = self._meta_subject(name)
        try:
            stored = self._js.direct_get(self.stream, last_by_subj=subject)
            return ObjectInfo.from_json(stored.data, stored.time)
        except DirectGetDisabledError:
            pass
        except MessageNotFoundError:
            return None
        except StreamNotFoundError:
            raise ObjectStoreNotFoundError(f"object store {self.bucket!r} not found") from None
        try:
            msg = self._js.get_msg(self.stream, last_by_subj=subject)
        except MessageNotFoundError:
            return None
        return ObjectInfo.from_json(msg.data, msg.time)

    def list(self, *, include_deleted: bool = False) -> list[ObjectInfo]:
        """Every object's description (links included), deleted ones only when asked.

        Args:
            include_deleted: Deleted objects' descriptions too.

        Returns:
            The descriptions, one per object.

        Raises:
            TimeoutError: A description did not come within the context's timeout, or the consumer that reads
                them could not be made in time.
        """
        with self.watch(include_history=False, ignore_deletes=not include_deleted) as watcher:
            return list(watcher.initial())

    def watch(
        self, *, include_history: bool = False, ignore_deletes: bool = False, updates_only: bool = False
    ) -> ObjectWatcher:
        """Descriptions as they change: current ones first, ``None`` once, then live changes.

        Args:
            include_history: Every description the bucket still holds first, not only each object's latest.
            ignore_deletes: Leave deleted objects out.
            updates_only: Skip the current descriptions: the ``None`` comes at once.

        Returns:
            The watcher; ``stop()`` (or a with block) ends it.

        Raises:
            InvalidArgumentError: A flag that is not a bool, or ``updates_only`` with ``include_history``,
                raised before anything is sent.
            TimeoutError: Creating the watch's consumer got no answer, retried for up to a minute; or its info
                got none within the context's timeout.
        """
        for what, flag in (("include_history", include_history), ("ignore_deletes", ignore_deletes),
                           ("updates_only", updates_only)):
            if not isinstance(flag, bool):
                raise InvalidArgumentError(f"{what} must be True or False, not {flag!r}")
        if include_history and updates_only:
            raise InvalidArgumentError("updates_only cannot be combined with include_history")
        policy = DeliverPolicy.LAST_PER_SUBJECT
        if updates_only or include_history:
            policy = DeliverPolicy.NEW if updates_only else DeliverPolicy.ALL
        return ObjectWatcher(self, self._js, policy, ignore_deletes=ignore_deletes)

    # -- reading objects ------------------------------------------------------------------
    def get(self, name: str, *, timeout: Timeout = DEFAULT) -> ObjectReader:
        """A readable file object over the object's bytes, fetched as read; the digest is checked at the end.

        A link to an object is followed; a link to a bucket is an error.

        Args:
            name: The object's name.
            timeout: Seconds each fetch of its chunks may wait for the server; left out, the context's;
                ``None``, no limit; ``0`` is refused.  The description is looked up within the context's.

        Returns:
            A binary file object (close it, or use a with block); its ``info`` is the object's description.

        Raises:
            InvalidArgumentError: A bad name or ``timeout`` (raised before anything is sent), or a link to a
                whole bucket.
            ObjectNotFoundError: No object of that name.
            ObjectStoreNotFoundError: The bucket was deleted, or a link leads to a bucket that is not there.
            DigestMismatchError: The description has no chunks, but a size or digest that is not an empty
                object's.
        """
        wait = answer_limit(timeout, self._js.timeout)
        info = self.info(name)
        if info.link is not None:
            if info.link.name is None:
                raise InvalidArgumentError(f"object {name!r} is a link to the bucket {info.link.bucket!r}")
            return self._js.object_store(info.link.bucket).get(info.link.name, timeout=wait)
        return ObjectReader(self._js, self.stream, self._chunk_subject(info.nuid), info, wait)

    def get_bytes(self, name: str, *, timeout: Timeout = DEFAULT) -> bytes:
        """The object's bytes, all of them, checked against its size and SHA-256 digest.

        Args:
            name: The object's name (a link to an object is followed).
            timeout: Seconds each fetch of its chunks may wait for the server; left out, the context's;
                ``None``, no limit; ``0`` is refused.

        Returns:
            The object's bytes.

        Raises:
            InvalidArgumentError: A bad name or ``timeout`` (raised before anything is sent), or a link to a
                whole bucket.
            ObjectNotFoundError: No object of that name, or its chunks went while it was read (it was replaced
                or deleted).
            DigestMismatchError: The bytes read do not match the object's size or digest.
            ObjectStoreNotFoundError: The bucket was deleted, or a link leads to a bucket that is not there.
            TimeoutError: No answer within the context's timeout (the description) or ``timeout`` (the chunks).
        """
        with self.get(name, timeout=timeout) as reader:
            return reader.readall()

    def get_file(self, name: str, path: str | os.PathLike[str], *, timeout: Timeout = DEFAULT) -> ObjectInfo:
        """Write the object to ``path``, through a temporary file: a failed or corrupt read leaves no file.

        Args:
            name: The object's name (a link to an object is followed).
            path: Where to write it; a file there is replaced.
            timeout: Seconds each fetch of its chunks may wait for the server; left out, the context's;
                ``None``, no limit; ``0`` is refused.

        Returns:
            The object's description.

        Raises:
            OSError: The file cannot be written.
            InvalidArgumentError: A bad name or ``timeout`` (raised before anything is sent), or a link to a
                whole bucket.
            ObjectNotFoundError: No object of that name, or its chunks went while it was read.
            DigestMismatchError: The bytes read do not match the object's size or digest.
            ObjectStoreNotFoundError: The bucket was deleted, or a link leads to a bucket that is not there.
            TimeoutError: No answer within the context's timeout (the description) or ``timeout`` (the chunks).
        """
        target = Path(path)
        partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
        with self.get(name, timeout=timeout) as reader:
            try:
                with open(partial, "wb") as out:
                    while chunk := reader.read(DEFAULT_CHUNK_SIZE * 8):
                        out.write(chunk)
                os.replace(partial, target)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(partial)
            return reader.info

    # -- writing --------------------------------------------------------------------------
    def put(
        self,
        name: str,
        data: Data,
        *,
        description: str | None = None,
        headers: HeadersArg | None = None,
        metadata: Mapping[str, str] | None = None,
        chunk_size: int | None = None,
        timeout: Timeout = DEFAULT,
        meta: ObjectMeta | None = None,
    ) -> ObjectInfo:
        """Store ``data`` (bytes, a binary file object, or a ``pathlib.Path``) as ``name``, in chunks.

        The description is stored last, so until then readers see the
        previous version; a put that fails leaves that version as it was.

        Args:
            name: The object's name (any non-empty str).
            data: The bytes: bytes-like, a binary file object (read to its end), or a path to a file
                (``os.PathLike``; a str is refused).
            description: A description stored with the object.
            headers: Headers stored with it: a name to a value or a list of values.
            metadata: Metadata stored with it, str to str.
            chunk_size: Bytes per chunk (128 KiB unless given).
            timeout: Seconds to wait for each chunk's ack and for the description's; left out, the context's;
                ``None``, no limit; ``0`` is refused.
            meta: An :class:`ObjectMeta` that carries the description, headers, metadata and chunk size instead
                of the keywords (not with them).

        Returns:
            The stored object's description, its ``mtime`` now.

        Raises:
            InvalidArgumentError: A bad name, description, headers, metadata, chunk size, ``timeout`` or
                ``data`` (a str, say), or ``meta`` with those keywords, raised before anything is sent; or a file
                object that gives str, not bytes.
            OSError: The file cannot be read.
            TimeoutError: A chunk's or the description's ack did not come within ``timeout``: the chunks stored
                are purged, and the previous version stays.
            JetStreamAPIError: The stream refused a chunk or the description, for example because the bucket is
                full or sealed.
        """
        if meta is not None:
            if not isinstance(meta, ObjectMeta):
                raise InvalidArgumentError(f"meta must be an ObjectMeta, not {type(meta).__name__}")
            given = [k for k, v in (("description", description), ("headers", headers), ("metadata", metadata),
                                    ("chunk_size", chunk_size)) if v is not None]
            if given:
                raise InvalidArgumentError(f"give {', '.join(given)} in meta or as keywords, not both")
            description, headers, metadata, chunk_size = meta.description, meta.headers, meta.metadata, meta.chunk_size
        check_name(name)
        if description is not None and not isinstance(description, str):
            raise InvalidArgumentError(f"description must be a str, not {description!r}")
        hdrs, tags = check_headers(headers), check_metadata(metadata)
        size = DEFAULT_CHUNK_SIZE if chunk_size is None else whole("chunk_size", chunk_size, 1)
        wait = answer_limit(timeout, self._js.timeout)
        if isinstance(data, str):
            raise InvalidArgumentError("put takes bytes, a binary file object or a pathlib.Path, not a str "
                                       "(encode text; wrap a path in pathlib.Path)")
        if isinstance(data, os.PathLike):
            with open(data, "rb") as f:
                return self.put(name, f, description=description, headers=hdrs, metadata=tags, chunk_size=size,
                                timeout=wait)
        if isinstance(data, (bytes, bytearray, memoryview)):
            source: IO[bytes] | memoryview = memoryview(data).cast("B")
        elif hasattr(data, "readinto") or hasattr(data, "read"):
            source = data
        else:
            kind = type(data).__name__
            raise InvalidArgumentError(f"put takes bytes, a binary file object or a pathlib.Path, not {kind}")
        previous = self._info(name)
        info = ObjectInfo(name=name, bucket=self.bucket, nuid=secrets.token_urlsafe(16), description=description,
                          headers=hdrs, metadata=tags, max_chunk_size=size)
        subject = self._chunk_subject(info.nuid)
        try:
            info = self._put_chunks(source, subject, info, size, wait)
            self._js.publish(self._meta_subject(name), info.to_json(), headers=ROLLUP, timeout=wait)
        except BaseException:
            self._purge_failed_put(subject)
            raise
        if previous is not None and previous.nuid and previous.nuid != info.nuid and not previous.deleted:
            self._js.purge_stream(self.stream, subject=self._chunk_subject(previous.nuid))
        return replace(info, mtime=_now())

    def _purge_failed_put(self, subject: str) -> None:
        """Purge the chunks a failed put stored.

        A chunk whose publish timed out may still be on its way into the
        stream (the server queues stores and API requests apart), and the
        stream may be out of reach (perhaps why the put failed): unless the
        subject is seen empty after the purge, a ``jsclient-obj-purge`` thread
        purges and looks again until it stays empty.
        """
        with contextlib.suppress(Error):
            self._js.purge_stream(self.stream, subject=subject)
            if not self._chunks_left(subject):
                return
        threading.Thread(target=self._purge_in_background, args=(subject,), name="jsclient-obj-purge",
                         daemon=True).start()

    def _purge_in_background(self, subject: str) -> None:
        """``jsclient-obj-purge`` thread: retry until purged, the connection closes, or PURGE_RETRY gives up."""
        with contextlib.suppress(RetryError):
            PURGE_RETRY.retrying(until_true=True)(self._try_purge, subject)

    def _try_purge(self, subject: str) -> bool:
        """One try; True when there is nothing more to do (the subject stayed empty for a moment after it)."""
        if self._js.conn.is_closed:
            return True
        try:
            self._js.purge_stream(self.stream, subject=subject)
            time.sleep(STRAGGLER_WAIT)
            return not self._chunks_left(subject)
        except Error:
            return False

    def _chunks_left(self, subject: str) -> int:
        return sum((self._js.stream_info(self.stream, subjects_filter=subject).state.subjects or {}).values())

    def _put_chunks(
        self, source: IO[bytes] | memoryview, subject: str, info: ObjectInfo, size: int, wait: float
    ) -> ObjectInfo:
        sha = hashlib.sha256()
        window: deque[Future[PubAck]] = deque()
        total = chunks = 0
        try:
            for chunk in _chunks(source, size):
                n = len(chunk)
                sha.update(chunk)
                total += n
                chunks += 1
                window.append(self._js.publish_async(subject, chunk, timeout=wait))
                if len(window) >= PUT_WINDOW:
                    window.popleft().result(timeout=wait + 1)
        except BaseException:
            for future in window:  # settled before the caller purges, or a chunk could land after the purge
                with contextlib.suppress(Exception):
                    future.result(timeout=wait + 1)
            raise
        for future in window:
            future.result(timeout=wait + 1)
        return replace(info, size=total, chunks=chunks, digest=digest_of(sha))

    def delete(self, name: str) -> ObjectInfo:
        """Mark the object deleted and purge its chunks (deleting a deleted object does nothing).

        Args:
            name: The object's name (for a link, the link is deleted, not its target).

        Returns:
            The deleted object's description (``deleted`` True, no size).

        Raises:
            ObjectNotFoundError: No object of that name was ever stored (or it went with its history).
        """
        info = self.info(name, include_deleted=True)
        if info.deleted:
            return info
        gone = replace(info, deleted=True, size=0, chunks=0, digest="")
        self._js.publish(self._meta_subject(name), gone.to_json(), headers=ROLLUP)
        if info.nuid and info.link is None:
            self._js.purge_stream(self.stream, subject=self._chunk_subject(info.nuid))
        return replace(gone, mtime=_now())

    def update_meta(
        self,
        name: str,
        *,
        new_name: str | None = None,
        description: str | None = None,
        headers: HeadersArg | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Rename, or change the description, headers or metadata (what is not given stays).

        Args:
            name: The object's name.
            new_name: Its new name; an object of that name must not exist (a deleted one's name may be taken).
            description: Its new description.
            headers: Its new headers, in place of the old ones.
            metadata: Its new metadata, in place of the old.

        Returns:
            The updated description.

        Raises:
            ObjectNotFoundError: No object of that name.
            ObjectExistsError: An object named ``new_name`` exists.
        """
        info = self.info(name)
        changes: dict[str, Any] = {}
        if new_name is not None and new_name != name:
            check_name(new_name)
            existing = self._info(new_name)
            if existing is not None and not existing.deleted:
                raise ObjectExistsError(f"cannot rename {name!r} to {new_name!r}: that object exists")
            changes["name"] = new_name
        if description is not None:
            if not isinstance(description, str):
                raise InvalidArgumentError(f"description must be a str, not {description!r}")
            changes["description"] = description
        if headers is not None:
            changes["headers"] = check_headers(headers)
        if metadata is not None:
            changes["metadata"] = check_metadata(metadata)
        updated = replace(info, **changes)
        self._js.publish(self._meta_subject(updated.name), updated.to_json(), headers=ROLLUP)
        if updated.name != name:
            self._js.purge_stream(self.stream, subject=self._meta_subject(name))
        return replace(updated, mtime=_now())

    def add_link(self, name: str, target: ObjectInfo) -> ObjectInfo:
        """A link named ``name`` to the object ``target`` (of this or another bucket).

        Args:
            name: The link's name; it may replace a link, not an object.
            target: The description of the object to link to (from :meth:`info`, say): not deleted, not a link.

        Returns:
            The link's description.

        Raises:
            InvalidArgumentError: A bad name, or a ``target`` that is no ObjectInfo, is deleted or is a link
                itself, raised before anything is sent.
            ObjectExistsError: An object (not a link) has that name.
        """
        if not isinstance(target, ObjectInfo):
            raise InvalidArgumentError(f"add_link needs the target's ObjectInfo, not {type(target).__name__}")
        if target.deleted:
            raise InvalidArgumentError(f"cannot link to the deleted object {target.name!r}")
        if target.link is not None:
            raise InvalidArgumentError(f"cannot link to {target.name!r}: it is a link itself")
        return self._link(name, ObjectLink(target.bucket, target.name))

    def add_bucket_link(self, name: str, bucket: ObjectStore | str) -> ObjectInfo:
        """A link named ``name`` to a whole bucket.

        Args:
            name: The link's name; it may replace a link, not an object.
            bucket: The bucket to link to: an ObjectStore or a bucket's name (not looked up).

        Returns:
            The link's description.

        Raises:
            ObjectExistsError: An object (not a link) has that name.
        """
        other = bucket.bucket if isinstance(bucket, ObjectStore) else check_bucket(bucket)
        return self._link(name, ObjectLink(other))

    def _link(self, name: str, link: ObjectLink) -> ObjectInfo:
        existing = self._info(check_name(name))
        if existing is not None and not existing.deleted and existing.link is None:
            raise ObjectExistsError(f"cannot name a link {name!r}: an object of that name exists")
        info = ObjectInfo(name=name, bucket=self.bucket, nuid=secrets.token_urlsafe(16), link=link)
        self._js.publish(self._meta_subject(name), info.to_json(), headers=ROLLUP)
        return replace(info, mtime=_now())

    # -- the bucket ----------------------------------------------------------------------
    def seal(self) -> ObjectStoreStatus:
        """No more changes, ever: the stream is sealed.

        Returns:
            The bucket's status, now sealed.
        """
        info = self._js.stream_info(self.stream)
        return bucket_status(self.bucket, self._js.update_stream(api.replace(info.config, sealed=True)))

    def status(self) -> ObjectStoreStatus:
        """The bucket's settings and size, asked of the server.

        Returns:
            The bucket's status.
        """
        try:
            return bucket_status(self.bucket, self._js.stream_info(self.stream))
        except StreamNotFoundError:
            raise ObjectStoreNotFoundError(f"object store {self.bucket!r} not found") from None


def _chunks(source: IO[bytes] | memoryview, size: int) -> Iterator[bytes]:
    """``size`` bytes at a time (the last may be shorter) from memory or a file object."""
    if isinstance(source, memoryview):
        for start in range(0, len(source), size):
            yield bytes(source[start : start + size])
        return
    readinto = getattr(source, "readinto", None)
    view = memoryview(bytearray(size))
    while True:
        if readinto is not None:
            n = _fill(readinto, view)
            chunk = bytes(view[:n])
        else:
            chunk = _read_full(source, size)
        if not chunk:
            return
        yield chunk


def _fill(readinto: Any, view: memoryview) -> int:
    """Fill ``view`` from a raw or buffered reader (raw readers may return short counts); 0 at the end."""
    got = 0
    while got < len(view):
        n = readinto(view[got:])
        if not n:
            break
        got += n
    return got


def _read_full(source: IO[bytes], size: int) -> bytes:
    parts: list[bytes] = []
    left = size
    while left:
        part = source.read(left)
        if not part:
            break
        if not isinstance(part, (bytes, bytearray)):
            raise InvalidArgumentError(f"the file object gave {type(part).__name__}, not bytes: open it in binary mode")
        parts.append(bytes(part))
        left -= len(part)
    return b"".join(parts)


class ObjectWatcher(Watch[ObjectInfo]):
    """``next(timeout)`` gives descriptions; ``None`` once marks the end of the current ones.

    Made by :meth:`ObjectStore.watch`.  Iterating it gives the same (the
    ``None`` too) until it is stopped; ``stop()`` or a with block ends it.
    It belongs to the thread that reads it.
    """

    def __init__(self, store: ObjectStore, js: JetStream, policy: DeliverPolicy, *, ignore_deletes: bool) -> None:
        """Start an ordered consumer on the bucket's descriptions; :meth:`ObjectStore.watch` makes watchers.

        Args:
            store: The bucket watched.
            js: The context whose requests it makes.
            policy: Where the consumer starts: each object's latest, everything held, or only what is new.
            ignore_deletes: Leave deleted objects out.

        Raises:
            ObjectStoreNotFoundError: The bucket was deleted.
            TimeoutError: Creating the consumer got no answer, retried for up to a minute; or its info got none
                within the context's timeout.
            JetStreamAPIError: Any other refusal.
            ConnectionClosedError: The connection is closed.
        """
        self._store = store
        self._ignore_deletes = ignore_deletes
        self._timeout = js.timeout
        try:
            self._sub: OrderedSubscription = js.subscribe(
                f"$O.{store.bucket}.M.>", stream=store.stream, ordered=True,
                config=ConsumerConfig(deliver_policy=policy.value),
            )
        except StreamNotFoundError:
            raise ObjectStoreNotFoundError(f"object store {store.bucket!r} not found") from None
        self._initial_done = policy is DeliverPolicy.NEW or self._initial_pending(js, store.stream) == 0
        self._marker_sent = False

    def next(self, timeout: float | None = 1.0) -> ObjectInfo | None:
        """The next description; ``None`` exactly once, after the current ones.  TimeoutError if none comes.

        Args:
            timeout: Seconds to wait; ``None``, no limit; ``0``, only what already arrived.

        Returns:
            The next description (a deleted object's has ``deleted`` True), or None, once, at the end of the
            current ones.

        Raises:
            TimeoutError: Nothing came within ``timeout``.
            InvalidArgumentError: A bad ``timeout``.
            SubscriptionClosedError: The watcher was stopped.
            JetStreamAPIError: Recreating the watch's consumer failed, for example with StreamNotFoundError once
                the bucket was deleted.
            ConnectionClosedError: The connection is closed.
        """
        timeout = take_limit(timeout)
        while True:
            if self._initial_done and not self._marker_sent:
                self._marker_sent = True
                return None
            msg = self._sub.next_msg(timeout=timeout)
            meta = msg.metadata
            if meta.num_pending == 0:
                self._initial_done = True
            info = ObjectInfo.from_json(msg.data, meta.timestamp)
            if self._ignore_deletes and info.deleted:
                continue
            return info


def store_config(
    bucket: str,
    *,
    description: str | None = None,
    ttl: float | None = None,
    max_bytes: int | None = None,
    storage: str = "file",
    replicas: int = 1,
    placement: api.Placement | None = None,
    compression: bool = False,
    metadata: Mapping[str, str] | None = None,
) -> StreamConfig:
    """The stream of an object store (ADR-20's layout)."""
    check_bucket(bucket)
    if ttl is not None:
        seconds("ttl", ttl, allow_zero=True)
    if not isinstance(compression, bool):
        raise InvalidArgumentError(f"compression must be True or False, not {compression!r}")
    fields: dict[str, Any] = {
        "name": f"OBJ_{bucket}",
        "subjects": [f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
        "max_age": float(ttl or 0),
        "max_bytes": max_bytes if max_bytes is not None else -1,
        "storage": storage,
        "num_replicas": replicas,
        "discard": "new",
        "allow_rollup_hdrs": True,
        "allow_direct": True,
        "description": description if description is not None else UNSET,
        "placement": placement if placement is not None else UNSET,
        "metadata": check_metadata(metadata) or UNSET,
    }
    if compression:
        fields["compression"] = "s2"
    return api.validate_stream_config(StreamConfig(**fields))


def bucket_status(bucket: str, info: api.StreamInfo) -> ObjectStoreStatus:
    cfg = info.config
    return ObjectStoreStatus(
        bucket=bucket,
        description=cfg.description if isinstance(cfg.description, str) else None,
        ttl=float(cfg.max_age) if isinstance(cfg.max_age, float) else 0.0,
        storage=str(cfg.storage),
        replicas=cfg.num_replicas if isinstance(cfg.num_replicas, int) else 1,
        sealed=cfg.sealed is True,
        size=info.state.bytes,
        compressed=str(cfg.compression) == "s2",
        metadata=dict(cfg.metadata) if isinstance(cfg.metadata, dict) else {},
        info=info,
    )


def open_store(js: JetStream, bucket: str) -> ObjectStore:
    check_bucket(bucket)
    try:
        js.stream_info(f"OBJ_{bucket}")
    except StreamNotFoundError:
        raise ObjectStoreNotFoundError(f"object store {bucket!r} not found") from None
    return ObjectStore(js, bucket)
