"""Spans of the key-value and object stores: one CLIENT span per call on a bucket.

``KeyValue``'s ``get``, ``put``, ``create``, ``update``, ``delete``, ``purge``,
``history`` and ``keys``, and ``ObjectStore``'s ``put``, ``get`` (also
``get_bytes`` and ``get_file``, as ``obj.get``), ``info`` and ``delete``.

Span names are ``<operation> <bucket>`` ("kv.get orders", "obj.put files";
a ``span_name`` template sees the bucket as its subject and pattern), never
the key or object name: keys are many (often one per user or order), and a
tracing backend groups spans by name, so the key and the object's name are
attributes (``messaging.nats.kv.key``, ``messaging.nats.obj.name``).  The
revision a key-value call read or wrote is ``messaging.nats.kv.revision``
(a delete marker's, when ``get`` finds one); an error ends the span with
``error.type`` (``KeyNotFoundError``, ``KeyWrongRevisionError``, ...) and, when
the server refused, its code (``messaging.nats.jetstream.error_code``).

A store call's requests run inside its span, the current one: a span made
for them (a JetStream API request through ``Connection.request``, as a
``get`` of an older revision makes) is its child, never a trace of its own;
the latest value's direct get goes straight to the core and makes none.  A
store's calls of its own public methods for the same key or object
(``create`` reads the key it could not create; ``get_bytes`` opens the
object, which reads its description) are part of the outer call's span, not
spans of their own.  The span also times the call into
``messaging.client.operation.duration`` (with the operation and bucket).

Runs on the caller's thread; the marker of the call being traced is a
context variable, so threads sharing a store do not see each other's.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from ..errors import KeyDeletedError
from .patches import Patches, Wrapper
from .telemetry import Operation, Telemetry

if TYPE_CHECKING:
    from ..jetstream.kv import KeyValue
    from ..jetstream.objectstore import ObjectStore

T = TypeVar("T")

KV_BUCKET = "messaging.nats.kv.bucket"
KV_KEY = "messaging.nats.kv.key"
KV_REVISION = "messaging.nats.kv.revision"
OBJ_BUCKET = "messaging.nats.obj.bucket"
OBJ_NAME = "messaging.nats.obj.name"
OBJ_SIZE = "messaging.nats.obj.size"
OBJ_CHUNKS = "messaging.nats.obj.chunks"
BODY_SIZE = "messaging.message.body.size"
BATCH_COUNT = "messaging.batch.message_count"

#: The store call traced on this thread: its store and key (or object name).  A call of the same store
#: for the same key inside it is part of its span.
_current: ContextVar[tuple[object, str] | None] = ContextVar("jsclient_store_call", default=None)

Result = Callable[[Any, Span], None]
Failure = Callable[[BaseException, Span], None]


def install(patches: Patches, tel: Telemetry) -> None:
    from ..jetstream.kv import KeyValue
    from ..jetstream.objectreader import ObjectReader
    from ..jetstream.objectstore import ObjectStore

    for method, op in (("put", Operation.KV_PUT), ("create", Operation.KV_CREATE), ("update", Operation.KV_UPDATE)):
        patches.wrap(KeyValue, method, _kv(tel, op, _revision, valued=True))
    patches.wrap(KeyValue, "delete", _kv(tel, Operation.KV_DELETE, _revision))
    patches.wrap(KeyValue, "purge", _kv(tel, Operation.KV_PURGE, _revision))
    patches.wrap(KeyValue, "get", _kv(tel, Operation.KV_GET, _entry, _marker))
    patches.wrap(KeyValue, "history", _kv(tel, Operation.KV_HISTORY, _entries))
    patches.wrap(KeyValue, "keys", lambda original: _kv_keys(tel, original))
    patches.wrap(ObjectStore, "put", lambda original: _obj(tel, Operation.OBJ_PUT, original, _described))
    patches.wrap(ObjectStore, "get", lambda original: _obj(tel, Operation.OBJ_GET, original, _opened))
    patches.wrap(ObjectReader, "readinto", _read_under_opening)
    patches.wrap(ObjectReader, "__iter__", _iterate_under_opening)
    patches.wrap(ObjectStore, "get_bytes", lambda original: _obj(tel, Operation.OBJ_GET, original, _read))
    patches.wrap(ObjectStore, "get_file", lambda original: _obj(tel, Operation.OBJ_GET, original, _described))
    patches.wrap(ObjectStore, "info", lambda original: _obj(tel, Operation.OBJ_INFO, original, _described))
    patches.wrap(ObjectStore, "delete", lambda original: _obj(tel, Operation.OBJ_DELETE, original, None))


def _call(
    tel: Telemetry, op: Operation, store: object, bucket: str, key: str | None, attrs: dict[str, Any],
    metric: dict[str, Any], call: Callable[[], T], result: Result | None, failure: Failure | None = None,
) -> T:
    """``call()`` inside the CLIENT span ``<op> <bucket>``, timed into ``messaging.client.operation.duration``;
    inside a traced call of the same store and key, ``call()`` alone (a call of no key, None, is never)."""
    outer = _current.get()
    if outer is not None and outer[0] is store and outer[1] == key:
        return call()
    token = _current.set(None if key is None else (store, key))
    started = time.perf_counter()
    try:
        with tel.span(tel.name(op, bucket), SpanKind.CLIENT, attrs) as span:
            try:
                done = call()
            except BaseException as exc:
                if failure is not None:
                    failure(exc, span)
                raise
            if result is not None:
                result(done, span)
            return done
    except BaseException as exc:
        metric = {**metric, "error.type": type(exc).__qualname__}
        raise
    finally:
        _current.reset(token)
        tel.duration.record(time.perf_counter() - started, metric)


def _base(op: Operation, bucket_attr: str, bucket: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The attributes of a store call's span and of its metric point."""
    metric = {"messaging.system": "nats", "messaging.operation.name": op.op_name, bucket_attr: bucket}
    return {**metric, "messaging.operation.type": op.op_type}, metric


def _size(value: Any) -> int | None:
    try:
        return len(value)
    except TypeError:
        return None


# -- key-value --------------------------------------------------------------------------
def _kv_attrs(op: Operation, kv: KeyValue, key: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    attrs, metric = _base(op, KV_BUCKET, kv.bucket)
    if isinstance(key, str):
        attrs[KV_KEY] = key
    return attrs, metric


def _revision(revision: Any, span: Span) -> None:
    span.set_attribute(KV_REVISION, revision)


def _entry(entry: Any, span: Span) -> None:
    span.set_attribute(KV_REVISION, entry.revision)
    span.set_attribute(BODY_SIZE, len(entry.value))


def _marker(exc: BaseException, span: Span) -> None:
    """A KeyDeletedError's marker: its revision is the key's latest."""
    if isinstance(exc, KeyDeletedError):
        span.set_attribute(KV_REVISION, exc.entry.revision)


def _entries(entries: Any, span: Span) -> None:
    span.set_attribute(BATCH_COUNT, len(entries))
    if entries:
        span.set_attribute(KV_REVISION, entries[-1].revision)


def _kv(
    tel: Telemetry, op: Operation, result: Result, failure: Failure | None = None, *, valued: bool = False
) -> Wrapper:
    """The wrapper of a call on one key; ``valued``: its argument after the key is the value it writes."""

    def wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: KeyValue, key: str, *args: Any, **kwargs: Any) -> Any:
            attrs, metric = _kv_attrs(op, self, key)
            if valued:
                size = _size(args[0] if args else kwargs.get("value"))
                if size is not None:
                    attrs[BODY_SIZE] = size
            return _call(
                tel, op, self, self.bucket, str(key), attrs, metric, lambda: original(self, key, *args, **kwargs),
                result, failure,
            )

        return call

    return wrapper


def _kv_keys(tel: Telemetry, original: Callable[..., Any]) -> Callable[..., Any]:
    op = Operation.KV_KEYS

    def keys(self: KeyValue, *args: Any, **kwargs: Any) -> Any:
        attrs, metric = _base(op, KV_BUCKET, self.bucket)
        return _call(tel, op, self, self.bucket, None, attrs, metric, lambda: original(self, *args, **kwargs), None)

    return keys


# -- object store -------------------------------------------------------------------------
def _described(info: Any, span: Span) -> None:
    span.set_attribute(OBJ_SIZE, info.size)
    span.set_attribute(OBJ_CHUNKS, info.chunks)


#: The context of the ``obj.get`` span that opened each reader: the chunks a reader fetches later, after
#: ``get`` returned, are read under it, so that their spans are that call's children, not traces of their own.
_OPENED: weakref.WeakKeyDictionary[Any, otel_context.Context] = weakref.WeakKeyDictionary()


def _opened(reader: Any, span: Span) -> None:
    _described(reader.info, span)
    _OPENED[reader] = trace.set_span_in_context(span)


def _read_under_opening(original: Callable[..., int]) -> Callable[..., int]:
    def readinto(self: Any, buffer: Any) -> int:
        opened = _OPENED.get(self)
        if opened is None:
            return original(self, buffer)
        token = otel_context.attach(opened)
        try:
            return original(self, buffer)
        finally:
            otel_context.detach(token)

    return readinto


def _iterate_under_opening(original: Callable[..., Iterator[bytes]]) -> Callable[..., Iterator[bytes]]:
    def iterate(self: Any) -> Iterator[bytes]:
        chunks = original(self)
        opened = _OPENED.get(self)
        while True:
            token = otel_context.attach(opened) if opened is not None else None
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            finally:
                if token is not None:
                    otel_context.detach(token)
            yield chunk

    return iterate


def _read(data: Any, span: Span) -> None:
    span.set_attribute(OBJ_SIZE, len(data))


def _obj(tel: Telemetry, op: Operation, original: Callable[..., Any], result: Result | None) -> Callable[..., Any]:
    def call(self: ObjectStore, name: str, *args: Any, **kwargs: Any) -> Any:
        attrs, metric = _base(op, OBJ_BUCKET, self.bucket)
        if isinstance(name, str):
            attrs[OBJ_NAME] = name
        return _call(
            tel, op, self, self.bucket, str(name), attrs, metric, lambda: original(self, name, *args, **kwargs), result
        )

    return call
