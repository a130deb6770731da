"""NATS CLI contexts (ADR-21): the named connection settings the ``nats`` command keeps, read by
``connect(context=...)`` and ``jsclient --context``.

A context is a JSON file, ``<config>/nats/context/<name>.json``, where ``<config>`` is
``$XDG_CONFIG_HOME`` or else ``~/.config``; ``<config>/nats/context.txt`` names the selected one.
Every key is written, unset ones as ``""``, so a key is honoured, ignored or refused by its value:
jsclient applies what it can do as the ``nats`` command does, and refuses a non-empty setting it
cannot honour rather than connect without it (see :data:`CONTEXT_FIELDS`).

Everything here is pure (bytes and an environment mapping in, a value out) but :func:`load_context`,
which reads the files and checks that the ones a context names exist.  Any thread; a context is
read once, when the connection is made.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import InvalidArgumentError
from .jetstream.api import check_name
from .options import CREDENTIALS, Options, normalise_url
from .protocol import check_publish_subject

__all__ = [
    "CONTEXT_FIELDS",
    "FieldUse",
    "NatsContext",
    "config_home",
    "context_path",
    "load_context",
    "parse_context",
    "selection_path",
]


class FieldUse(enum.Enum):
    """What jsclient does with a key of a context file, so that none is dropped without a word."""

    #: Becomes a connection option (or the default of ``nc.jetstream()``).
    APPLIED = "applied"
    #: Describes the context or the ``nats`` command's display; no connection setting.
    IGNORED = "ignored"
    #: A setting jsclient cannot honour: a non-empty value raises InvalidArgumentError.
    REFUSED = "refused"


#: Every key the ``nats`` command writes (jsm.go's natscontext), and what jsclient does with it.  A key
#: not listed here (a newer ``nats`` command's) is refused when it holds a value.
CONTEXT_FIELDS: Mapping[str, FieldUse] = MappingProxyType({
    "name": FieldUse.IGNORED,
    "description": FieldUse.IGNORED,
    "url": FieldUse.APPLIED,
    "socks_proxy": FieldUse.REFUSED,
    "token": FieldUse.APPLIED,
    "user": FieldUse.APPLIED,
    "password": FieldUse.APPLIED,
    "creds": FieldUse.APPLIED,
    "nkey": FieldUse.APPLIED,
    "cert": FieldUse.APPLIED,
    "key": FieldUse.APPLIED,
    "ca": FieldUse.APPLIED,
    "nsc": FieldUse.REFUSED,
    "jetstream_domain": FieldUse.APPLIED,
    "jetstream_api_prefix": FieldUse.APPLIED,
    "jetstream_event_prefix": FieldUse.REFUSED,
    "inbox_prefix": FieldUse.APPLIED,
    "user_jwt": FieldUse.REFUSED,
    "user_seed": FieldUse.REFUSED,
    "color_scheme": FieldUse.IGNORED,
    "tls_first": FieldUse.APPLIED,
    "windows_cert_store": FieldUse.REFUSED,
    "windows_cert_match_by": FieldUse.REFUSED,
    "windows_cert_match": FieldUse.REFUSED,
    "windows_ca_certs_match": FieldUse.REFUSED,
})

#: The keys that hold a file's path: ``~`` and ``$VAR`` are expanded in them, as the ``nats`` command does.
PATH_FIELDS = ("creds", "nkey", "cert", "key", "ca")
#: URI schemes the ``nats`` command resolves to a secret (``env://VAR``, ``op://...``); jsclient resolves none,
#: so a token, password or path given that way is refused rather than sent as it is written.
RESOLVER_SCHEMES = ("file", "op", "nsc", "env", "data")
# A URI scheme as Go's url.Parse reads one; one letter is a Windows drive, not a scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
# $VAR and ${VAR}, as Go's os.ExpandEnv reads them (an unset variable is empty).
_VARIABLE = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z0-9_]+))")
#: Options fields that go together: giving one keyword replaces the context's whole group.
GROUPS: tuple[frozenset[str], ...] = (
    frozenset({*CREDENTIALS, "password", "user_jwt_cb", "signature_cb"}),
    frozenset({"tls_cert_file", "tls_key_file"}),
)


@dataclass(frozen=True, kw_only=True)
class NatsContext:
    """One context, read and checked: what it sets, with paths expanded.  Made by :func:`load_context`.

    Attributes:
        name: The context's name (the file's, without ``.json``).
        path: The file it was read from.
        description: Its ``description``, for people.
        servers: The URLs of its ``url`` (comma-separated there); empty when it sets none.
        user: Its ``user``, with ``password``.
        password: Its ``password``; repr leaves it out.
        token: Its ``token``; repr leaves it out.
        creds_file: Its ``creds``: a .creds file's path.
        nkey_file: Its ``nkey``: the path of a file holding an nkey seed.
        tls_cert_file: Its ``cert``: a client certificate (PEM).
        tls_key_file: Its ``key``: the client certificate's private key.
        tls_ca_file: Its ``ca``: CA certificates to verify the server with.
        tls_handshake_first: Its ``tls_first``: TLS before the server's INFO.
        inbox_prefix: Its ``inbox_prefix``.
        jetstream_domain: Its ``jetstream_domain``: the default domain of ``nc.jetstream()``.
        jetstream_api_prefix: Its ``jetstream_api_prefix``: the default API prefix of ``nc.jetstream()``
            (a domain, when both are set, wins, as in the ``nats`` command).
    """

    name: str
    path: str
    description: str = ""
    servers: tuple[str, ...] = ()
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    creds_file: str | None = None
    nkey_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_ca_file: str | None = None
    tls_handshake_first: bool = False
    inbox_prefix: str | None = None
    jetstream_domain: str | None = None
    jetstream_api_prefix: str | None = None

    def options(self, *, given: Collection[str] = ()) -> dict[str, Any]:
        """The :class:`jsclient.Options` fields this context sets, for ``Options.build``.

        A name in ``given`` (a keyword the caller gave) keeps the context's value out, and so does any
        name of its group: a credentials keyword replaces the context's credentials whatever their kind,
        ``tls_cert_file`` or ``tls_key_file`` its certificate and key, ``tls_context`` its TLS files.
        When the context has credentials, the other kinds are set to None, so that they replace an
        ``options=``'s credentials rather than clash with them.

        Args:
            given: The names of the keywords given beside the context (Options fields, and
                ``servers``, ``user_jwt_cb``, ``signature_cb``, ``tls_context``).

        Returns:
            Options fields by name.

        Raises:
            InvalidArgumentError: Never; the context was checked when it was read.
        """
        layer: dict[str, Any] = {}
        credentials = {
            "user": self.user, "password": self.password, "token": self.token, "creds_file": self.creds_file,
            "nkey_seed": self.nkey_file,
        }
        if any(value is not None for value in credentials.values()):
            layer.update(dict.fromkeys(CREDENTIALS))
            layer.update(credentials)
        if self.servers:
            layer["servers"] = self.servers
        if self.tls_cert_file is not None:
            layer.update(tls_cert_file=self.tls_cert_file, tls_key_file=self.tls_key_file)
        if self.tls_ca_file is not None:
            layer["tls_ca_file"] = self.tls_ca_file
        if self.tls_ca_file is not None or self.tls_cert_file is not None:
            layer["tls"] = True  # as the nats command: a CA or a certificate means TLS, whatever the URL
        if self.tls_handshake_first:
            layer["tls_handshake_first"] = True
        if self.inbox_prefix is not None:
            layer["inbox_prefix"] = self.inbox_prefix
        dropped = set(given)
        for group in GROUPS:
            if dropped & group:
                dropped |= group
        if "tls_context" in dropped:
            dropped |= {"tls_ca_file", "tls_cert_file", "tls_key_file"}
        return {name: value for name, value in layer.items() if name not in dropped}

    def files(self) -> dict[str, str]:
        """The files this context names, by their key in the context file (``creds``, ``ca``, ...).

        Returns:
            Each set path, by key.

        Raises:
            InvalidArgumentError: Never.
        """
        paths = {
            "creds": self.creds_file, "nkey": self.nkey_file, "cert": self.tls_cert_file,
            "key": self.tls_key_file, "ca": self.tls_ca_file,
        }
        return {key: path for key, path in paths.items() if path is not None}


def config_home(environ: Mapping[str, str], home: str) -> str:
    """Where NATS keeps its configuration's folder ``nats``: ``$XDG_CONFIG_HOME``, else ``~/.config``.

    Args:
        environ: The environment (``os.environ``).
        home: The user's home folder.

    Returns:
        The folder.

    Raises:
        InvalidArgumentError: Never.
    """
    return environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")


def context_path(name: str, *, environ: Mapping[str, str], home: str) -> str:
    """The file of the context ``name``, checked as the ``nats`` command checks a name.

    Args:
        name: The context's name.
        environ: The environment (``os.environ``).
        home: The user's home folder.

    Returns:
        ``<config>/nats/context/<name>.json``.

    Raises:
        InvalidArgumentError: An empty name, or one with ``..``, ``/`` or ``\\`` (it would leave the folder).
    """
    if not isinstance(name, str) or not name or ".." in name or "/" in name or "\\" in name:
        raise InvalidArgumentError(f"context must be a NATS context's name (no '..', '/' or '\\'), not {name!r}")
    return os.path.join(config_home(environ, home), "nats", "context", f"{name}.json")


def selection_path(*, environ: Mapping[str, str], home: str) -> str:
    """The file naming the selected context (``nats context select`` writes it).

    Args:
        environ: The environment (``os.environ``).
        home: The user's home folder.

    Returns:
        ``<config>/nats/context.txt``.

    Raises:
        InvalidArgumentError: Never.
    """
    return os.path.join(config_home(environ, home), "nats", "context.txt")


def parse_context(data: bytes, *, name: str, path: str, environ: Mapping[str, str], home: str) -> NatsContext:
    """A context file's content, checked: every key honoured, ignored as harmless, or refused.

    Args:
        data: The file's bytes.
        name: The context's name (for errors and the result).
        path: The file's path (for errors and the result).
        environ: The environment, for ``$VAR`` in paths.
        home: The user's home folder, for ``~`` in paths.

    Returns:
        The context.

    Raises:
        InvalidArgumentError: Content that is no JSON object, a value of the wrong type, a non-empty key
            jsclient cannot honour, or values that contradict each other; the message names the context,
            its file and the key.
    """

    def refuse(key: str | None, why: str) -> InvalidArgumentError:
        where = f"NATS context {name!r} ({path})"
        return InvalidArgumentError(f"{where}: {key}: {why}" if key else f"{where}: {why}")

    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise refuse(None, f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise refuse(None, f"must hold a JSON object, not {type(raw).__name__}")
    text: dict[str, str] = {}
    for key, value in raw.items():
        use = CONTEXT_FIELDS.get(key, FieldUse.REFUSED)
        if _unset(value):
            continue
        if use is FieldUse.REFUSED:
            known = "" if key in CONTEXT_FIELDS else " (a key jsclient does not know)"
            raise refuse(key, f"jsclient cannot honour this setting{known}; remove it or leave it empty")
        if key == "tls_first":
            if value is not True:
                raise refuse(key, f"must be true or false, not {value!r}")
            continue
        if not isinstance(value, str):
            raise refuse(key, f"must be a string, not {type(value).__name__}")
        text[key] = value
    for key in ("token", "password"):
        scheme = _scheme(text.get(key, ""))
        if scheme in RESOLVER_SCHEMES:
            raise refuse(key, f"the nats command resolves {scheme}: references, jsclient does not; give the value")
    paths: dict[str, str] = {}
    for key in PATH_FIELDS:
        if key in text:
            path_value = _expand(text[key], environ, home)
            scheme = _scheme(path_value)
            if scheme == "file" and path_value.startswith("file://"):
                path_value = _expand(path_value[len("file://"):], environ, home)
            elif scheme is not None:
                raise refuse(key, f"the nats command resolves {scheme}: references, jsclient reads only a path")
            if path_value:
                paths[key] = path_value
    if "password" in text and "user" not in text:
        raise refuse("password", "needs user")
    if "key" in paths and "cert" not in paths:
        raise refuse("key", "needs cert")
    kinds = [key for key in ("user", "token") if key in text] + [key for key in ("creds", "nkey") if key in paths]
    if len(kinds) > 1:
        raise refuse(" and ".join(kinds), "give one kind of credentials; jsclient sends no more than one")
    servers = tuple(url.strip() for url in text.get("url", "").split(",") if url.strip())
    try:
        servers = tuple(normalise_url(url) for url in servers)
    except InvalidArgumentError as exc:
        raise refuse("url", str(exc)) from None
    for key, value in text.items():
        try:
            if key == "inbox_prefix":
                Options(inbox_prefix=value)
            elif key == "jetstream_domain":
                check_name("jetstream_domain", value)
            elif key == "jetstream_api_prefix":
                check_publish_subject(value, "jetstream_api_prefix")
        except InvalidArgumentError as exc:
            raise refuse(key, str(exc)) from None
    return NatsContext(
        name=name,
        path=path,
        description=text.get("description", ""),
        servers=servers,
        user=text.get("user"),
        password=text.get("password"),
        token=text.get("token"),
        creds_file=paths.get("creds"),
        nkey_file=paths.get("nkey"),
        tls_cert_file=paths.get("cert"),
        tls_key_file=paths.get("key"),
        tls_ca_file=paths.get("ca"),
        tls_handshake_first=raw.get("tls_first") is True,
        inbox_prefix=text.get("inbox_prefix"),
        jetstream_domain=text.get("jetstream_domain"),
        jetstream_api_prefix=text.get("jetstream_api_prefix"),
    )


def load_context(context: str | bool, *, environ: Mapping[str, str] | None = None) -> NatsContext:
    """Read a NATS context and check that the files it names exist: the one function here that reads files.

    ``context`` is a context's name, ``True`` for the selected one (``nats context select``), or the
    path of a ``.json`` file that exists (as ``nats --context`` takes one).

    Args:
        context: The name, ``True``, or a path ending in ``.json``.
        environ: The environment (``XDG_CONFIG_HOME``, ``$VAR`` in paths); ``os.environ`` when left out.

    Returns:
        The context.

    Raises:
        InvalidArgumentError: No such context, none selected, a file that cannot be read or parsed, a key
            jsclient cannot honour (see :func:`parse_context`), or a file the context names that does not
            exist; each names the context's file and the key.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    home = str(Path.home())
    if context is True:
        chosen = selection_path(environ=env, home=home)
        try:
            name = Path(chosen).read_text().strip()
        except (OSError, UnicodeDecodeError):
            name = ""
        if not name:
            raise InvalidArgumentError(f"context=True: no NATS context is selected ({chosen} names none)")
        path = context_path(name, environ=env, home=home)
    elif isinstance(context, str) and context.endswith(".json") and os.path.isfile(context):
        path, name = context, os.path.basename(context)[: -len(".json")]
    elif isinstance(context, str):
        name, path = context, context_path(context, environ=env, home=home)
    else:
        raise InvalidArgumentError(f"context must be a NATS context's name or True, not {context!r}")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InvalidArgumentError(f"NATS context {name!r} not found: {path} does not exist") from None
    except OSError as exc:
        raise InvalidArgumentError(f"NATS context {name!r}: cannot read {path} ({exc.strerror})") from None
    found = parse_context(data, name=name, path=path, environ=env, home=home)
    for key, file in found.files().items():
        if not os.path.isfile(file):
            raise InvalidArgumentError(f"NATS context {name!r} ({path}): {key}: no such file {file}")
    return found


def _unset(value: Any) -> bool:
    """A key the ``nats`` command left unset: it writes every key, unset ones empty (or null, or false)."""
    return value is None or value is False or (isinstance(value, (str, list, dict)) and not value)


def _scheme(value: str) -> str | None:
    """The URI scheme ``value`` starts with, lower-cased, or None."""
    match = _SCHEME.match(value)
    return match.group(1).lower() if match else None


def _expand(value: str, environ: Mapping[str, str], home: str) -> str:
    """``$VAR``, ``${VAR}`` and a leading ``~`` expanded, as the ``nats`` command expands its paths."""
    value = _VARIABLE.sub(lambda m: environ.get(m.group(1) or m.group(2), ""), value)
    return home + value[1:] if value.startswith("~") else value
