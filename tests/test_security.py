"""TLS and authentication against real TLS/auth-configured nats-server processes."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import nkeys
import pytest
import trustme

import jsclient
from jsclient.server import NatsServer


def tls_block(cert: str, key: str, ca: str | None = None, verify: bool = False) -> str:
    lines = [f'  cert_file: "{cert}"', f'  key_file: "{key}"']
    if ca:
        lines.append(f'  ca_file: "{ca}"')
    if verify:
        lines.append("  verify: true")
    return "tls {\n" + "\n".join(lines) + "\n}"


@pytest.fixture(scope="module")
def tls_server(tls_files: dict[str, str]) -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, config=tls_block(tls_files["cert"], tls_files["key"])) as server:
        yield server


def roundtrip(nc: jsclient.Connection) -> None:
    sub = nc.subscribe("tls.check")
    nc.publish("tls.check", b"secret payload")
    assert sub.next_msg(timeout=5).data == b"secret payload"
    nc.subscribe("tls.svc", callback=lambda m: m.respond(m.data[::-1]))
    assert nc.request("tls.svc", b"abc", timeout=5).data == b"cba"


def test_tls_url_with_ca_file(tls_server: NatsServer, tls_files: dict[str, str]) -> None:
    url = tls_server.url.replace("nats://", "tls://")
    with jsclient.connect(url, tls_ca_file=tls_files["ca"]) as nc:
        roundtrip(nc)


def test_tls_required_upgrades_a_nats_url(tls_server: NatsServer, tls_files: dict[str, str]) -> None:
    with jsclient.connect(tls_server.url, tls_ca_file=tls_files["ca"]) as nc:
        assert nc.server_info.get("tls_required") is True
        roundtrip(nc)


def test_tls_with_ssl_context(tls_server: NatsServer, ca: trustme.CA) -> None:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    with jsclient.connect(tls_server.url, tls_context=ctx) as nc:
        roundtrip(nc)
        # Large frames through the TLS transport, both directions at once.
        sub = nc.subscribe("tls.big")
        big = os.urandom(512 * 1024)
        for _ in range(20):
            nc.publish("tls.big", big)
        assert all(sub.next_msg(timeout=10).data == big for _ in range(20))


def test_certificates_are_verified_by_default(tls_server: NatsServer) -> None:
    with pytest.raises(jsclient.TLSError, match="certificate verif"):
        jsclient.connect(tls_server.url.replace("nats://", "tls://"), connect_timeout=2)


def test_hostname_mismatch_is_a_clear_error(tls_files: dict[str, str]) -> None:
    config = tls_block(tls_files["other_cert"], tls_files["other_key"])
    with NatsServer(jetstream=False, config=config) as server:
        with pytest.raises(jsclient.TLSError, match=r"certificate verification failed for '127\.0\.0\.1'"):
            jsclient.connect(server.url, tls_ca_file=tls_files["ca"], connect_timeout=2)
        # The same certificate verifies when the expected name is given.
        with jsclient.connect(server.url, tls_ca_file=tls_files["ca"], tls_hostname="nats.example.org") as nc:
            roundtrip(nc)


def test_client_certificates(tls_files: dict[str, str]) -> None:
    config = tls_block(tls_files["cert"], tls_files["key"], ca=tls_files["ca"], verify=True)
    with NatsServer(jetstream=False, config=config) as server:
        with jsclient.connect(
            server.url,
            tls_ca_file=tls_files["ca"],
            tls_cert_file=tls_files["client_cert"],
            tls_key_file=tls_files["client_key"],
        ) as nc:
            roundtrip(nc)
        with pytest.raises((jsclient.TLSError, jsclient.NoServersError, jsclient.ProtocolError)):
            jsclient.connect(server.url, tls_ca_file=tls_files["ca"], connect_timeout=2, allow_reconnect=False)


def test_tls_reconnect_after_restart(tls_files: dict[str, str]) -> None:
    config = tls_block(tls_files["cert"], tls_files["key"])
    with NatsServer(jetstream=False, config=config) as server:
        nc = jsclient.connect(server.url, tls_ca_file=tls_files["ca"], reconnect_time_wait=0.2)
        try:
            sub = nc.subscribe("tls.restart")
            nc.flush()
            server.restart()
            deadline = time.monotonic() + 10
            while nc.reconnects == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            nc.publish("tls.restart", b"again")
            assert sub.next_msg(timeout=5).data == b"again"
        finally:
            nc.close()


# -- nkeys and .creds ---------------------------------------------------------------


def new_seed(prefix: int) -> tuple[bytes, str]:
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return seed, nkeys.from_seed(seed).public_key.decode()


def test_nkey_auth() -> None:
    seed, public = new_seed(nkeys.PREFIX_BYTE_USER)
    wrong, _ = new_seed(nkeys.PREFIX_BYTE_USER)
    config = "authorization { users: [ { nkey: \"" + public + "\" } ] }"
    with NatsServer(jetstream=False, config=config) as server:
        with jsclient.connect(server.url, nkey_seed=seed.decode()) as nc:
            roundtrip(nc)
        with pytest.raises(jsclient.AuthorizationError) as info:
            jsclient.connect(server.url, nkey_seed=wrong.decode())
        assert wrong.decode() not in str(info.value)
        with pytest.raises(jsclient.AuthorizationError):
            jsclient.connect(server.url)
    opts = jsclient.Options.build(server.url, nkey_seed=seed.decode())
    assert seed.decode() not in repr(opts)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_jwt(claims: dict[str, object], signer_seed: bytes) -> str:
    """A NATS JWT (ed25519-nkey), as the nsc tool would write it."""
    claims = dict(claims)
    claims["jti"] = base64.b32encode(hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest()).decode()
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    signature = nkeys.from_seed(signer_seed).sign(f"{header}.{body}".encode())
    return f"{header}.{body}.{_b64(signature)}"


@pytest.fixture(scope="module")
def operator_mode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NatsServer, dict[str, str]]]:
    now = int(time.time())
    op_seed, op_pub = new_seed(nkeys.PREFIX_BYTE_OPERATOR)
    acc_seed, acc_pub = new_seed(nkeys.PREFIX_BYTE_ACCOUNT)
    op_jwt = make_jwt(
        {"iat": now, "iss": op_pub, "sub": op_pub, "name": "op", "nats": {"type": "operator", "version": 2}}, op_seed
    )
    limits = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "conn": -1, "leaf": -1}
    acc_jwt = make_jwt(
        {
            "iat": now,
            "iss": op_pub,
            "sub": acc_pub,
            "name": "acc",
            "nats": {"type": "account", "version": 2, "limits": limits},
        },
        op_seed,
    )
    d = tmp_path_factory.mktemp("creds")

    def creds(name: str, expires: int | None) -> str:
        user_seed, user_pub = new_seed(nkeys.PREFIX_BYTE_USER)
        claims: dict[str, object] = {
            "iat": now,
            "iss": acc_pub,
            "sub": user_pub,
            "name": name,
            "nats": {"type": "user", "version": 2, "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
        }
        if expires is not None:
            claims["exp"] = expires
        path = d / f"{name}.creds"
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{make_jwt(claims, acc_seed)}\n"
            "------END NATS USER JWT------\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{user_seed.decode()}\n"
            "------END USER NKEY SEED------\n"
        )
        return str(path)

    paths = {
        "good": creds("good", None),
        "expired": creds("expired", now - 3600),
        "garbage": str(d / "garbage.creds"),
    }
    Path(paths["garbage"]).write_text("not a creds file\n")
    config = f'operator: "{op_jwt}"\nresolver: MEMORY\nresolver_preload: {{\n  {acc_pub}: "{acc_jwt}"\n}}'
    with NatsServer(jetstream=False, config=config) as server:
        yield server, paths


def test_creds_file_auth(operator_mode: tuple[NatsServer, dict[str, str]]) -> None:
    server, paths = operator_mode
    with jsclient.connect(server.url, creds_file=paths["good"]) as nc:
        roundtrip(nc)


def test_expired_creds_rejected_clearly(operator_mode: tuple[NatsServer, dict[str, str]]) -> None:
    server, paths = operator_mode
    with pytest.raises(jsclient.AuthorizationError):
        jsclient.connect(server.url, creds_file=paths["expired"])


def test_malformed_creds_file_is_a_clear_error(operator_mode: tuple[NatsServer, dict[str, str]]) -> None:
    server, paths = operator_mode
    with pytest.raises(jsclient.InvalidArgumentError, match="NATS USER JWT"):
        jsclient.connect(server.url, creds_file=paths["garbage"])
    with pytest.raises(jsclient.InvalidArgumentError, match="cannot read creds file"):
        jsclient.connect(server.url, creds_file="/nonexistent/user.creds")


def test_read_creds_keeps_dashes_in_the_jwt(tmp_path: Path) -> None:
    from jsclient.auth import read_creds

    jwt = "eyJ0eXAi-OiJKV1Qi_LCJhbGci.eyJqdGki--OiJ_X.sig-na_ture"
    path = tmp_path / "u.creds"
    path.write_text(
        f"-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "-----BEGIN USER NKEY SEED-----\nSUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU\n"
        "------END USER NKEY SEED------\n"
    )
    assert read_creds(str(path)) == (jwt, b"SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU")


@pytest.fixture(scope="module")
def first_server(tls_files: dict[str, str]) -> Iterator[NatsServer]:
    block = tls_block(tls_files["cert"], tls_files["key"]).replace("\n}", "\n  handshake_first: true\n}")
    with NatsServer(jetstream=False, config=block) as server:
        yield server


def test_tls_handshake_first(first_server: NatsServer, tls_files: dict[str, str]) -> None:
    with jsclient.connect(first_server.url, tls_ca_file=tls_files["ca"], tls_handshake_first=True) as nc:
        assert nc.server_info.get("tls_required") is True
        roundtrip(nc)
    with pytest.raises(jsclient.Error, match="tls_handshake_first=True"):
        jsclient.connect(first_server.url, tls_ca_file=tls_files["ca"], connect_timeout=1, allow_reconnect=False)


def test_tls_handshake_first_to_a_server_without_it(tls_files: dict[str, str]) -> None:
    with (
        NatsServer(jetstream=False, config=tls_block(tls_files["cert"], tls_files["key"])) as plain_first,
        pytest.raises(jsclient.Error, match="TLS handshake"),
    ):
        jsclient.connect(
            plain_first.url, tls_ca_file=tls_files["ca"], tls_handshake_first=True, connect_timeout=2,
            allow_reconnect=False,
        )


# -- credentials from memory and callbacks ----------------------------------------------------------


def test_creds_text_and_callables(operator_mode: tuple[NatsServer, dict[str, str]]) -> None:
    """A secret manager hands over the creds: as text, or from a callable asked again at every reconnect."""
    server, paths = operator_mode
    text = Path(paths["good"]).read_text()
    with jsclient.connect(server.url, user_credentials=text) as nc:
        roundtrip(nc)
    asked: list[int] = []
    reconnected = threading.Event()

    def from_vault() -> str:
        asked.append(1)
        return text

    with jsclient.connect(server.url, user_credentials=from_vault, reconnected_cb=reconnected.set) as nc:
        roundtrip(nc)
        nc.force_reconnect()
        assert reconnected.wait(10)
        roundtrip(nc)
    assert len(asked) == 2  # the first connect and the reconnect
    with jsclient.connect(server.url, user_credentials=paths["good"]) as nc:  # a path works too
        roundtrip(nc)
    seed = re.search(r"SEED-----\n(\S+)", text)
    assert seed is not None
    opts = jsclient.Options.build(server.url, user_credentials=text)
    assert seed.group(1) not in repr(opts) and "JWT" not in repr(opts)


def test_jwt_and_signature_callbacks(operator_mode: tuple[NatsServer, dict[str, str]]) -> None:
    server, paths = operator_mode
    text = Path(paths["good"]).read_text()
    jwt = re.search(r"JWT-----\n(\S+)", text).group(1)  # type: ignore[union-attr]
    seed = re.search(r"SEED-----\n(\S+)", text).group(1)  # type: ignore[union-attr]
    signed: list[bytes] = []

    def sign(nonce: bytes) -> bytes:
        signed.append(nonce)
        return nkeys.from_seed(seed.encode()).sign(nonce)  # type: ignore[no-any-return]

    with jsclient.connect(server.url, user_jwt_cb=lambda: jwt, signature_cb=sign) as nc:
        roundtrip(nc)
    assert len(signed) == 1 and signed[0]


def test_an_nkey_seed_callable(tmp_path: Path) -> None:
    seed, public = new_seed(nkeys.PREFIX_BYTE_USER)
    config = "authorization { users: [ { nkey: \"" + public + "\" } ] }"
    with NatsServer(jetstream=False, config=config) as server:
        with jsclient.connect(server.url, nkey_seed=lambda: seed.decode()) as nc:
            roundtrip(nc)
        with pytest.raises(jsclient.AuthorizationError) as info:
            jsclient.connect(server.url, nkey_seed=lambda: (_ for _ in ()).throw(KeyError(seed.decode())))
        assert "nkey_seed callback failed (KeyError)" in str(info.value)
        assert seed.decode() not in str(info.value)  # the secret the failure carried is not repeated


def test_an_nkey_seed_file(tmp_path: Path) -> None:
    """nkey_seed takes a path as user_credentials does: an nsc .nk file, or a seed block; read at every connect."""
    seed, public = new_seed(nkeys.PREFIX_BYTE_USER)
    nk = tmp_path / "user.nk"
    nk.write_text(seed.decode() + "\n")
    block = tmp_path / "user.seed"
    block.write_text(f"# a comment\n-----BEGIN USER NKEY SEED-----\n{seed.decode()}\n------END USER NKEY SEED------\n")
    config = "authorization { users: [ { nkey: \"" + public + "\" } ] }"
    errors: list[Exception] = []
    reconnected = threading.Event()
    with NatsServer(jetstream=False, config=config) as server:
        for source in (str(nk), str(block), lambda: str(nk)):
            with jsclient.connect(server.url, nkey_seed=source) as nc:  # type: ignore[arg-type]
                roundtrip(nc)
        missing = tmp_path / "missing.nk"
        with pytest.raises(jsclient.InvalidArgumentError, match="nkey_seed is neither an nkey seed nor a readable"):
            jsclient.connect(server.url, nkey_seed=str(missing))
        secret = tmp_path / "notes.txt"
        secret.write_text("hunter2 is the password\n")
        no_seed = r"nkey_seed file .*notes\.txt.* holds no nkey seed"
        with pytest.raises(jsclient.InvalidArgumentError, match=no_seed) as info:
            jsclient.connect(server.url, nkey_seed=str(secret))
        assert "hunter2" not in str(info.value)
        mistyped = seed.decode().lower()  # not a seed, and no path either: it is not echoed
        with pytest.raises(jsclient.InvalidArgumentError, match="nkey_seed") as info:
            jsclient.connect(server.url, nkey_seed=mistyped)
        assert mistyped not in str(info.value)
        # Read again at every connect: a file gone is reported and the reconnect goes on; back, it connects.
        with jsclient.connect(
            server.url, nkey_seed=str(nk), reconnect_time_wait=0.05, max_reconnect_attempts=-1,
            error_cb=errors.append, reconnected_cb=reconnected.set,
        ) as nc:
            nk.rename(tmp_path / "away.nk")
            nc.force_reconnect()
            deadline = time.monotonic() + 15
            while not any(isinstance(e, jsclient.InvalidArgumentError) for e in errors):
                assert time.monotonic() < deadline, errors
                time.sleep(0.01)
            assert not reconnected.is_set() and not nc.is_closed
            (tmp_path / "away.nk").rename(nk)
            assert reconnected.wait(15)
            roundtrip(nc)
        assert seed.decode() not in " ".join(str(e) for e in errors)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"user_jwt_cb": lambda: "x"}, "user_jwt_cb and signature_cb go together"),
        ({"user_credentials": lambda: "x", "nkey_seed": "SU..."}, "use one kind of credentials"),
        ({"user_credentials": "x", "creds_file": "y"}, "use one kind of credentials"),
        ({"signature_cb": "not callable", "user_jwt_cb": lambda: "x"}, "signature_cb must be callable"),
    ],
)
def test_credentials_are_checked(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match=fragment):
        jsclient.connect("nats://127.0.0.1:1", **kwargs)  # type: ignore[arg-type]


def test_a_server_requiring_auth_is_named_before_connect() -> None:
    with NatsServer(jetstream=False, config="authorization {\n  token: s3cret\n}") as server:
        with pytest.raises(jsclient.AuthorizationError, match="requires authentication: give user and password"):
            jsclient.connect(server.url, allow_reconnect=False)
        with jsclient.connect(server.url, token="s3cret") as nc:
            roundtrip(nc)


def test_secrets_stay_out_of_logs_reprs_and_errors(caplog: pytest.LogCaptureFixture) -> None:
    """Every log line jsclient writes while it connects, fails and retries with credentials, at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="jsclient")
    seed, public = new_seed(nkeys.PREFIX_BYTE_USER)
    wrong, _ = new_seed(nkeys.PREFIX_BYTE_USER)
    password, token = "pa55-w0rd-xyz", "t0ken-abc-123"
    config = (
        "authorization { users: [ { nkey: \"" + public + "\" }, { user: app, password: \"" + password + "\" } ] }"
    )
    bearer = "Bearer pr0xy-s3cret"  # a WebSocket upgrade header for an authenticating proxy
    seen: list[str] = []
    with NatsServer(jetstream=False, config=config, websocket=True) as server:
        url = server.url.replace("nats://", f"nats://app:{password}@")
        ws_url = server.ws_url.replace("ws://", f"ws://app:{password}@")
        reconnected, ws_reconnected = threading.Event(), threading.Event()
        with jsclient.connect(url, reconnect_time_wait=0.05, reconnected_cb=reconnected.set) as nc, jsclient.connect(
            ws_url, ws_headers={"Authorization": bearer}, reconnect_time_wait=0.05, reconnected_cb=ws_reconnected.set
        ) as ws:
            seen += [repr(nc), repr(nc.options), str(nc.connected_url), repr(ws.options), str(ws.connected_url)]
            server.restart()  # a lost connection and reconnect attempts: warnings and debug lines
            assert reconnected.wait(15) and ws_reconnected.wait(15)
            roundtrip(nc)
            roundtrip(ws)
        for kwargs in ({"nkey_seed": wrong.decode()}, {"nkey_seed": lambda: wrong.decode()}, {"token": token}):
            with pytest.raises(jsclient.Error) as info:
                jsclient.connect(server.url, allow_reconnect=False, **kwargs)  # type: ignore[arg-type]
            seen.append(str(info.value))
        with pytest.raises(jsclient.Error) as info:
            jsclient.connect(url.replace(password, "wr0ng-pass"), retry_on_failed_connect=True)
        seen.append(str(info.value))
        seen.append(repr(jsclient.Options.build(url, nkey_seed=seed.decode())))
    text = caplog.text + "\n".join(seen)
    assert caplog.records, "nothing was logged: the test would prove nothing"
    for secret in (seed.decode(), wrong.decode(), password, token, "wr0ng-pass", "pr0xy-s3cret"):
        assert secret not in text, secret


def test_auth_required_alone_does_not_refuse_a_client_without_credentials() -> None:
    """A server with only a system account says auth_required, yet lets a client without credentials in."""
    config = 'accounts {\n  SYS: { users: [ { user: sys, password: "sys-pass" } ] }\n}\nsystem_account: SYS'
    with NatsServer(jetstream=False, config=config) as server, jsclient.connect(server.url) as nc:
        assert nc.server_info.get("auth_required") is True
        roundtrip(nc)
