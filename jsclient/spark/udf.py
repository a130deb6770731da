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

from ..errors import BucketNotFoundError, KeyNotFoundError, StreamNotFoundError
from ..jetstream import features
from ..jetstream.kv import DEL, OPERATION_HEADER, PURGE, check_bucket, check_key
from ..jetstream.status import MAX_MULTI_SUBJECTS
from .connections import connection
from .options import SparkOptions


def kv_get(options: SparkOptions | Mapping[str, Any], bucket: str, key: str | None) -> bytes | None:
    """The key's current value, read on the worker's one connection (for a row-at-a-time ``udf``).

    Args:
        options: Where the bucket is: a :class:`SparkOptions` (picklable, so a UDF can capture
            it) or a mapping of the data source's option keys.
        bucket: The key-value bucket's name.
        key: The key; ``None`` (a null column value) gives ``None`` without asking the server.

    Returns:
        The value, or ``None`` when the key has none (never put, deleted or purged).

    Raises:
        InvalidArgumentError: Bad options, or a bad bucket name or key, refused before sending.
        BucketNotFoundError: No such bucket.
        TimeoutError: The server did not answer within the JetStream context's default timeout.
        NoServersError: The worker's connection could not reach any server.
    """
    if key is None:
        return None
    kv = connection(options).jetstream().key_value(bucket)
    try:
        return kv.get(key).value
    except KeyNotFoundError:
        return None


def kv_get_many(
    options: SparkOptions | Mapping[str, Any], bucket: str, keys: Sequence[str | None]
) -> list[bytes | None]:
    """Values for many keys at once, for Arrow or pandas UDFs and ``mapInArrow``.

    One multi-subject direct get per 1,024 distinct keys (from a server before
    2.11, one get per key), on the worker's one connection.

    Args:
        options: Where the bucket is: a :class:`SparkOptions` or a mapping of the data source's
            option keys.
        bucket: The key-value bucket's name.
        keys: The keys; repeats are read once, and ``None`` entries give ``None``.

    Returns:
        One value per entry of ``keys``, in their order: ``None`` where the key has no value.

    Raises:
        InvalidArgumentError: Bad options, or a bad bucket name or key, refused before sending.
        BucketNotFoundError: No such bucket.
        DirectGetDisabledError: The bucket's stream does not allow direct get.
        TimeoutError: The server did not answer within the JetStream context's default timeout.
        NoServersError: The worker's connection could not reach any server.
    """
    check_bucket(bucket)
    js = connection(options).jetstream()
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
        try:
            for msg in js.direct_get_last_for_subjects(f"KV_{bucket}", chunk):
                if msg.headers.get(OPERATION_HEADER) not in (DEL, PURGE):
                    found[msg.subject[len(prefix) :]] = msg.data
        except StreamNotFoundError:
            raise BucketNotFoundError(f"bucket {bucket!r} not found") from None  # as kv_get (and 2.10) say
    return [found.get(k) if k is not None else None for k in keys]
