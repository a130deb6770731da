"""The key-value and object store factories of a context: buckets as the streams KV_<bucket> and OBJ_<bucket>.

Runs on the calling (user) thread; each call is one or two management
requests through the context.  Nothing here is mutable, so nothing is locked
and one :class:`Stores` may be shared by many threads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..errors import InvalidArgumentError, ObjectStoreNotFoundError, StreamNotFoundError
from .api import StreamInfo
from .kv import BUCKET_OPTIONS, KeyValue, bucket_config, bucket_status, check_bucket, open_bucket
from .objectstore import ObjectStore, open_store, store_config
from .objectstore import bucket_status as object_store_status

if TYPE_CHECKING:
    from .context import JetStream

S = TypeVar("S")


@dataclass(frozen=True)
class BucketKind(Generic[S]):
    """What the listings need to know of a kind of store, so that one listing serves both kinds."""

    #: What its streams' names start with, before the bucket's name.
    prefix: str
    #: Its status from its stream's info.
    status: Callable[[str, StreamInfo], S]

    def bucket(self, stream: object) -> str | None:
        """The bucket this stream holds, if it is a store of this kind."""
        if isinstance(stream, str) and stream.startswith(self.prefix):
            return stream[len(self.prefix):]
        return None


KEY_VALUE = BucketKind("KV_", bucket_status)
OBJECT_STORE = BucketKind("OBJ_", object_store_status)


class Stores:
    """The bucket part of a :class:`~jsclient.jetstream.context.JetStream`: it makes, lists and drops stores.

    Each public method is the body of the context's method of the same name,
    whose docstring it keeps; but :meth:`names` and :meth:`statuses` are the
    body of both the key-value and the object store listings, told apart by
    a :class:`BucketKind`.  The context supplies the defaults (``options``
    are its keywords).
    """

    def __init__(self, js: JetStream) -> None:
        self._js = js

    def names(self, kind: BucketKind[Any]) -> list[str]:
        return sorted(bucket for bucket in map(kind.bucket, self._js.stream_names()) if bucket is not None)

    def statuses(self, kind: BucketKind[S]) -> list[S]:
        found = {bucket: info for info in self._js.streams() if (bucket := kind.bucket(info.config.name)) is not None}
        return [kind.status(bucket, found[bucket]) for bucket in sorted(found)]

    # -- key-value ---------------------------------------------------------------------
    def create_key_value(self, bucket: str, options: dict[str, Any]) -> KeyValue:
        self._js.add_stream(bucket_config(bucket, **options))
        return KeyValue(self._js, bucket, direct=True, origin=options["mirror"])

    def update_key_value(self, bucket: str, options: dict[str, Any]) -> KeyValue:
        unknown = sorted(set(options) - BUCKET_OPTIONS)
        if unknown:
            raise InvalidArgumentError(f"unknown bucket option(s): {', '.join(unknown)}")
        self._js.update_stream(bucket_config(bucket, **options))
        return KeyValue(self._js, bucket, direct=True, origin=options.get("mirror"))

    def key_value(self, bucket: str) -> KeyValue:
        return open_bucket(self._js, bucket)

    def delete_key_value(self, bucket: str) -> bool:
        return self._js.delete_stream(f"KV_{check_bucket(bucket)}")

    # -- object store (ADR-20) ----------------------------------------------------------
    def create_object_store(self, bucket: str, options: dict[str, Any]) -> ObjectStore:
        self._js.add_stream(store_config(bucket, **options))
        return ObjectStore(self._js, bucket)

    def object_store(self, bucket: str) -> ObjectStore:
        return open_store(self._js, bucket)

    def delete_object_store(self, bucket: str) -> bool:
        try:
            return self._js.delete_stream(f"OBJ_{check_bucket(bucket)}")
        except StreamNotFoundError:
            raise ObjectStoreNotFoundError(f"object store {bucket!r} not found") from None
