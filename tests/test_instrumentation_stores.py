"""jsclient.instrumentation on the key-value and object stores, against a real nats-server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import jsclient
from jsclient.errors import (
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyWrongRevisionError,
    ObjectNotFoundError,
)

from .otelkit import Otel

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def kv(js: jsclient.JetStream) -> jsclient.KeyValue:
    return js.create_key_value("orders", history=5)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def store_spans(otel: Otel, prefix: str) -> list[ReadableSpan]:
    return [s for s in otel.spans() if s.name.startswith(prefix)]


def nested_in(otel: Otel, outer: list[ReadableSpan]) -> None:
    """Every other span made during the calls is a child of one of ``outer`` (none stands alone)."""
    ids = {span_id(s) for s in outer}
    for span in otel.spans():
        if span not in outer:
            assert span.parent is not None and span.parent.span_id in ids, f"{span.name} is not a store call's child"


def test_kv_calls_are_client_spans_named_by_bucket_with_the_key_and_revision_as_attributes(
    kv: jsclient.KeyValue, otel: Otel
) -> None:
    otel.exporter.clear()
    put = kv.put("order.1", b"abc")
    entry = kv.get("order.1")
    updated = kv.update("order.1", b"abcd", put)
    created = kv.create("order.2", b"x")
    deleted = kv.delete("order.2")
    purged = kv.purge("order.1")
    spans = store_spans(otel, "kv.")
    assert [s.name for s in spans] == [
        "kv.put orders", "kv.get orders", "kv.update orders", "kv.create orders", "kv.delete orders", "kv.purge orders"
    ]
    assert all(s.kind is SpanKind.CLIENT and s.status.status_code is StatusCode.UNSET for s in spans)
    base = {"messaging.system": "nats", "messaging.nats.kv.bucket": "orders"}
    assert attrs(spans[0]) == base | {
        "messaging.operation.name": "kv.put", "messaging.operation.type": "send", "messaging.nats.kv.key": "order.1",
        "messaging.nats.kv.revision": put, "messaging.message.body.size": 3,
    }
    assert attrs(spans[1]) == base | {
        "messaging.operation.name": "kv.get", "messaging.operation.type": "receive", "messaging.nats.kv.key": "order.1",
        "messaging.nats.kv.revision": entry.revision, "messaging.message.body.size": 3,
    }
    revisions = [attrs(s)["messaging.nats.kv.revision"] for s in spans[2:]]
    assert revisions == [updated, created, deleted, purged]
    assert [attrs(s)["messaging.nats.kv.key"] for s in spans[2:]] == ["order.1", "order.2", "order.2", "order.1"]
    nested_in(otel, spans)
    assert otel.total("messaging.client.operation.duration", **{"messaging.operation.name": "kv.get"}) == 1


def test_a_missing_key_a_deleted_key_and_a_wrong_revision_end_their_spans_with_the_error(
    kv: jsclient.KeyValue, otel: Otel
) -> None:
    with pytest.raises(KeyNotFoundError):
        kv.get("nope")
    revision = kv.put("k", b"1")
    with pytest.raises(KeyWrongRevisionError):
        kv.update("k", b"2", revision + 10)
    with pytest.raises(KeyExistsError):
        kv.create("k", b"3")  # refused, then reads the key: that read is part of the create's span
    marker = kv.delete("k")
    with pytest.raises(KeyDeletedError):
        kv.get("k")
    missing, gone = otel.spans("kv.get orders")
    assert attrs(missing)["error.type"] == "KeyNotFoundError" and missing.status.status_code is StatusCode.ERROR
    assert "messaging.nats.kv.revision" not in attrs(missing)
    assert attrs(gone)["error.type"] == "KeyDeletedError" and attrs(gone)["messaging.nats.kv.revision"] == marker
    for name, error in (("kv.update orders", "KeyWrongRevisionError"), ("kv.create orders", "KeyExistsError")):
        span = otel.span(name)
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == error
        assert attrs(span)["messaging.nats.jetstream.error_code"] == 10071
    failed = {"messaging.operation.name": "kv.get", "error.type": "KeyNotFoundError"}
    assert otel.total("messaging.client.operation.duration", **failed) == 1


def test_a_kv_get_makes_one_span_and_a_jetstream_request_inside_it_is_its_child(
    kv: jsclient.KeyValue, otel: Otel
) -> None:
    first = kv.put("k", b"1")
    kv.put("k", b"2")
    otel.exporter.clear()
    with otel.tracer.start_as_current_span("root") as root:
        assert kv.get("k").value == b"2"  # a direct get straight through the core: no span of its own
        assert kv.get("k", revision=first).value == b"1"  # a direct get by sequence: a JetStream API span
    latest, by_revision = otel.spans("kv.get orders")
    assert latest.parent is not None and latest.parent.span_id == root.get_span_context().span_id
    inner = [s for s in otel.spans() if s.parent is not None and s.parent.span_id in {span_id(latest),
                                                                                      span_id(by_revision)}]
    assert [(s.name, s.parent.span_id if s.parent else None) for s in inner] == [
        ("jetstream DIRECT.GET", span_id(by_revision))
    ]
    assert {s.name for s in otel.spans()} == {"root", "kv.get orders", "jetstream DIRECT.GET"}


def test_history_and_keys_are_spans_too(kv: jsclient.KeyValue, otel: Otel) -> None:
    kv.put("a", b"1")
    kv.put("b", b"1")
    last = kv.put("a", b"2")
    otel.exporter.clear()
    assert [e.value for e in kv.history("a")] == [b"1", b"2"]
    assert sorted(kv.keys()) == ["a", "b"]
    history, keys = store_spans(otel, "kv.")
    assert history.name == "kv.history orders" and keys.name == "kv.keys orders"
    assert attrs(history)["messaging.batch.message_count"] == 2
    assert attrs(history)["messaging.nats.kv.revision"] == last
    assert attrs(history)["messaging.nats.kv.key"] == "a" and "messaging.nats.kv.key" not in attrs(keys)
    nested_in(otel, [history, keys])  # the watches' consumer requests


def test_a_span_name_template_still_names_kv_spans_by_bucket(js: jsclient.JetStream) -> None:
    with Otel(span_name="{operation} {pattern}") as otel:
        kv = js.create_key_value("tmpl")
        kv.put("user.4711", b"")
    assert [s.name for s in store_spans(otel, "kv.")] == ["kv.put tmpl"]


def test_object_store_calls_are_spans_with_the_objects_name_size_and_chunks(
    js: jsclient.JetStream, otel: Otel, tmp_path: Path
) -> None:
    obs = js.create_object_store("files")
    data = os.urandom(300_000)
    source = tmp_path / "a.bin"
    source.write_bytes(data)
    otel.exporter.clear()
    obs.put("a.bin", source, chunk_size=128 * 1024)  # a path: put opens it and puts the file, one span
    assert obs.get_bytes("a.bin") == data  # opens the object and reads its description: one span
    with obs.get("a.bin") as reader:
        assert reader.read() == data
    assert obs.info("a.bin").chunks == 3
    obs.delete("a.bin")
    with pytest.raises(ObjectNotFoundError):
        obs.get_bytes("a.bin")
    spans = store_spans(otel, "obj.")
    assert [s.name for s in spans] == [
        "obj.put files", "obj.get files", "obj.get files", "obj.info files", "obj.delete files", "obj.get files"
    ]
    put, get_bytes, get, info, delete, missing = spans
    assert all(s.kind is SpanKind.CLIENT for s in spans)
    sized = {"messaging.nats.obj.size": 300_000, "messaging.nats.obj.chunks": 3}
    assert attrs(put) == {
        "messaging.system": "nats", "messaging.operation.name": "obj.put", "messaging.operation.type": "send",
        "messaging.nats.obj.bucket": "files", "messaging.nats.obj.name": "a.bin", **sized,
    }
    assert attrs(get_bytes)["messaging.nats.obj.size"] == 300_000
    assert {k: attrs(get)[k] for k in sized} == sized and {k: attrs(info)[k] for k in sized} == sized
    assert attrs(delete)["messaging.nats.obj.name"] == "a.bin"
    assert attrs(missing)["error.type"] == "ObjectNotFoundError" and missing.status.status_code is StatusCode.ERROR
    nested_in(otel, spans)
