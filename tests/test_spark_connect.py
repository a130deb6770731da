"""jsclient.spark under Spark Connect: the pyspark wheel carries the Connect server; pyspark[connect] the client.

Runs the job in a child process against a local Connect server started by
``SparkSession.builder.remote("local[2]")``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import jsclient
from jsclient.server import NatsServer

pytest.importorskip("pyspark", reason="install the spark extra: pip install -e '.[spark]'")
pytest.importorskip("grpc", reason="Spark Connect's client needs pyspark[connect] (the connect extra)")

HERE = Path(__file__).parent


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_read_write_stream_and_udf_under_spark_connect(server: NatsServer, js: jsclient.JetStream) -> None:
    js.add_stream(name="CLICKS", subjects=["clicks.*"], allow_direct=True)
    js.add_stream(name="COUNTS", subjects=["counts.*", "_jsclient.commits.COUNTS.>"], allow_atomic=True)
    js.add_stream(name="COPY", subjects=["copy.*", "_jsclient.commits.COPY.>"], allow_atomic=True)
    for i in range(1000):
        js.publish_async(f"clicks.{i % 4}", b"%d" % i)
    js.publish_async_completed(timeout=30)
    kv = js.create_key_value("names")
    kv.put("clicks.1", b"one")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(HERE / "spark_connect_child.py"), server.url],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["session"] == "pyspark.sql.connect.session"  # a Connect client, not a classic session
    assert result["register"] == "ok"
    assert result["batch read"] == 1000
    assert result["aggregation"] == {f"clicks.{i}": 250 for i in range(4)}
    assert result["batch write"] == {f"counts.{i}": 1 for i in range(4)}
    assert result["streaming read->write"] == 1000
    assert result["kv_get udf"] == ["None", "one"]
