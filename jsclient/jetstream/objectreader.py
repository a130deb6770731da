"""Reading an object's bytes: :class:`ObjectReader`, a file object that fetches the object's chunks a
batch at a time as it is read and checks the size and SHA-256 digest at the end.

Runs on the thread that reads it (it belongs to that thread; no lock).  Memory stays bounded: it asks
for ``GET_BATCH_BYTES`` at a time (one batched direct get; from a server before 2.11, which has none,
one direct get per chunk, as :class:`~.direct.DirectBatch` does by itself).
"""

from __future__ import annotations

import hashlib
import io
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import (
    DigestMismatchError,
    DirectGetDisabledError,
    InvalidArgumentError,
    MessageNotFoundError,
    ObjectNotFoundError,
)
from .objectinfo import DEFAULT_CHUNK_SIZE, ObjectInfo, digest_bytes, digest_of

if TYPE_CHECKING:
    from .context import JetStream

#: Bytes a get asks the server for at once (one direct-get batch).
GET_BATCH_BYTES = 4 * 1024 * 1024


class ObjectReader(io.RawIOBase):
    """The object's bytes, fetched a batch of chunks at a time as they are read.

    The last read checks the size and the SHA-256 digest: a mismatch raises
    DigestMismatchError rather than end quietly; chunks that vanish while
    reading (the object was replaced or deleted) raise ObjectNotFoundError.

    Made by :meth:`ObjectStore.get`.  A binary file object: ``read``,
    ``readinto``, ``readall``, and iteration by chunks; close it, or use a
    with block.  It belongs to the thread that reads it.
    """

    def __init__(self, js: JetStream, stream: str, subject: str, info: ObjectInfo, timeout: float) -> None:
        """Reads the chunks of ``info`` on ``subject`` (its nuid's) of the bucket's ``stream``.

        Args:
            js: The context whose requests it makes.
            stream: The bucket's stream.
            subject: The subject of the object's chunks.
            info: The object's description: its chunks, their size, its size and digest.
            timeout: Seconds each fetch of chunks may wait for the server.

        Raises:
            DigestMismatchError: The description has no chunks, but a size or digest that is not an empty
                object's.
        """
        super().__init__()
        self.info = info
        self._js = js
        self._stream = stream
        self._timeout = timeout
        self._subject = subject
        self._sha = hashlib.sha256()
        self._seq = 1  # the next stream sequence to ask from
        self._chunks = 0
        self._size = 0
        self._pending: deque[bytes] = deque()
        self._current = memoryview(b"")
        self._done = info.chunks == 0 and self._verify()

    def readable(self) -> bool:
        """Whether it can be read: it can (io's question).

        Returns:
            True.

        Raises:
            : Nothing.
        """
        return True

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` with the object's next bytes, fetching chunks as needed; ``read`` and the rest use it.

        Args:
            buffer: A writable bytes-like object (a bytearray or a memoryview, say).

        Returns:
            How many bytes were written into it (0 at the end of the object).

        Raises:
            InvalidArgumentError: The reader is closed (also a ValueError, as io has it).
            ObjectNotFoundError: The object's chunks went while it was read (it was replaced or deleted).
            DigestMismatchError: The bytes read do not match the object's size or digest.
            TimeoutError: A fetch of chunks got no reply within the get's ``timeout``.
            JetStreamAPIError: Any other refusal.
            ConnectionClosedError: The connection is closed.
        """
        if self.closed:
            # InvalidArgumentError is also the ValueError io raises for a closed file.
            raise InvalidArgumentError(
                f"read of a closed ObjectReader (object {self.info.name!r}): get the object again to read it"
            )
        out = memoryview(buffer).cast("B")
        while not self._current:
            if self._pending:
                self._current = memoryview(self._pending.popleft())
            elif self._done:
                return 0
            else:
                self._fetch()
        n = min(len(out), len(self._current))
        out[:n] = self._current[:n]
        self._current = self._current[n:]
        return n

    def _fetch(self) -> None:
        info = self.info
        per = max(1, GET_BATCH_BYTES // max(1, info.max_chunk_size or DEFAULT_CHUNK_SIZE))
        batch = min(per, info.chunks - self._chunks)
        got = 0
        try:
            for stored in self._js.direct_get_batch(
                self._stream, self._subject, max_messages=batch, seq=self._seq, timeout=self._timeout
            ):
                got += 1
                self._take(stored.seq, stored.data)
        except DirectGetDisabledError:
            try:
                msg = self._js.get_msg(self._stream, seq=self._seq, next_by_subj=self._subject, timeout=self._timeout)
            except MessageNotFoundError:
                got = 0  # gone here too: the same ObjectNotFoundError below
            else:
                got = 1
                self._take(msg.seq, msg.data)
        except MessageNotFoundError:
            got = 0
        if not got:
            raise ObjectNotFoundError(
                f"object {info.name!r}: chunk {self._chunks + 1} of {info.chunks} is gone "
                "(the object was replaced or deleted while being read)"
            )
        if self._chunks == info.chunks:
            self._done = self._verify()

    def _take(self, seq: int, data: bytes) -> None:
        self._seq = seq + 1
        self._chunks += 1
        self._size += len(data)
        self._sha.update(data)
        self._pending.append(data)

    def _verify(self) -> bool:
        info = self.info
        if self._size != info.size:
            raise DigestMismatchError(
                f"object {info.name!r}: read {self._size} bytes, its description says {info.size}"
            )
        expected = digest_bytes(info.digest)
        if expected is None:
            raise DigestMismatchError(f"object {info.name!r}: unreadable digest {info.digest!r}")
        if self._sha.digest() != expected:
            raise DigestMismatchError(
                f"object {info.name!r}: SHA-256 of the bytes read is {digest_of(self._sha)}, "
                f"its description says {info.digest}"
            )
        return True

    def __iter__(self) -> Iterator[bytes]:
        """Chunks as they come (not lines)."""
        while chunk := self.read(DEFAULT_CHUNK_SIZE):
            yield chunk
