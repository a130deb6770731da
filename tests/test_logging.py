"""The library stays quiet until the application configures logging."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jsclient.server import NatsServer

CHILD = """
import logging, sys, threading, jsclient
if sys.argv[2] == "configured":
    logging.basicConfig(level=logging.WARNING)
nc = jsclient.connect(sys.argv[1])
ran = threading.Event()
def cb(msg):
    ran.set()
    raise RuntimeError("a user callback failed")
nc.subscribe("quiet", callback=cb)
nc.publish("quiet", b"x")
nc.flush()
assert ran.wait(10)
nc.close()
"""


@pytest.mark.parametrize("logging_setup", ["none", "configured"])
def test_a_failing_callback_is_logged_only_where_the_application_asks(
    server: NatsServer, logging_setup: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, server.url, logging_setup], capture_output=True, text=True, timeout=60,
        check=True,
    )
    if logging_setup == "none":
        assert out.stderr == ""  # logging's last resort would print the traceback here
    else:
        assert "a user callback failed" in out.stderr
