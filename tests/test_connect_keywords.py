"""``connect()`` and ``Connection`` take every field of ``Options`` as a typed keyword, and nothing else unasked.

The keywords are written out (not ``**kwargs``) so that IDEs, ``help()``, Sphinx and ``mypy --strict``
see each name and type; the price is three lists to keep in step, which these tests hold together: a
field added to Options and not to the signatures fails here.  Then, against a real server: a keyword
reaches the connection, keywords beside ``options=`` override it, a bad value is refused before any
connection is made, and mypy refuses a misspelt keyword or a wrong type.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
import typing
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient.options import OPTION_DEFAULTS
from jsclient.server import NatsServer

ROOT = Path(__file__).resolve().parent.parent

#: What the keywords take beyond Options' field: Options holds data only (it pickles) and stores the
#: normalised form, so the signatures also accept callable credentials and headers as a dict or list.
WIDER: dict[str, Any] = {
    "nkey_seed": Callable[[], str],
    "user_credentials": Callable[[], str],
    "ws_headers": list[tuple[str, str]] | dict[str, str],
}
#: The keywords that are not Options fields, each documented in connect()'s docstring.
EXTRAS = {
    "options", "context", "error_cb", "closed_cb", "disconnected_cb", "reconnected_cb", "tls_context", "user_jwt_cb",
    "signature_cb", "server_selector",
}


def drift(options_cls: type, func: Callable[..., Any]) -> list[str]:
    """How ``func``'s option keywords differ from ``options_cls``' fields: nothing when they are in step.

    Each field but ``servers`` (the positional first parameter) is a keyword-only parameter, in field
    order, with the field's resolved type (widened only as WIDER says), and its default is that field's
    "not given" marker, which stands for (and shows as) the field's default.
    """
    fields = [f.name for f in dataclasses.fields(options_cls) if f.name != "servers"]
    types = typing.get_type_hints(options_cls)
    hints = typing.get_type_hints(func)
    params = inspect.signature(func).parameters
    defaults = options_cls()
    problems = []
    for name in fields:
        param = params.get(name)
        if param is None:
            problems.append(f"{name}: not a keyword")
            continue
        if param.kind is not param.KEYWORD_ONLY:
            problems.append(f"{name}: not keyword-only")
        expected = types[name] | WIDER[name] if name in WIDER else types[name]
        if hints.get(name) != expected:
            problems.append(f"{name}: annotated {hints.get(name)}, the field is {expected}")
        marker = getattr(OPTION_DEFAULTS, name, None)
        if param.default is not marker or repr(marker) != repr(getattr(defaults, name)):
            problems.append(f"{name}: default {param.default!r} is not the marker of {getattr(defaults, name)!r}")
    if not problems and [p for p in params if p in fields] != fields:
        problems.append("the option keywords are not in the order of Options' fields")
    return problems


@pytest.mark.parametrize("func", [jsclient.connect, jsclient.Connection.__init__], ids=["connect", "Connection"])
def test_every_options_field_is_a_keyword_with_its_type_and_default(func: Callable[..., Any]) -> None:
    assert drift(jsclient.Options, func) == []


def test_the_drift_check_catches_a_field_that_options_gains() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Grown(jsclient.Options):
        lingering: bool = False

    assert drift(Grown, jsclient.connect) == ["lingering: not a keyword"]


def test_connect_takes_nothing_beyond_the_fields_and_the_documented_extras() -> None:
    *params_, unknown = inspect.signature(jsclient.connect).parameters.values()
    params = {p.name: p for p in params_}
    fields = {f.name for f in dataclasses.fields(jsclient.Options)}
    assert set(params) - fields == EXTRAS
    first, *rest = params.values()
    assert first.name == "servers" and all(p.kind is p.KEYWORD_ONLY for p in rest)  # no positional flag
    # The one catch-all takes nothing a type checker allows (Never): it is there to name a misspelt keyword.
    assert unknown.kind is unknown.VAR_KEYWORD and unknown.annotation in ("Never", typing.Never)
    for name in EXTRAS - {"options"}:
        assert f"``{name}" in (jsclient.connect.__doc__ or ""), f"{name} is not documented in connect()"


def test_connection_takes_what_connect_takes() -> None:
    """The same parameters, so ``connect`` can hand its own on; Connection's first also takes an Options."""
    ours = inspect.signature(jsclient.connect).parameters
    theirs = dict(inspect.signature(jsclient.Connection.__init__).parameters)
    del theirs["self"]
    assert [(p.name, p.kind, p.default) for p in ours.values()] == [
        (p.name, p.kind, p.default) for p in theirs.values()
    ]
    connect_hints = typing.get_type_hints(jsclient.connect)
    init_hints = typing.get_type_hints(jsclient.Connection.__init__)
    assert init_hints.pop("servers") == connect_hints.pop("servers") | jsclient.Options
    assert connect_hints.pop("return") is jsclient.Connection and init_hints.pop("return") is type(None)
    assert connect_hints == init_hints


def test_help_shows_the_defaults() -> None:
    shown = str(inspect.signature(jsclient.connect))
    assert "connect_timeout: 'float' = 2.0" in shown and "inbox_prefix: 'str' = '_INBOX'" in shown


def _monitor(server: NatsServer, endpoint: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/{endpoint}", timeout=5) as answer:
        return dict(json.load(answer))


def _names_at(server: NatsServer) -> list[str]:
    return [c.get("name", "") for c in _monitor(server, "connz")["connections"]]


def test_a_keyword_reaches_the_server(server: NatsServer) -> None:
    with jsclient.connect(server.url, name="kw-name", inbox_prefix="_KW") as nc:
        assert nc.options.name == "kw-name" and nc.options.inbox_prefix == "_KW"
        assert "kw-name" in _names_at(server)


def test_keywords_beside_options_override_only_their_fields(server: NatsServer) -> None:
    base = jsclient.Options(servers=("nats://127.0.0.1:1",), name="base", inbox_prefix="_BASE", echo=False)
    with jsclient.connect(server.url, options=base, name="override") as nc:
        assert nc.options == base.replace(servers=(server.url,), name="override")
        assert "override" in _names_at(server)
    with jsclient.Connection(base.replace(servers=(server.url,)), name="positional") as conn:  # as before
        assert conn.options.name == "positional" and conn.options.inbox_prefix == "_BASE"
    with jsclient.Connection(options=base, servers=server.url) as conn:
        assert conn.options.name == "base" and conn.is_connected
    with pytest.raises(jsclient.InvalidArgumentError, match="Options once"):
        jsclient.Connection(base, options=base)


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"connect_timeout": -1}, "connect_timeout"),
        ({"name": 5}, "name"),
        ({"echo": "yes"}, "echo"),
        ({"max_reconnect_attempts": -2}, "max_reconnect_attempts"),
        ({"ws_headers": {"Host": "h"}}, "ws_headers"),
        ({"user_credentials": 5}, "user_credentials"),
        ({"token": "t", "nkey_seed": lambda: "S"}, "nkey_seed"),
        ({"options": jsclient.Options(name="base"), "ping_interval": 0}, "ping_interval"),
        ({"options": {"name": "x"}}, "options"),
        ({"error_cb": "not callable"}, "error_cb"),
    ],
    ids=lambda value: "-".join(value) if isinstance(value, dict) else None,
)
def test_a_bad_value_is_refused_by_name_before_connecting(
    server: NatsServer, keywords: dict[str, Any], named: str
) -> None:
    before = _monitor(server, "varz")["total_connections"]
    with pytest.raises(jsclient.InvalidArgumentError, match=named):
        jsclient.connect(server.url, **keywords)
    assert _monitor(server, "varz")["total_connections"] == before  # nothing reached the server


def test_a_misspelt_keyword_is_an_error_naming_it() -> None:
    # A jsclient.Error like every other bad option (a type checker flags it at the call: below).
    with pytest.raises(jsclient.InvalidArgumentError, match=r"unknown connection option\(s\): nmae"):
        jsclient.connect("nats://127.0.0.1:1", **{"nmae": "x"})
    with pytest.raises(jsclient.InvalidArgumentError, match=r"unknown connection option\(s\): nmae"):
        jsclient.Connection("nats://127.0.0.1:1", **{"nmae": "x"})
    with pytest.raises(jsclient.InvalidArgumentError, match="nmae"):  # **kwargs still checked at run time
        jsclient.Options.build("nats://127.0.0.1:1", **{"nmae": "x"})
    # Options made directly, or changed, say the same, and name the field that was meant.
    with pytest.raises(jsclient.InvalidArgumentError, match=r"nmae \(did you mean name\?\)"):
        jsclient.Options(**{"nmae": "x"})
    with pytest.raises(jsclient.InvalidArgumentError, match=r"servrs \(did you mean servers\?\)"):
        jsclient.Options().replace(servrs="nats://127.0.0.1:1")
    with pytest.raises(jsclient.InvalidArgumentError, match="keywords only"):
        jsclient.Options(*["nats://127.0.0.1:1"])


def test_mypy_refuses_a_misspelt_keyword_and_a_wrong_type(tmp_path: Path) -> None:
    script = tmp_path / "wrong.py"
    script.write_text(
        "import jsclient\n"
        "jsclient.connect('nats://127.0.0.1:4222', nmae='x')\n"
        "jsclient.Connection('nats://127.0.0.1:4222', connect_timeout='2')\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(script)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert 'Argument "nmae" to "connect" has incompatible type' in run.stdout, run.stdout + run.stderr
    assert 'Argument "connect_timeout" to "Connection" has incompatible type "str"' in run.stdout, run.stdout
