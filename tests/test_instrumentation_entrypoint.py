"""``opentelemetry-instrument python app.py`` switches jsclient's instrumentation on with no code change.

The child process runs a script that knows nothing of OpenTelemetry under the ``opentelemetry-instrument`` of
the test's own virtualenv, which configures the SDK (opentelemetry-distro's configurator: console exporters,
chosen by ``OTEL_*_EXPORTER``) and calls every instrumentor registered under the ``opentelemetry_instrumentor``
entry point group.  The test reads the console exporter's output.

Which registration the child sees: entry points are read from installed metadata (``*.dist-info``), which pip
wrote when the package was installed, from the setup.cfg of the tree it was installed from.  ``make test``'s
virtualenv holds an editable install of the very checkout under test, so its metadata is this tree's; but a
second worktree run with another checkout's virtualenv (``PYTHONPATH=$PWD``) imports its own code beside that
checkout's metadata.  So the child gets a ``jsclient-*.dist-info`` written from *this* tree's setup.cfg, first
on its ``PYTHONPATH`` (``importlib.metadata`` takes the first distribution of a name along ``sys.path``):
what the child finds is what this tree declares, wherever the test runs, and the installed copy is checked
as well when it is this tree's (``make test``).  tests/test_dist.py checks the built wheel's entry points.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient.server import NatsServer

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
GROUP = "opentelemetry_instrumentor"
ENTRY = "jsclient = jsclient.instrumentation:JsclientInstrumentor"

APP = textwrap.dedent(
    """
    import importlib.metadata
    import os
    import sys

    import jsclient

    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="opentelemetry_instrumentor")}
    print("ENTRY POINTS", sorted(found.items()), file=sys.stderr)
    with jsclient.connect(os.environ["NATS_URL"]) as nc:
        nc.subscribe("auto.echo", queue="echoes", callback=lambda m: m.respond(m.data))
        nc.flush()
        nc.publish("auto.note", b"hello")
        assert nc.request("auto.echo", b"ping", timeout=5).data == b"ping"
        # The callbacks of a subscription run one after another: once this is answered, the first one's span
        # has ended (the connection's close does not wait for a callback thread).
        assert nc.request("auto.echo", b"again", timeout=5).data == b"again"
    """
)


def declared_dist_info(where: Path) -> Path:
    """A ``jsclient-<version>.dist-info`` holding the entry points this tree's setup.cfg declares."""
    config = configparser.RawConfigParser()
    config.read(ROOT / "setup.cfg")
    info = where / f"jsclient-{jsclient.__version__}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jsclient\nVersion: {jsclient.__version__}\n")
    groups = [
        f"[{group}]\n{textwrap.dedent(value).strip()}\n" for group, value in config.items("options.entry_points")
    ]
    (info / "entry_points.txt").write_text("\n".join(groups))
    return where


def console_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporters printed one after another."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while True:
        start = text.find("{", at)
        if start < 0:
            return found
        obj, at = decoder.raw_decode(text, start)
        found.append(obj)


def test_opentelemetry_instrument_finds_jsclient_and_reports_its_spans(server: NatsServer, tmp_path: Path) -> None:
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    assert instrument.exists(), f"{instrument}: the test extra (opentelemetry-distro) is not installed"
    (tmp_path / "app.py").write_text(APP)
    path = [str(declared_dist_info(tmp_path / "meta")), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "NATS_URL": server.url,
        "OTEL_SERVICE_NAME": "jsclient-auto",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "console",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "nats",  # nats-py's (a test dependency): not under test here
    }
    run = subprocess.run(
        [str(instrument), sys.executable, "app.py"],
        capture_output=True, text=True, timeout=100, check=False, cwd=tmp_path, env=env,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert f"('jsclient', '{ENTRY.split(' = ')[1]}')" in run.stderr, run.stderr[-4000:]
    printed = console_objects(run.stdout)
    spans = [obj for obj in printed if "context" in obj and "kind" in obj]
    named = {span["name"] for span in spans}
    assert {"publish auto.note", "request auto.echo", "process auto.echo"} <= named, sorted(named)
    requests = {s["context"]["span_id"]: s for s in spans if s["name"] == "request auto.echo"}
    answered = [s for s in spans if s["name"] == "process auto.echo" and s["parent_id"] in requests]
    assert answered, "no process span is a child of a request span"
    assert answered[0]["attributes"]["messaging.consumer.group.name"] == "echoes"
    assert answered[0]["resource"]["attributes"]["service.name"] == "jsclient-auto"
    metrics = {
        metric["name"]
        for obj in printed
        for resource in obj.get("resource_metrics", [])
        for scope in resource["scope_metrics"]
        if scope["scope"]["name"] == "jsclient.instrumentation"
        for metric in scope["metrics"]
    }
    assert {"messaging.client.sent.messages", "messaging.process.duration"} <= metrics, metrics


def test_the_installed_metadata_registers_the_instrumentor_when_it_is_this_trees() -> None:
    """``make test`` installs this checkout editable: its installed entry points are this tree's."""
    dist = importlib.metadata.distribution("jsclient")
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    if direct.get("url") != ROOT.as_uri():
        pytest.skip(f"jsclient's metadata was installed from {direct.get('url')}, not this tree")
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=GROUP)}
    assert found.get("jsclient") == ENTRY.split(" = ")[1]
