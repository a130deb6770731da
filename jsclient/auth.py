"""Credentials for CONNECT: user/password and token (in options), nkey seeds, .creds files or text,
and callbacks that hand them over at each connect (a secret manager rather than a file).

Pure functions, any thread (the callbacks run on the thread that connects:
the caller's first, the reconnect thread later).  Seeds and JWTs are read
when a connection (re)connects and never kept, shown in a repr or put in an
error text; ``nkeys`` (imported lazily, so plain user/token setups need
nothing more) signs the server's nonce.  ``nkey_seed``, like
``user_credentials``, is the secret itself or a file's path, read again at
every connect so a rotated file is picked up.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import AuthorizationError, InvalidArgumentError

# The body runs to the next "---END" (JWTs are base64url, so they may contain single dashes).
_BLOCK = re.compile(
    r"-{3,}BEGIN (?P<kind>NATS USER JWT|USER NKEY SEED)-{3,}\s*(?P<body>.+?)\s*-{3,}END", re.S
)


@dataclass(frozen=True, repr=False)
class CredentialCallbacks:
    """Credentials asked for again at every connect: ``creds`` returns a .creds path or text, ``seed``
    an nkey seed, ``jwt`` a user JWT whose nonce ``signature`` signs (raw ed25519 bytes)."""

    creds: Callable[[], str] | None = None
    seed: Callable[[], str] | None = None
    jwt: Callable[[], str] | None = None
    signature: Callable[[bytes], bytes] | None = None

    def __repr__(self) -> str:
        return "<credential callbacks>"


# A seed as nkeys encodes it: "S", the key type, then base32 (58 characters for the ed25519 seeds NATS uses).
_SEED = re.compile(r"S[A-Z2-7]{20,}")


def read_seed(source: str) -> bytes:
    """The nkey seed ``nkey_seed`` gives: the seed itself, or the path of a file that holds one.

    The file may hold the seed alone (an ``nsc`` .nk file) or in a
    ``USER NKEY SEED`` block (a .creds file).  Errors name the option and
    the path, never the file's text or a seed.
    """
    value = source.strip()
    if _SEED.fullmatch(value):
        return value.encode()
    try:
        text = Path(source).read_text()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        # A path is named; anything else may be a mistyped seed, so it is not.
        shown = f" ({source!r}: {why})" if any(c in source for c in "/\\.~") else f" ({why})"
        raise InvalidArgumentError(f"nkey_seed is neither an nkey seed nor a readable seed file{shown}") from None
    block = {m.group("kind"): m.group("body").strip() for m in _BLOCK.finditer(text)}.get("USER NKEY SEED")
    candidates = [block] if block else text.split()
    for word in candidates:
        if _SEED.fullmatch(word):
            return word.encode()
    raise InvalidArgumentError(f"nkey_seed file {source!r} holds no nkey seed")


def is_creds_text(value: str) -> bool:
    """A .creds file's content rather than its path."""
    return "BEGIN NATS USER JWT" in value


def read_creds(source: str) -> tuple[str, bytes]:
    """The user JWT and nkey seed of a .creds file, given its path or its text."""
    if is_creds_text(source):
        text, what = source, "the creds text"
    else:
        try:
            text = Path(source).read_text()
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read creds file {source!r}: {exc.strerror}") from None
        what = f"creds file {source!r}"
    found = {m.group("kind"): m.group("body").strip() for m in _BLOCK.finditer(text)}
    jwt = found.get("NATS USER JWT")
    seed = found.get("USER NKEY SEED")
    if not jwt or not seed:
        raise InvalidArgumentError(f"{what} needs a NATS USER JWT and a USER NKEY SEED block")
    return jwt, seed.encode()


def _call(name: str, cb: Callable[..., Any], *args: Any) -> Any:
    """A credential callback's result; its failure is named, never its secrets."""
    try:
        value = cb(*args)
    except Exception as exc:  # noqa: BLE001 - user code: named by type only (it may hold a secret)
        raise AuthorizationError(f"{name} callback failed ({type(exc).__name__})") from None
    return value


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


def connect_fields(
    nkey_seed: str | None, creds_file: str | None, nonce: str | None, callbacks: CredentialCallbacks | None = None
) -> dict[str, Any]:
    """The CONNECT fields for nkey or JWT authentication (empty when neither is set)."""
    if callbacks is not None:
        if callbacks.jwt is not None and callbacks.signature is not None:
            jwt = _call("user_jwt_cb", callbacks.jwt)
            if not isinstance(jwt, str) or not jwt:
                raise AuthorizationError("user_jwt_cb must return the user JWT as a non-empty str")
            if not nonce:
                raise AuthorizationError("the server sent no nonce, so JWT authentication is not possible")
            raw = _call("signature_cb", callbacks.signature, nonce.encode())
            if not isinstance(raw, (bytes, bytearray)):
                raise AuthorizationError("signature_cb must return the signature as bytes")
            return {"jwt": jwt, "sig": base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")}
        if callbacks.creds is not None:
            creds_file = _call("user_credentials", callbacks.creds)
            if not isinstance(creds_file, str) or not creds_file:
                raise AuthorizationError("user_credentials callback must return a .creds path or text")
        if callbacks.seed is not None:
            nkey_seed = _call("nkey_seed", callbacks.seed)
            if not isinstance(nkey_seed, str) or not nkey_seed:
                raise AuthorizationError("nkey_seed callback must return the seed as a non-empty str")
    if not nkey_seed and not creds_file:
        return {}
    # A missing or bad file is named, whatever the server sent.
    if creds_file:
        jwt, seed = read_creds(creds_file)
    else:
        assert nkey_seed is not None
        seed = read_seed(nkey_seed)
    if not nonce:
        raise AuthorizationError("the server sent no nonce, so nkey/creds authentication is not possible")
    if creds_file:
        _, sig = sign(seed, nonce)
        return {"jwt": jwt, "sig": sig}
    public, sig = sign(seed, nonce)
    return {"nkey": public, "sig": sig}
