"""Header blocks: the multi-value mapping, encoding, parsing and status lines."""

from __future__ import annotations

import pytest

from jsclient.errors import BadHeaderError, ProtocolError
from jsclient.headers import Headers, encode, parse, status_of


def test_multi_value_mapping() -> None:
    h = Headers()
    h.add("A", "1")
    h.add("B", "2")
    h.add("A", "3")
    assert h["A"] == "1"
    assert h.get_all("A") == ["1", "3"]
    assert h.multi_items() == [("A", "1"), ("A", "3"), ("B", "2")]
    assert list(h) == ["A", "B"]
    h["A"] = "x"
    assert h.get_all("A") == ["x"]
    del h["B"]
    assert "B" not in h and len(h) == 1
    assert h.get_all("missing") == []


def test_names_are_case_sensitive() -> None:
    h = Headers({"Nats-Msg-Id": "1"})
    assert "nats-msg-id" not in h


def test_encode_and_parse_roundtrip() -> None:
    h = Headers({"K": ["a", "b"], "Other": "x: y"})
    block = h.encode()
    assert block == b"NATS/1.0\r\nK: a\r\nK: b\r\nOther: x: y\r\n\r\n"
    back = parse(block)
    assert back == h
    assert back.get_all("K") == ["a", "b"]
    assert back["Other"] == "x: y"


def test_plain_mapping_encodes() -> None:
    assert encode({"a": "1"}) == b"NATS/1.0\r\na: 1\r\n\r\n"
    assert Headers({"a": "1"}) == {"a": "1"}


@pytest.mark.parametrize(
    "block, status, description",
    [
        (b"NATS/1.0 503\r\n\r\n", 503, ""),
        (b"NATS/1.0 404 No Messages\r\n\r\n", 404, "No Messages"),
        (b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 5\r\n\r\n", 408, "Request Timeout"),
        (b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n\r\n", 100, "Idle Heartbeat"),
        (b"NATS/1.0\r\nA: b\r\n\r\n", None, ""),
    ],
)
def test_status_lines(block: bytes, status: int | None, description: str) -> None:
    h = parse(block)
    assert h.status == status
    assert h.description == description
    assert status_of(block) == status


def test_status_line_keeps_following_headers() -> None:
    h = parse(b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 5\r\nNats-Pending-Bytes: 10\r\n\r\n")
    assert h["Nats-Pending-Messages"] == "5" and h["Nats-Pending-Bytes"] == "10"


@pytest.mark.parametrize(
    "block",
    [b"HTTP/1.1 200\r\n\r\n", b"NATS/1.0 5x3\r\n\r\n", b"NATS/1.0\r\nno colon here\r\n\r\n", b"NATS/1.0"],
)
def test_malformed_blocks_raise(block: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(block)


@pytest.mark.parametrize(
    "name, value",
    [("", "v"), ("a b", "v"), ("a:b", "v"), ("k", "line\nbreak"), ("k", "cr\rhere"), ("é", "v")],
)
def test_bad_names_and_values_rejected(name: str, value: str) -> None:
    with pytest.raises(BadHeaderError):
        Headers({name: value})


def test_non_str_value_rejected() -> None:
    with pytest.raises(BadHeaderError, match="must be a str"):
        Headers({"k": 5})  # type: ignore[dict-item]


@pytest.mark.parametrize("initial", [[("a", "1", "extra")], [("a",)], ["abc"], ["ab"], 5, [None]])
def test_items_that_are_not_name_value_pairs_are_a_bad_header_error(initial: object) -> None:
    # A jsclient.Error like every bad header (it was Python's own ValueError or TypeError).
    with pytest.raises(BadHeaderError, match="name, value"):
        Headers(initial)  # type: ignore[arg-type]
