"""Payload coercion shared by publish paths (pure function, any thread)."""

from __future__ import annotations

from typing import Any

from .errors import BadPayloadError


def as_bytes(payload: Any) -> bytes:
    """bytes from a bytes-like payload; a clear error for str and everything else."""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    if isinstance(payload, str):
        raise BadPayloadError("payload must be bytes, not str: encode it first (e.g. text.encode())")
    raise BadPayloadError(f"payload must be bytes-like, not {type(payload).__name__}")
