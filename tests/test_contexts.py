"""NATS CLI contexts (ADR-21): ``connect(context=...)`` and ``jsclient --context`` against real servers.

The context files are written as the ``nats`` command writes them (jsm.go's natscontext: every key,
unset ones as ``""``, ``null`` for the Windows CA list, two-space indent), under an
``XDG_CONFIG_HOME`` of the test's own.  Each kind of credentials and TLS connects to a server that
demands it; every refusal is raised before anything dials (a listener that the context points at
accepts nothing, and no thread or socket is left).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nkeys
import pytest

import jsclient
from jsclient.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, main
from jsclient.contexts import CONTEXT_FIELDS, FieldUse, config_home, context_path, parse_context, selection_path
from jsclient.server import NatsServer

from .test_security import make_jwt, new_seed, roundtrip, tls_block

ROOT = Path(__file__).resolve().parent.parent

#: The keys of a context file in the order the ``nats`` command writes them, each with its unset value.
CLI_KEYS: dict[str, Any] = {
    "description": "",
    "url": "",
    "socks_proxy": "",
    "token": "",
    "user": "",
    "password": "",
    "creds": "",
    "nkey": "",
    "cert": "",
    "key": "",
    "ca": "",
    "nsc": "",
    "jetstream_domain": "",
    "jetstream_api_prefix": "",
    "jetstream_event_prefix": "",
    "inbox_prefix": "",
    "user_jwt": "",
    "user_seed": "",
    "color_scheme": "",
    "tls_first": False,
    "windows_cert_store": "",
    "windows_cert_match_by": "",
    "windows_cert_match": "",
    "windows_ca_certs_match": None,
}

Writer = Callable[..., Path]


def cli_json(**fields: Any) -> str:
    """A context as ``nats context save`` writes it: every key, in its order, the given ones set."""
    unknown = set(fields) - set(CLI_KEYS)
    body = {**CLI_KEYS, **{k: v for k, v in fields.items() if k in CLI_KEYS}}
    body.update({k: fields[k] for k in unknown})
    return json.dumps(body, indent=2)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An XDG_CONFIG_HOME of the test's own (and a HOME, for ``~`` in paths)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("NATS_CONTEXT", raising=False)
    for name in ("NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_NKEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "xdg" / "nats" / "context").mkdir(parents=True)
    return tmp_path / "xdg"


@pytest.fixture
def write(config: Path) -> Writer:
    def write_context(name: str, **fields: Any) -> Path:
        path = config / "nats" / "context" / f"{name}.json"
        path.write_text(cli_json(**fields))
        return path

    return write_context


# -- servers that each demand one kind of credentials or TLS ------------------------------------------


@pytest.fixture(scope="module")
def nkey_user() -> tuple[str, str]:
    seed, public = new_seed(nkeys.PREFIX_BYTE_USER)
    return seed.decode(), public


@pytest.fixture(scope="module")
def users_server(nkey_user: tuple[str, str]) -> Iterator[NatsServer]:
    """alice/s3cret, or the nkey user; nobody else."""
    config = (
        "authorization { users: [ { user: alice, password: s3cret }, { nkey: \"" + nkey_user[1] + "\" } ] }"
    )
    with NatsServer(jetstream=False, config=config) as server:
        yield server


@pytest.fixture(scope="module")
def token_server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, config="authorization { token: t0ken }") as server:
        yield server


@pytest.fixture(scope="module")
def operator_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NatsServer, Path]]:
    """A server in operator mode, and a .creds file of a user it accepts."""
    op_seed, op_pub = new_seed(nkeys.PREFIX_BYTE_OPERATOR)
    acc_seed, acc_pub = new_seed(nkeys.PREFIX_BYTE_ACCOUNT)
    user_seed, user_pub = new_seed(nkeys.PREFIX_BYTE_USER)
    op_jwt = make_jwt({"iss": op_pub, "sub": op_pub, "name": "op", "nats": {"type": "operator", "version": 2}},
                      op_seed)
    limits = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "conn": -1, "leaf": -1}
    acc_jwt = make_jwt(
        {"iss": op_pub, "sub": acc_pub, "name": "acc", "nats": {"type": "account", "version": 2, "limits": limits}},
        op_seed,
    )
    user_jwt = make_jwt(
        {
            "iss": acc_pub, "sub": user_pub, "name": "ctx",
            "nats": {"type": "user", "version": 2, "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
        },
        acc_seed,
    )
    creds = tmp_path_factory.mktemp("creds") / "ctx.creds"
    creds.write_text(
        f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{user_seed.decode()}\n------END USER NKEY SEED------\n"
    )
    config = f'operator: "{op_jwt}"\nresolver: MEMORY\nresolver_preload: {{\n  {acc_pub}: "{acc_jwt}"\n}}'
    with NatsServer(jetstream=False, config=config) as server:
        yield server, creds


@pytest.fixture(scope="module")
def mtls_server(tls_files: dict[str, str]) -> Iterator[NatsServer]:
    """TLS that verifies client certificates."""
    config = tls_block(tls_files["cert"], tls_files["key"], ca=tls_files["ca"], verify=True)
    with NatsServer(jetstream=False, config=config) as server:
        yield server


# -- connecting with each kind ------------------------------------------------------------------------


def test_user_password_context(users_server: NatsServer, write: Writer) -> None:
    path = write("alice", description="Alice on the users server", url=users_server.url, user="alice",
                 password="s3cret", inbox_prefix="_INBOX_alice", color_scheme="nofx")
    with jsclient.connect(context="alice") as nc:
        roundtrip(nc)
        assert (nc.options.user, nc.options.password) == ("alice", "s3cret")
        assert nc.new_inbox().startswith("_INBOX_alice.")
        assert nc.nats_context is not None
        assert (nc.nats_context.name, nc.nats_context.path) == ("alice", str(path))
        assert nc.nats_context.description == "Alice on the users server"
        assert "s3cret" not in repr(nc.nats_context)
    with pytest.raises(jsclient.AuthorizationError):  # the context is what let it in
        jsclient.connect(users_server.url, allow_reconnect=False)


def test_token_context_selected_with_true(token_server: NatsServer, write: Writer, config: Path) -> None:
    write("tok", url=token_server.url.replace("nats://", ""), token="t0ken")  # a bare host:port, as users write
    (config / "nats" / "context.txt").write_text("tok")  # nats context select writes the name alone
    with jsclient.connect(context=True) as nc:
        roundtrip(nc)
        assert nc.options.token == "t0ken" and nc.nats_context is not None and nc.nats_context.name == "tok"


def test_creds_context_with_home_and_variable_in_the_path(
    operator_server: tuple[NatsServer, Path], write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, creds = operator_server
    home = Path(os.environ["HOME"])
    (home / "keys").mkdir()
    (home / "keys" / "ctx.creds").write_text(creds.read_text())
    write("ops", url=server.url, creds="~/keys/ctx.creds")
    with jsclient.connect(context="ops") as nc:
        roundtrip(nc)
        assert nc.options.creds_file == str(home / "keys" / "ctx.creds")
    monkeypatch.setenv("CTX_CREDS_DIR", str(creds.parent))
    write("ops-var", url=server.url, creds="${CTX_CREDS_DIR}/" + creds.name)
    with jsclient.connect(context="ops-var") as nc:
        roundtrip(nc)
    write("ops-uri", url=server.url, creds=f"file://{creds}")  # the nats command's file:// form
    with jsclient.connect(context="ops-uri") as nc:
        roundtrip(nc)


def test_nkey_context(users_server: NatsServer, nkey_user: tuple[str, str], write: Writer, tmp_path: Path) -> None:
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(nkey_user[0] + "\n")
    write("nk", url=users_server.url, nkey=str(seed_file))
    with jsclient.connect(context="nk") as nc:
        roundtrip(nc)
        assert nc.options.nkey_seed == str(seed_file)


def test_tls_context_with_client_certificate(
    mtls_server: NatsServer, tls_files: dict[str, str], write: Writer
) -> None:
    write("mtls", url=mtls_server.url, cert=tls_files["client_cert"], key=tls_files["client_key"],
          ca=tls_files["ca"])
    with jsclient.connect(context="mtls") as nc:
        roundtrip(nc)
        assert nc.options.tls is True and nc.options.tls_ca_file == tls_files["ca"]
    # Without the context's certificate the server turns the client away.
    with pytest.raises((jsclient.TLSError, jsclient.NoServersError, jsclient.ProtocolError)):
        jsclient.connect(mtls_server.url, tls_ca_file=tls_files["ca"], connect_timeout=2, allow_reconnect=False)


def test_tls_first_context(tls_files: dict[str, str], write: Writer) -> None:
    block = tls_block(tls_files["cert"], tls_files["key"]).replace("\n}", "\n  handshake_first: true\n}")
    with NatsServer(jetstream=False, config=block) as server:
        write("first", url=server.url, ca=tls_files["ca"], tls_first=True)
        with jsclient.connect(context="first", connect_timeout=2, allow_reconnect=False) as nc:
            assert nc.options.tls_handshake_first is True
            roundtrip(nc)
        write("not-first", url=server.url, ca=tls_files["ca"])
        with pytest.raises(jsclient.Error, match="tls_handshake_first=True"):
            jsclient.connect(context="not-first", connect_timeout=1, allow_reconnect=False)


def test_jetstream_domain_and_prefix_are_the_default_of_jetstream(write: Writer) -> None:
    with NatsServer(domain="hub") as server:
        write("hub", url=server.url, jetstream_domain="hub")
        write("prefixed", url=server.url, jetstream_api_prefix="$JS.hub.API")
        with jsclient.connect(context="hub") as nc:
            js = nc.jetstream()
            assert (js.prefix, js.domain) == ("$JS.hub.API", "hub")
            assert js.account_info() is not None  # answered through the domain's API
            assert nc.jetstream(prefix="$JS.API").prefix == "$JS.API"  # an explicit prefix wins
            assert nc.jetstream(domain="spoke").prefix == "$JS.spoke.API"
        with jsclient.connect(context="prefixed") as nc:
            assert nc.jetstream().prefix == "$JS.hub.API"
            assert nc.jetstream().add_stream(name="CTX", subjects=["ctx.js"]).config.name == "CTX"
        with jsclient.connect(server.url) as nc:
            assert nc.jetstream().prefix == "$JS.API"


# -- explicit keywords override the context ------------------------------------------------------------


def test_explicit_keywords_override_the_context(
    users_server: NatsServer, token_server: NatsServer, write: Writer
) -> None:
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))  # bound, not listening: nothing answers there
        nowhere = f"nats://127.0.0.1:{dead.getsockname()[1]}"
        write("stale", url=nowhere, user="alice", password="wrong", inbox_prefix="_CTX")
        # The servers and the credentials given replace the context's.
        with jsclient.connect(users_server.url, context="stale", password="s3cret", user="alice") as nc:
            roundtrip(nc)
            assert nc.options.servers == (users_server.url,) and nc.options.inbox_prefix == "_CTX"
        # A token replaces the context's user and password (one kind of credentials, not two).
        with jsclient.connect(token_server.url, context="stale", token="t0ken", inbox_prefix="_MINE") as nc:
            roundtrip(nc)
            assert (nc.options.user, nc.options.password, nc.options.inbox_prefix) == (None, None, "_MINE")
        # The context replaces options=' fields (its credentials all of options=' ones), keywords both.
        base = jsclient.Options(servers=(nowhere,), name="base", token="other", connect_timeout=3.0)
        write("good", url=users_server.url, user="alice", password="s3cret")
        with jsclient.connect(options=base, context="good") as nc:
            roundtrip(nc)
            assert (nc.options.name, nc.options.connect_timeout, nc.options.token) == ("base", 3.0, None)


def test_context_options_groups() -> None:
    """Which context values a given keyword keeps out: its whole group."""
    ctx = jsclient.NatsContext(
        name="n", path="/p", servers=("nats://a:4222",), user="u", password="p", tls_cert_file="/c",
        tls_key_file="/k", tls_ca_file="/ca", inbox_prefix="_I",
    )
    full = ctx.options()
    assert full["user"] == "u" and full["token"] is None and full["tls"] is True
    assert full["tls_cert_file"] == "/c" and full["servers"] == ("nats://a:4222",)
    kept = ctx.options(given={"nkey_seed", "tls_key_file", "servers"})
    assert not {"user", "password", "token", "tls_cert_file", "tls_key_file", "servers"} & set(kept)
    assert kept["tls_ca_file"] == "/ca" and kept["inbox_prefix"] == "_I"
    assert not {"tls_ca_file", "tls_cert_file"} & set(ctx.options(given={"tls_context"}))
    assert "user" not in ctx.options(given={"user_jwt_cb"})
    assert jsclient.NatsContext(name="n", path="/p").options() == {}


# -- the command line ------------------------------------------------------------------------------


def test_cli_context_flag_and_environment(
    users_server: NatsServer, write: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write("alice", url=users_server.url, user="alice", password="s3cret")
    with jsclient.connect(users_server.url, user="alice", password="s3cret") as watcher:
        sub = watcher.subscribe("ctx.cli")
        watcher.flush()
        assert main(["pub", "ctx.cli", "by name", "--context", "alice"]) == EXIT_OK
        assert main(["--context", str(path), "pub", "ctx.cli", "by path"]) == EXIT_OK
        monkeypatch.setenv("NATS_CONTEXT", "alice")
        assert main(["pub", "ctx.cli", "by NATS_CONTEXT"]) == EXIT_OK
        write("wrong", url=users_server.url, user="alice", password="wrong")
        monkeypatch.setenv("NATS_CONTEXT", "wrong")
        monkeypatch.setenv("NATS_USER", "alice")
        monkeypatch.setenv("NATS_PASSWORD", "s3cret")  # as with the nats command, the variables beat the context
        assert main(["pub", "ctx.cli", "by NATS_PASSWORD"]) == EXIT_OK
        got = [sub.next_msg(timeout=5).data for _ in range(4)]
        assert got == [b"by name", b"by path", b"by NATS_CONTEXT", b"by NATS_PASSWORD"]
    for name in ("NATS_CONTEXT", "NATS_USER", "NATS_PASSWORD"):
        monkeypatch.delenv(name)
    capsys.readouterr()
    assert main(["pub", "ctx.cli", "x", "--server", users_server.url]) == EXIT_ERROR  # no context: refused
    assert main(["pub", "ctx.cli", "x", "--context", "nobody"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "nobody" in err and str(Path(os.environ["XDG_CONFIG_HOME"]) / "nats" / "context" / "nobody.json") in err
    assert main(["pub", "ctx.cli", "x", "--embedded", "--context", "alice"]) == EXIT_USAGE
    assert "--context" in capsys.readouterr().err


# -- refusals, before anything dials -----------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """Where the refused contexts point: it must never be dialled."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def open_sockets() -> int:
    """How many sockets this process has open (Linux)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed since listdir
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


def refused(listener: socket.socket, context: str | bool, *words: str) -> str:
    """connect(context=...) raises InvalidArgumentError naming ``words``, and dials nothing, starts nothing."""
    threads, sockets = threading.enumerate(), open_sockets()
    with pytest.raises(jsclient.InvalidArgumentError) as info:
        jsclient.connect(context=context, connect_timeout=1, allow_reconnect=False)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert threading.enumerate() == threads and open_sockets() == sockets
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody came
    return message


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"nsc": "nsc://acme/orders/new"}, "nsc"),
        ({"socks_proxy": "127.0.0.1:1080"}, "socks_proxy"),
        ({"jetstream_event_prefix": "$JS.EVENT"}, "jetstream_event_prefix"),
        ({"user_jwt": "eyJ0eXAi.x.y"}, "user_jwt"),
        ({"user_seed": "SUAxxx"}, "user_seed"),
        ({"windows_cert_store": "windowscurrentuser"}, "windows_cert_store"),
        ({"windows_cert_match_by": "subject"}, "windows_cert_match_by"),
        ({"windows_cert_match": "client"}, "windows_cert_match"),
        ({"windows_ca_certs_match": ["root"]}, "windows_ca_certs_match"),
        ({"a_key_from_the_future": "on"}, "a_key_from_the_future"),
        ({"url": 4222}, "url"),
        ({"tls_first": "yes"}, "tls_first"),
        ({"url": "http://127.0.0.1:4222"}, "url"),
        ({"user": "alice", "token": "t"}, "user and token"),
        ({"user": "alice", "creds": "/c.creds"}, "user and creds"),
        ({"password": "s3cret"}, "password"),
        ({"key": "/k.pem"}, "key"),
        ({"token": "env://NATS_SECRET"}, "token"),
        ({"password": "op://vault/nats/password", "user": "alice"}, "password"),
        ({"creds": "op://vault/nats/creds"}, "creds"),
        ({"inbox_prefix": "_INBOX.*"}, "inbox_prefix"),
        ({"jetstream_domain": "a.b"}, "jetstream_domain"),
        ({"jetstream_api_prefix": "$JS.*.API"}, "jetstream_api_prefix"),
    ],
)
def test_a_setting_jsclient_cannot_honour_is_refused(
    fields: dict[str, Any], key: str, write: Writer, listener: socket.socket
) -> None:
    url = f"nats://127.0.0.1:{listener.getsockname()[1]}"
    path = write("bad", **{"url": url, **fields})
    message = refused(listener, "bad", str(path), f": {key}:")
    assert "s3cret" not in message and "SUAxxx" not in message  # secrets are named, never shown


@pytest.mark.parametrize("key", ["creds", "nkey", "cert", "key", "ca"])
def test_a_file_the_context_names_must_exist(
    key: str, write: Writer, listener: socket.socket, tmp_path: Path
) -> None:
    present = tmp_path / "present.pem"
    present.write_text("x")
    fields = {key: str(tmp_path / "missing.file")}
    if key == "key":
        fields["cert"] = str(present)
    path = write("files", url=f"nats://127.0.0.1:{listener.getsockname()[1]}", **fields)
    refused(listener, "files", str(path), f": {key}:", str(tmp_path / "missing.file"))


def test_missing_unreadable_and_unselected_contexts(
    write: Writer, config: Path, listener: socket.socket
) -> None:
    folder = config / "nats" / "context"
    refused(listener, "nobody", "'nobody' not found", str(folder / "nobody.json"))
    (folder / "garbage.json").write_text('{"url": "nats://127.0.0.1:1",')
    refused(listener, "garbage", str(folder / "garbage.json"), "not valid JSON")
    (folder / "list.json").write_text("[]")
    refused(listener, "list", str(folder / "list.json"), "JSON object")
    (folder / "folder.json").mkdir()
    refused(listener, "folder", str(folder / "folder.json"), "cannot read")
    refused(listener, True, "no NATS context is selected", str(config / "nats" / "context.txt"))
    (config / "nats" / "context.txt").write_text("gone\n")
    refused(listener, True, "'gone' not found", str(folder / "gone.json"))
    for name in ("../escape", "a/b", ""):
        refused(listener, name, "context must be a NATS context's name")


# -- where the files are, and what the docs say --------------------------------------------------------


def test_paths_follow_xdg_and_home() -> None:
    assert config_home({"XDG_CONFIG_HOME": "/xdg"}, "/home/u") == "/xdg"
    assert config_home({}, "/home/u") == "/home/u/.config"
    assert config_home({"XDG_CONFIG_HOME": ""}, "/home/u") == "/home/u/.config"
    assert context_path("prod", environ={}, home="/home/u") == "/home/u/.config/nats/context/prod.json"
    assert selection_path(environ={"XDG_CONFIG_HOME": "/x"}, home="/h") == "/x/nats/context.txt"


def test_parse_expands_paths_as_the_nats_command() -> None:
    data = cli_json(
        url="a:1, tls://b:2", creds="$KEYS/u.creds", cert="~/c.pem", key="file://~/k.pem", ca="$UNSET/ca.pem",
        description="d", color_scheme="nofx",
    ).encode()
    ctx = parse_context(data, name="n", path="/p/n.json", environ={"KEYS": "/keys"}, home="/home/u")
    assert ctx.servers == ("nats://a:1", "tls://b:2")
    assert (ctx.tls_cert_file, ctx.tls_key_file, ctx.tls_ca_file) == ("/home/u/c.pem", "/home/u/k.pem", "/ca.pem")
    assert ctx.files() == {"creds": "/keys/u.creds", "cert": "/home/u/c.pem", "key": "/home/u/k.pem",
                           "ca": "/ca.pem"}
    data = cli_json(nkey="${KEYS}/u.nk").encode()
    ctx = parse_context(data, name="n", path="/p/n.json", environ={"KEYS": "/keys"}, home="/home/u")
    assert ctx.nkey_file == "/keys/u.nk" and ctx.servers == () and ctx.options() == {
        "user": None, "password": None, "token": None, "creds_file": None, "nkey_seed": "/keys/u.nk",
        "user_credentials": None,
    }


def test_every_key_the_nats_command_writes_is_classified_and_documented() -> None:
    assert set(CLI_KEYS) <= set(CONTEXT_FIELDS)
    page = (ROOT / "docs" / "guides" / "configuration.rst").read_text()
    section = page[page.index("NATS CLI contexts"):]
    for key, use in CONTEXT_FIELDS.items():
        if key != "name":
            assert f"``{key}``" in section, f"{key} ({use.value}) is not in the docs' contexts section"
    assert set(CONTEXT_FIELDS.values()) == set(FieldUse)
