"""What the object store says of an object (ADR-20): its description, :class:`ObjectInfo`, with the
:class:`ObjectMeta` a put may give and the :class:`ObjectLink` a link points with, in the JSON form
the other NATS clients store; and the checks and encodings of names, headers, metadata and digests.

Pure data, no I/O, no threads: the descriptions are frozen dataclasses.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import InvalidArgumentError

#: The chunk size of a put that does not name one.
DEFAULT_CHUNK_SIZE = 128 * 1024
DIGEST_PREFIX = "SHA-256="
#: Object headers: a name to one value or several.
HeadersArg = Mapping[str, str | list[str]]


@dataclass(frozen=True)
class ObjectLink:
    """A link's target: an object of another (or the same) bucket, or a whole bucket when ``name`` is None.

    Attributes:
        bucket: The bucket the link points into.
        name: The object it points to; None for a link to the whole bucket.
    """

    bucket: str
    name: str | None = None


@dataclass(frozen=True)
class ObjectMeta:
    """What a put may say of an object besides its bytes (ADR-20's ObjectMeta).

    Attributes:
        description: Free text about the object.
        headers: Headers stored with the object: each name to one value or a list of values.
        metadata: String keys and values stored with the object.
        chunk_size: The size in bytes of the chunks the object is stored in (128 KiB when None).
    """

    description: str | None = None
    headers: HeadersArg | None = None
    metadata: Mapping[str, str] | None = None
    chunk_size: int | None = None


@dataclass(frozen=True)
class ObjectInfo:
    """What the store says of an object (ADR-20's ObjectInfo); ``mtime`` says whose clock stamped it.

    Attributes:
        name: The object's name in its bucket.
        bucket: Its bucket.
        nuid: The ID of this version's chunks, stored on ``$O.<bucket>.C.<nuid>``; every put picks a new one.
        size: Its size in bytes (0 for a deleted object or a link).
        chunks: How many chunks it is stored in.
        digest: ``SHA-256=`` and the URL-safe base64 of the SHA-256 of its bytes, which a read checks at its
            end; empty for a deleted object or a link.
        deleted: Whether it has been deleted: its description stays, with this set, and its chunks are gone.
        mtime: When the description was stored, by the server's clock, for a description read from the
            bucket; what ``put``, ``update_meta``, ``add_link`` and ``add_bucket_link`` return (and ``delete``,
            when it deletes) carries the time of the call by this machine's clock instead (the stored
            description holds none).
        description: Free text about the object, or None.
        headers: Its headers: each name to a list of values.
        metadata: Its string keys and values.
        link: What it points to, when it is a link (then ``is_link`` is true); else None.
        max_chunk_size: The chunk size its put used, in bytes, when the description says.
        extra: Fields another client stored that this one does not know: written back unchanged.
    """

    name: str
    bucket: str
    nuid: str
    size: int = 0
    chunks: int = 0
    digest: str = ""
    deleted: bool = False
    mtime: dt.datetime | None = field(default=None, compare=False)
    description: str | None = None
    headers: dict[str, list[str]] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    link: ObjectLink | None = None
    max_chunk_size: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_link(self) -> bool:
        return self.link is not None

    def to_json(self) -> bytes:
        """The stored form: ADR-20's JSON, without mtime (never stored).

        Returns:
            The JSON document, as bytes, that the bucket stores as the object's description, with the
            fields of :attr:`extra` kept.

        Raises:
            TypeError: A field was set by hand to a value that has no JSON form (a description read from a
                bucket always converts).
        """
        out: dict[str, Any] = dict(self.extra)
        out.update(name=self.name, bucket=self.bucket, nuid=self.nuid, size=self.size, chunks=self.chunks)
        if self.digest:
            out["digest"] = self.digest
        if self.deleted:
            out["deleted"] = True
        if self.description is not None:
            out["description"] = self.description
        if self.headers:
            out["headers"] = self.headers
        if self.metadata:
            out["metadata"] = self.metadata
        options: dict[str, Any] = {}
        if self.link is not None:
            options["link"] = {"bucket": self.link.bucket, **({"name": self.link.name} if self.link.name else {})}
        if self.max_chunk_size:
            options["max_chunk_size"] = self.max_chunk_size
        if options:
            out["options"] = options
        return msgspec.json.encode(out)

    @classmethod
    def from_json(cls, data: bytes, mtime: dt.datetime | None) -> ObjectInfo:
        raw = msgspec.json.decode(data)
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise InvalidArgumentError(f"not an object description: {bytes(data[:80])!r}")
        known = {"name", "bucket", "nuid", "size", "chunks", "digest", "deleted", "description", "headers",
                 "metadata", "options", "mtime"}
        options = raw.get("options") or {}
        link = options.get("link") if isinstance(options, dict) else None
        headers = raw.get("headers") or {}
        return cls(
            name=raw["name"],
            bucket=str(raw.get("bucket") or ""),
            nuid=str(raw.get("nuid") or ""),
            size=int(raw.get("size") or 0),
            chunks=int(raw.get("chunks") or 0),
            digest=str(raw.get("digest") or ""),
            deleted=bool(raw.get("deleted")),
            mtime=mtime,
            description=raw.get("description") or None,
            headers={k: v if isinstance(v, list) else [str(v)] for k, v in headers.items()},
            metadata=dict(raw.get("metadata") or {}),
            link=ObjectLink(link["bucket"], link.get("name") or None) if isinstance(link, dict) and link else None,
            max_chunk_size=(options.get("max_chunk_size") or None) if isinstance(options, dict) else None,
            extra={k: v for k, v in raw.items() if k not in known},
        )


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"object name must be a non-empty str, not {name!r}")
    return name


def encode_name(name: str) -> str:
    """The name as its meta subject's last token (URL-safe base64, padded, as the other clients do)."""
    return base64.urlsafe_b64encode(name.encode()).decode()


def digest_of(sha: Any) -> str:
    return DIGEST_PREFIX + base64.urlsafe_b64encode(sha.digest()).decode()


def digest_bytes(digest: str) -> bytes | None:
    """The raw SHA-256 of a stored digest (URL-safe or standard base64, padded or not); None if unreadable."""
    if not digest.upper().startswith(DIGEST_PREFIX):
        return None
    text = digest[len(DIGEST_PREFIX):].replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def check_headers(value: HeadersArg | None) -> dict[str, list[str]]:
    """Object headers as stored: each name to a list of values."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"headers must be a dict, not {type(value).__name__}")
    out = {}
    for k, v in value.items():
        values = [v] if isinstance(v, str) else v
        if not (isinstance(k, str) and k and isinstance(values, list) and all(isinstance(x, str) for x in values)):
            raise InvalidArgumentError(f"headers: {k!r} must map to a str or a list of str")
        out[k] = list(values)
    return out


def check_metadata(value: Mapping[str, str] | None) -> dict[str, str]:
    """Object or bucket metadata: a dict of str to str."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidArgumentError(f"metadata must be a dict of str to str, not {value!r}")
    return dict(value)
