"""The jsclient command against a real server: outputs, --json, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

import jsclient
from jsclient.cli import EXIT_ERROR, EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE, main
from jsclient.server import NatsCluster, NatsServer, free_port

from . import servers
from .conftest import server_release


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_pub_sub_roundtrip(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    got: list[str] = []
    th = threading.Thread(
        target=lambda: got.append(
            str(main(["sub", "cli.demo", "--server", server.url, "--count", "2", "--json", "--timeout", "5"]))
        )
    )
    th.start()
    time.sleep(0.5)
    assert main(["pub", "cli.demo", "hello {n}", "-n", "2", "-H", "K=v", "--server", server.url]) == EXIT_OK
    th.join(10)
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(m["subject"], m["data"], m["headers"]) for m in lines] == [
        ("cli.demo", "hello 0", {"K": ["v"]}),
        ("cli.demo", "hello 1", {"K": ["v"]}),
    ]
    assert got == ["0"]


def test_request_reply(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    th = threading.Thread(target=main, args=(["reply", "cli.svc", "echo:{data}", "--server", server.url, "-n", "1"],))
    th.start()
    time.sleep(0.5)
    code = main(["req", "cli.svc", "ping", "--server", server.url, "--json"])
    th.join(10)
    assert code == EXIT_OK and not th.is_alive()
    # Both commands print to this process's stdout, in whichever order their threads get there.
    lines = capsys.readouterr().out.splitlines()
    assert "answered request on cli.svc" in lines
    replies = [json.loads(line) for line in lines if line.startswith("{")]
    assert [r["data"] for r in replies] == ["echo:ping"]


def test_stream_consumer_and_kv_commands(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    s = ["--server", server.url]
    assert run(capsys, "stream", "add", "CLI", "--subjects", "clis.>", *s)[0] == EXIT_OK
    assert main(["pub", "clis.a", "one", *s]) == EXIT_OK
    assert main(["pub", "clis.b", "two", *s]) == EXIT_OK
    capsys.readouterr()
    code, out, _ = run(capsys, "stream", "ls", *s)
    assert code == EXIT_OK and "CLI" in out and "clis.>" in out
    code, out, _ = run(capsys, "stream", "info", "CLI", "--json", *s)
    assert json.loads(out)["state"]["messages"] == 2
    assert run(capsys, "consumer", "add", "CLI", "work", *s)[0] == EXIT_OK
    code, out, _ = run(capsys, "consumer", "next", "CLI", "work", "-n", "2", "--json", *s)
    assert [json.loads(line)["data"] for line in out.splitlines()] == ["one", "two"]
    code, out, _ = run(capsys, "consumer", "info", "CLI", "work", "--json", *s)
    assert json.loads(out)["num_ack_pending"] == 0
    assert run(capsys, "stream", "purge", "CLI", *s)[0] == EXIT_OK
    assert run(capsys, "stream", "rm", "CLI", *s)[0] == EXIT_OK
    assert run(capsys, "kv", "add", "clikv", *s)[0] == EXIT_OK
    assert run(capsys, "kv", "put", "clikv", "color", "blue", *s)[0] == EXIT_OK
    code, out, _ = run(capsys, "kv", "get", "clikv", "color", *s)
    assert (code, out.strip()) == (EXIT_OK, "blue")
    code, out, _ = run(capsys, "kv", "ls", "clikv", "--json", *s)
    assert json.loads(out) == ["color"]
    assert run(capsys, "kv", "del", "clikv", "color", *s)[0] == EXIT_OK
    code, _, err = run(capsys, "kv", "get", "clikv", "color", *s)
    assert code == EXIT_ERROR and err.count("\n") == 1 and "deleted" in err


@pytest.mark.parametrize(
    "argv, code, fragment",
    [
        (["pub", "bad subject", "x"], EXIT_USAGE, "whitespace"),
        (["sub", "a.>.b"], EXIT_USAGE, "last token"),
        (["kv", "put", "b", "onlykey"], EXIT_USAGE, "needs a value"),
        (["stream", "info"], EXIT_USAGE, "needs a name"),
    ],
)
def test_user_mistakes_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, fragment: str
) -> None:
    got, _, err = run(capsys, *argv)
    assert got == code
    assert fragment in err and "Traceback" not in err


def test_unreachable_server_and_timeouts(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    nowhere = f"nats://127.0.0.1:{free_port()}"
    code, _, err = run(capsys, "req", "x", "y", "--server", nowhere, "--connect-timeout", "0.5")
    assert code == EXIT_ERROR and "could not connect" in err and err.count("\n") == 1
    with jsclient.connect(server.url) as nc:
        nc.subscribe("cli.silent")
        nc.flush()
        code, _, err = run(capsys, "req", "cli.silent", "x", "--timeout", "0.3", "--server", server.url)
    assert code == EXIT_TIMEOUT and "timeout" in err
    code, _, err = run(capsys, "req", "cli.nobody", "x", "--server", server.url)
    assert code == EXIT_ERROR and "no responders" in err


def test_bench_and_embedded(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--embedded", "bench", "js", "-n", "2000", "--json")
    result = json.loads(out)
    assert code == EXIT_OK and result["count"] == 2000 and result["rate"] > 0


def test_python_dash_m_and_server_command() -> None:
    version = subprocess.run([sys.executable, "-m", "jsclient", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("jsclient ")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jsclient", "server", "--port", str(port), "--websocket"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert f"127.0.0.1:{port}" in proc.stdout.readline()
        ws_url = proc.stdout.readline().split()[-1]
        assert ws_url.startswith("ws://127.0.0.1:")
        with jsclient.connect(f"nats://127.0.0.1:{port}") as nc:
            assert nc.jetstream().account_info().api.level >= 0
            sub = nc.subscribe("cli.ws")
            nc.flush()
            pub = subprocess.run([sys.executable, "-m", "jsclient", "--server", ws_url, "pub", "cli.ws", "over ws"],
                                 capture_output=True, text=True, timeout=60)
            assert pub.returncode == 0, pub.stderr
            assert sub.next_msg(timeout=5).data == b"over ws"
    finally:
        proc.terminate()
        proc.wait(15)
    assert proc.returncode == 0


@pytest.mark.server_behaviour("2.14", "the CLI prints the refusal (test_a_feature_the_server_lacks_is_one_line)")
def test_counter_and_consumer_pause_commands(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    s = ["--server", server.url]
    assert run(capsys, "stream", "add", "CNTC", "--subjects", "cntc.>", "--counters", *s)[0] == EXIT_OK
    assert run(capsys, "counter", "add", "cntc.a", "5", *s)[1].strip() == "cntc.a = 5"
    assert run(capsys, "counter", "add", "cntc.a", "-2", *s)[1].strip() == "cntc.a = 3"
    code, out, _ = run(capsys, "counter", "get", "cntc.a", "--stream", "CNTC", "--json", *s)
    assert code == EXIT_OK and json.loads(out) == {"subject": "cntc.a", "value": "3"}
    code, _, err = run(capsys, "counter", "get", "cntc.a", *s)
    assert code == EXIT_USAGE and "counter get needs --stream" in err

    assert run(capsys, "stream", "add", "FEAT", "--subjects", "feat.>", "--ttl", "--marker-ttl", "60",
               "--atomic", "--schedules", *s)[0] == EXIT_OK
    with jsclient.connect(server.url) as nc:
        cfg = nc.jetstream().stream_info("FEAT").config
    assert (cfg.allow_msg_ttl, cfg.subject_delete_marker_ttl, cfg.allow_atomic, cfg.allow_msg_schedules) == (
        True, 60.0, True, True
    )
    assert run(capsys, "consumer", "add", "FEAT", "w", *s)[0] == EXIT_OK
    code, out, _ = run(capsys, "consumer", "pause", "FEAT", "w", "--seconds", "600", *s)
    assert code == EXIT_OK and "consumer w paused until" in out
    code, out, _ = run(capsys, "consumer", "resume", "FEAT", "w", "--json", *s)
    assert code == EXIT_OK and json.loads(out)["paused"] is False
    code, out, _ = run(capsys, "consumer", "reset", "FEAT", "w", "--seq", "1", *s)
    assert code == EXIT_OK and "from stream sequence 1" in out
    code, _, err = run(capsys, "consumer", "pause", "FEAT", "w", "--until", "2030-01-01T00:00:00", *s)
    assert code == EXIT_USAGE and "timezone-aware" in err
    code, _, err = run(capsys, "consumer", "pause", "FEAT", *s)
    assert code == EXIT_USAGE and "needs the consumer's name" in err
    code, _, err = run(capsys, "consumer", "unpin", "FEAT", "w", "--group", "g", *s)
    assert code == EXIT_ERROR and err  # not a priority-group consumer: the server's error, one line


@pytest.mark.server_behaviour("2.11", "the CLI prints the refusal (test_a_feature_the_server_lacks_is_one_line)")
def test_kv_ttl_commands(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    s = ["--server", server.url]
    assert run(capsys, "kv", "add", "clittl", "--limit-marker-ttl", "60", *s)[0] == EXIT_OK
    code, out, _ = run(capsys, "kv", "put", "clittl", "session", "abc", "--ttl", "1", *s)
    assert code == EXIT_OK and "session = abc" in out
    code, _, err = run(capsys, "kv", "put", "clittl", "session", "again", "--ttl", "5", *s)
    assert code == EXIT_ERROR and "already exists" in err  # a TTL only with the first value (ADR-48)
    code, _, err = run(capsys, "kv", "put", "clittl", "other", "x", "--ttl", "0", *s)
    assert code == EXIT_USAGE and "ttl must be at least 1 s" in err
    with jsclient.connect(server.url) as nc:
        kv = nc.jetstream().key_value("clittl")
        assert kv.status().limit_marker_ttl == 60.0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                kv.get("session")
            except jsclient.KeyDeletedError:
                break
            time.sleep(0.1)
        with pytest.raises(jsclient.KeyDeletedError):
            kv.get("session")


def test_micro_commands(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    from jsclient import micro

    s = ["--server", server.url]
    with jsclient.connect(server.url) as nc, micro.add_service(nc, name="clisvc", version="1.0.0") as svc:
        svc.add_endpoint("hello", lambda r: r.respond(b"hi"))
        nc.request("hello", b"", timeout=5)
        code, out, _ = run(capsys, "micro", "ls", *s)
        assert code == EXIT_OK and "clisvc" in out and svc.id in out
        code, out, _ = run(capsys, "micro", "info", "clisvc", *s)
        assert code == EXIT_OK and "hello" in out
        deadline = time.monotonic() + 10
        while svc.stats()["endpoints"][0]["num_requests"] != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        code, out, _ = run(capsys, "micro", "stats", "clisvc", "--json", *s)
        stats = json.loads(out)
        assert code == EXIT_OK and stats[0]["id"] == svc.id and stats[0]["endpoints"][0]["num_requests"] == 1
    code, out, _ = run(capsys, "micro", "ls", "clisvc", "--timeout", "0.3", *s)
    assert code == EXIT_OK and "clisvc" not in out  # stopped: nobody answers, an empty table


@pytest.mark.compat
def test_a_feature_the_server_lacks_is_one_line(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    """On a server older than 2.12 the refusal is the CLI's one-line error, and the stream is not made."""
    if server_release() >= (2, 12):
        pytest.skip("the server has counters")
    s = ["--server", server.url]
    code, _, err = run(capsys, "stream", "add", "CNTOLD", "--subjects", "cntold.>", "--counters", *s)
    assert code == EXIT_ERROR and "message counters needs nats-server 2.12 or newer" in err
    assert len(err.strip().splitlines()) == 1
    with jsclient.connect(server.url) as nc:
        assert "CNTOLD" not in nc.jetstream().stream_names()


@pytest.mark.server_behaviour("2.11", "message tracing (refused: test_the_trace_command_before_2_11_is_one_line)")
def test_trace_command(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    s = ["--server", server.url]
    with jsclient.connect(server.url, name="listener") as listener:
        sub = listener.subscribe("cli.trace")
        listener.flush()
        code, out, _ = run(capsys, "trace", "cli.trace", "hi", *s)
        assert code == EXIT_OK
        assert "message on 'cli.trace' (traced only, not delivered): complete, 1 server" in out
        assert "to client 'listener'" in out and "subscription cli.trace" in out
        code, out, _ = run(capsys, "trace", "cli.trace", "there", "--deliver", "-H", "K=v", "--json", *s)
        found = json.loads(out)
        assert code == EXIT_OK and (found["complete"], found["deliver"], found["missing"]) == (True, True, [])
        (report,) = found["reports"]
        assert [e["type"] for e in report["events"]] == ["in", "eg"] and report["headers"]["K"] == ["v"]
        assert sub.next_msg(timeout=10).data == b"there"  # the first one, traced only, never came
    nowhere = f"nats://127.0.0.1:{free_port()}"
    code, _, err = run(capsys, "trace", "cli.*", "--server", nowhere)  # refused before connecting anywhere
    assert code == EXIT_USAGE and "wildcard" in err


@pytest.mark.server_behaviour("2.11", "message tracing (refused: test_the_trace_command_before_2_11_is_one_line)")
def test_an_incomplete_trace_is_printed_and_exits_as_a_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with NatsCluster(2, jetstream=False) as cluster, jsclient.connect(cluster.urls[1]) as listener:
        listener.subscribe("cli.far")
        listener.subscribe("cli.probe", callback=lambda m: m.respond(b""))  # after cli.far, over the same route
        listener.flush()
        with jsclient.connect(cluster.urls[0]) as nc:
            deadline = time.monotonic() + 30
            while True:
                try:
                    nc.request("cli.probe", timeout=5)
                    break
                except jsclient.NoRespondersError:
                    assert time.monotonic() < deadline, "the listener's interest never reached the other server"
                    time.sleep(0.05)
        cluster.servers[1].pause()
        try:
            code, out, err = run(capsys, "trace", "cli.far", "--timeout", "0.5", "--server", cluster.urls[0])
        finally:
            cluster.servers[1].resume()
    assert code == EXIT_TIMEOUT
    assert "incomplete: no report from hop 1" in out and "(no report came from there)" in out
    assert err.strip() == "jsclient: timeout: no report from hop 1 within 0.5 s"


def test_the_trace_command_before_2_11_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    binary = servers.binary("2.10.26")
    if not binary.is_file():
        pytest.skip("nats-server 2.10.26 not fetched (python -m tests.servers fetch)")
    with NatsServer(binary=str(binary), jetstream=False) as server:
        code, _, err = run(capsys, "trace", "cli.trace", "--server", server.url)
    assert code == EXIT_ERROR and len(err.strip().splitlines()) == 1
    assert "message tracing needs nats-server 2.11 or newer" in err
