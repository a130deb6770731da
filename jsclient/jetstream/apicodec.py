"""The base of the JetStream API models and their JSON codec.

Pure data, no I/O, no threads.  Every model is an :class:`APIStruct`
(keyword-only; a field the caller did not set is ``msgspec.UNSET`` and is not
sent, so the server applies its own default) or, for replies, a
:class:`ReplyStruct` (every field kept when re-encoded).  Durations are float
seconds in Python (:class:`Duration`) and integer nanoseconds on the wire;
plain floats and timedeltas given by callers are normalised in
``__post_init__``.  A reply's fields that no model declares are kept on the
object they came with (:func:`attach_unknown`) and sent back with it
(:func:`encode_body`, :func:`replace`, ``to_dict``).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, ClassVar, TypeVar

import msgspec
from msgspec import UNSET

from ..errors import InvalidArgumentError

T = TypeVar("T")
S = TypeVar("S", bound="APIStruct")


class Duration(float):
    """Seconds, sent to the server as integer nanoseconds."""

    __slots__ = ()

    def __repr__(self) -> str:
        return float.__repr__(self)

    @property
    def nanoseconds(self) -> int:
        return round(self * 1e9)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Duration):
        return obj.nanoseconds
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def _dec_hook(kind: type, obj: Any) -> Any:
    if kind is Duration and isinstance(obj, (int, float)):
        return Duration(obj / 1e9)
    raise NotImplementedError(f"cannot decode {kind!r}")


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode(obj: Any) -> bytes:
    return _ENCODER.encode(obj)


def decode(data: bytes, kind: type[T]) -> T:
    return msgspec.json.decode(data, type=kind, dec_hook=_dec_hook)


class APIStruct(msgspec.Struct, kw_only=True, omit_defaults=True, dict=True):
    """Base: keyword-only, unset fields omitted; durations normalised.

    ``dict=True`` gives each object room for the reply fields it does not
    declare (see :func:`attach_unknown` and :func:`encode_body`).
    """

    _durations: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for name in self._durations:
            value = getattr(self, name)
            if value is UNSET or value is None:
                continue
            if isinstance(value, list):
                setattr(self, name, [_as_duration(name, v) for v in value])
            else:
                setattr(self, name, _as_duration(name, value))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form, with the fields the server sent that this class does not declare.

        Returns:
            The object as the server writes it, in dicts, lists, strings, numbers, booleans and None: the
            server's field names, durations in integer nanoseconds, times as RFC 3339 strings; a request
            field left unset is left out.

        Raises:
            NotImplementedError: A field was set by hand to a value that has no JSON form (a decoded reply
                always converts).
        """
        out: dict[str, Any] = msgspec.to_builtins(self, enc_hook=_enc_hook)
        _merge_unknown(self, out)
        return out

    @property
    def unknown_fields(self) -> dict[str, Any]:
        """Fields the server sent that this version of jsclient does not know (sent back unchanged)."""
        return dict(self.__dict__.get(_UNKNOWN, {}))


_UNKNOWN = "_unknown"


def attach_unknown(obj: Any, raw: Any) -> None:
    """Keep, on each decoded object, the keys of its JSON object that it has no field for."""
    if isinstance(obj, msgspec.Struct):  # an APIStruct, or a page or reply holding some
        if not isinstance(raw, dict):
            return
        names = obj.__struct_encode_fields__
        if isinstance(obj, APIStruct):
            extra = {key: value for key, value in raw.items() if key not in names}
            if extra:
                obj.__dict__[_UNKNOWN] = extra
        for field, name in zip(obj.__struct_fields__, names, strict=True):
            attach_unknown(getattr(obj, field), raw.get(name))
    elif isinstance(obj, list) and isinstance(raw, list):
        for item, raw_item in zip(obj, raw, strict=False):
            attach_unknown(item, raw_item)


def _merge_unknown(obj: Any, out: Any) -> None:
    """Put the kept unknown keys back into ``out``, the builtins form of ``obj``."""
    if isinstance(obj, APIStruct):
        if not isinstance(out, dict):
            return
        for key, value in obj.__dict__.get(_UNKNOWN, {}).items():
            out.setdefault(key, value)
        for field, name in zip(obj.__struct_fields__, obj.__struct_encode_fields__, strict=True):
            if name in out:
                _merge_unknown(getattr(obj, field), out[name])
    elif isinstance(obj, list) and isinstance(out, list):
        for item, out_item in zip(obj, out, strict=False):
            _merge_unknown(item, out_item)
    elif isinstance(obj, dict) and isinstance(out, dict):
        for key, value in obj.items():
            if isinstance(key, str) and key in out:
                _merge_unknown(value, out[key])


def replace(obj: S, **fields: Any) -> S:
    """``msgspec.structs.replace`` that keeps the unknown fields ``obj`` came with."""
    new = msgspec.structs.replace(obj, **fields)
    kept = obj.__dict__.get(_UNKNOWN)
    if kept:
        new.__dict__[_UNKNOWN] = dict(kept)
    return new


def encode_body(body: Any) -> bytes:
    """An API request body: like :func:`encode`, plus the unknown fields its objects came with."""
    out = msgspec.to_builtins(body, enc_hook=_enc_hook)
    _merge_unknown(body, out)
    return _ENCODER.encode(out)


class ReplyStruct(APIStruct, omit_defaults=False):
    """Base of response models: every field is kept when re-encoded (a zero is information)."""


def _as_duration(name: str, value: Any) -> Duration:
    if isinstance(value, Duration):
        return value
    if isinstance(value, dt.timedelta):
        return Duration(value.total_seconds())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidArgumentError(f"{name} must be a number of seconds, not {value!r}")
    return Duration(value)
