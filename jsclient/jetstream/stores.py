"""The key-value and object store factories of a context: buckets as the streams KV_<bucket> and OBJ_<bucket>.

Runs on the calling (user) thread; each call is one or two management
requests through the context.  Nothing here is mutable, so nothing is locked
and one :class:`Stores` may be shared by many threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, ObjectStoreNotFoundError, StreamNotFoundError
from .api import StreamInfo
from .kv import BUCKET_OPTIONS, KeyValue, KeyValueStatus, bucket_config, bucket_status, check_bucket, open_bucket
from .objectstore import ObjectStore, ObjectStoreStatus, open_store, store_config
from .objectstore import bucket_status as object_store_status

if TYPE_CHECKING:
    from .context import JetStream


class Stores:
    """The bucket part of a :class:`~jsclient.jetstream.context.JetStream`: it makes, lists and drops stores.

    Each public method is the body of the context's method of the same name,
    whose docstring it keeps; the context supplies the defaults (``options``
    are its keywords).
    """

    def __init__(self, js: JetStream) -> None:
        self._js = js

    def _listed(self, prefix: str) -> Iterator[tuple[str, StreamInfo]]:
        """(bucket, info) of each stream named <prefix><bucket>, from one stream listing."""
        for info in self._js.streams():
            name = info.config.name
            if isinstance(name, str) and name.startswith(prefix):
                yield name[len(prefix):], info

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

    def key_value_names(self) -> list[str]:
        return sorted(name[3:] for name in self._js.stream_names() if name.startswith("KV_"))

    def key_values(self) -> list[KeyValueStatus]:
        return sorted((bucket_status(bucket, info) for bucket, info in self._listed("KV_")), key=_by_bucket)

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

    def object_store_names(self) -> list[str]:
        return sorted(name[4:] for name in self._js.stream_names() if name.startswith("OBJ_"))

    def object_stores(self) -> list[ObjectStoreStatus]:
        return sorted((object_store_status(bucket, info) for bucket, info in self._listed("OBJ_")), key=_by_bucket)

    def delete_object_store(self, bucket: str) -> bool:
        try:
            return self._js.delete_stream(f"OBJ_{check_bucket(bucket)}")
        except StreamNotFoundError:
            raise ObjectStoreNotFoundError(f"object store {bucket!r} not found") from None


def _by_bucket(status: KeyValueStatus | ObjectStoreStatus) -> str:
    return status.bucket
