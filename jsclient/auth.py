"""Credentials for CONNECT: user/password and token (in options), nkey seeds and .creds files.

Pure functions, any thread.  Seeds and JWTs are read when a connection
(re)connects and never kept in error texts; ``nkeys`` (imported lazily, so
plain user/token setups need nothing more) signs the server's nonce.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

from .errors import AuthorizationError, InvalidArgumentError

# The body runs to the next "---END" (JWTs are base64url, so they may contain single dashes).
_BLOCK = re.compile(
    r"-{3,}BEGIN (?P<kind>NATS USER JWT|USER NKEY SEED)-{3,}\s*(?P<body>.+?)\s*-{3,}END", re.S
)


def read_creds(path: str) -> tuple[str, bytes]:
    """The user JWT and nkey seed of a .creds file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read creds file {path!r}: {exc.strerror}") from None
    found = {m.group("kind"): m.group("body").strip() for m in _BLOCK.finditer(text)}
    jwt = found.get("NATS USER JWT")
    seed = found.get("USER NKEY SEED")
    if not jwt or not seed:
        raise InvalidArgumentError(f"creds file {path!r} needs a NATS USER JWT and a USER NKEY SEED block")
    return jwt, seed.encode()


def sign(seed: bytes, nonce: str) -> tuple[str, str]:
    """(public key, base64url signature of the nonce) for an nkey seed."""
    import nkeys

    try:
        kp = nkeys.from_seed(seed)
    except Exception:  # noqa: BLE001 - nkeys raises several types; never echo the seed
        raise AuthorizationError("invalid nkey seed") from None
    try:
        signature = kp.sign(nonce.encode())
        public = kp.public_key.decode()
    finally:
        kp.wipe()
    return public, base64.urlsafe_b64encode(signature).decode().rstrip("=")


def connect_fields(nkey_seed: str | None, creds_file: str | None, nonce: str | None) -> dict[str, Any]:
    """The CONNECT fields for nkey or JWT authentication (empty when neither is set)."""
    if not nkey_seed and not creds_file:
        return {}
    if creds_file:
        jwt, seed = read_creds(creds_file)  # a missing or bad file is named, whatever the server sent
    if not nonce:
        raise AuthorizationError("the server sent no nonce, so nkey/creds authentication is not possible")
    if creds_file:
        _, sig = sign(seed, nonce)
        return {"jwt": jwt, "sig": sig}
    assert nkey_seed is not None
    public, sig = sign(nkey_seed.encode(), nonce)
    return {"nkey": public, "sig": sig}
