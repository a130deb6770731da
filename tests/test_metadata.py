"""Ack-subject metadata parsing (no server)."""

from __future__ import annotations

import datetime as dt

import pytest

from jsclient.errors import BadAckSubjectError
from jsclient.jetstream.metadata import parse_metadata

TS = 1_700_000_000_123_456_789


def test_v1_nine_tokens() -> None:
    meta = parse_metadata(f"$JS.ACK.ORDERS.worker.3.120.45.{TS}.7")
    assert meta.stream == "ORDERS" and meta.consumer == "worker"
    assert meta.num_delivered == 3
    assert meta.sequence.stream == 120 and meta.sequence.consumer == 45
    assert meta.num_pending == 7
    assert meta.domain is None
    assert meta.timestamp_ns == TS
    assert meta.timestamp == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)


def test_v2_with_domain() -> None:
    meta = parse_metadata(f"$JS.ACK.hub.ACCHASH.ORDERS.worker.1.2.3.{TS}.0")
    assert meta.domain == "hub"
    assert (meta.stream, meta.consumer, meta.num_delivered) == ("ORDERS", "worker", 1)
    assert meta.sequence == (2, 3)


def test_v2_without_domain_is_none() -> None:
    assert parse_metadata(f"$JS.ACK._.ACCHASH.S.C.1.2.3.{TS}.0").domain is None


def test_v2_with_extra_tokens() -> None:
    meta = parse_metadata(f"$JS.ACK._.ACCHASH.S.C.1.2.3.{TS}.0.random.more")
    assert meta.sequence == (2, 3) and meta.num_pending == 0


@pytest.mark.parametrize(
    "subject",
    [
        None,
        "",
        "_INBOX.abc",
        "$JS.ACK.S.C.1.2.3",  # too few
        f"$JS.ACK.S.C.1.2.3.{TS}.0.x",  # 10 tokens
        f"$JS.ACK.S.C.x.2.3.{TS}.0",  # delivered not a number
        f"$JS.ACK.S.C.1.-2.3.{TS}.0",  # negative sequence
        "$JS.ACK.S.C.1.2.3.notatime.0",
        f"$JS.ACK._.H.S.C.1.2.3.{TS}.nope",
        f"$JS.ACK.S..1.2.3.{TS}.0",  # empty consumer
        f"$JS.NAK.S.C.1.2.3.{TS}.0",
    ],
)
def test_malformed_subjects_raise(subject: str | None) -> None:
    with pytest.raises(BadAckSubjectError):
        parse_metadata(subject)
