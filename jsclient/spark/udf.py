"""KV lookups for Spark UDFs, on the per-process connection (never one per row or task).

``kv_get`` suits a row-at-a-time ``udf``; ``kv_get_many`` reads many keys with
one multi-subject direct get per 1024 keys, for Arrow/pandas UDFs and
``mapInArrow`` (from a server before 2.11, which has no multi-subject get,
one get of the last value per key).  Both run in executor workers; the options object is the
picklable :class:`SparkOptions` captured by the UDF.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import KeyNotFoundError
from ..jetstream import features
from ..jetstream.kv import DEL, OPERATION_HEADER, PURGE, check_bucket, check_key
from ..jetstream.status import MAX_MULTI_SUBJECTS
from .connections import connection
from .options import SparkOptions


def _options(options: SparkOptions | Mapping[str, Any]) -> SparkOptions:
    return options if isinstance(options, SparkOptions) else SparkOptions.parse(options)


def kv_get(options: SparkOptions | Mapping[str, Any], bucket: str, key: str | None) -> bytes | None:
    """The key's current value, or None when it has none."""
    if key is None:
        return None
    kv = connection(_options(options)).jetstream().key_value(bucket)
    try:
        return kv.get(key).value
    except KeyNotFoundError:
        return None


def kv_get_many(
    options: SparkOptions | Mapping[str, Any], bucket: str, keys: Sequence[str | None]
) -> list[bytes | None]:
    """Values for many keys at once (None where a key has no value), in the order given."""
    check_bucket(bucket)
    js = connection(_options(options)).jetstream()
    wanted = sorted({k for k in keys if k is not None})
    found: dict[str, bytes] = {}
    prefix = f"$KV.{bucket}."
    if wanted and not features.supports(js.conn.server_info, features.MULTI_LAST_DIRECT_GET):
        for key in wanted:
            check_key(key)
        kv = js.key_value(bucket)
        for key in wanted:
            with contextlib.suppress(KeyNotFoundError):  # deleted and purged keys too
                found[key] = kv.get(key).value
        return [found.get(k) if k is not None else None for k in keys]
    for i in range(0, len(wanted), MAX_MULTI_SUBJECTS):
        chunk = [prefix + check_key(k) for k in wanted[i : i + MAX_MULTI_SUBJECTS]]
        for msg in js.direct_get_last_for_subjects(f"KV_{bucket}", chunk):
            if msg.headers.get(OPERATION_HEADER) not in (DEL, PURGE):
                found[msg.subject[len(prefix) :]] = msg.data
    return [found.get(k) if k is not None else None for k in keys]
