# Databricks notebook source
# MAGIC %md
# MAGIC # Kafka consumer groups on Spark: `format("kafka-group")`
# MAGIC
# MAGIC Several notebooks or jobs with the same `groupId` share a topic's partitions as one
# MAGIC consumer group (cooperative rebalancing, static membership). The group's state and
# MAGIC committed offsets live in a Delta table per group under `groupStore`, which you can
# MAGIC query with SQL (below). Put the wheel's path in the `%pip` cell, set the widgets, then
# MAGIC run all: every cell ends by itself (the ingest uses `Trigger.AvailableNow`), so "Run all"
# MAGIC works on classic and serverless compute.
# MAGIC
# MAGIC ## Which compute
# MAGIC
# MAGIC This package needs pyspark 4.0 or later, that is **Databricks Runtime 17.x or later**
# MAGIC (Spark 4.0). Python data sources as such exist from Runtime 15.4 LTS, but the 15.x and
# MAGIC 16.x runtimes run Spark 3.5, which this package does not support.
# MAGIC
# MAGIC * **Classic compute, dedicated (single user) access mode**, Runtime 17.x or later: classic
# MAGIC   PySpark; the notebook's Python process is the driver's. `register(spark)` registers the
# MAGIC   source and adds the progress listener in the notebook's process. Every trigger works.
# MAGIC * **Standard (formerly shared) access mode**, Runtime 17.x or later: the notebook talks to
# MAGIC   Spark through Spark Connect. `register(spark)` sends the source to the server; the
# MAGIC   listener is pickled and the server runs it in a Python process of its own.
# MAGIC * **Serverless**: Spark Connect as on standard compute, with a serverless environment
# MAGIC   whose Spark is 4.0 or later. Streaming there runs only with `trigger(availableNow=True)`,
# MAGIC   as in the ingest cell below, and storage is governed by Unity Catalog: keep the group
# MAGIC   store and the checkpoint under an external location the job may write to.
# MAGIC
# MAGIC Why the same code works on all three: the source's stream reader (the group member, with
# MAGIC its heartbeat thread) never runs in the notebook's Python process. Spark runs it in a
# MAGIC Python process of its own on the driver, one per query, and the fetches (`read()`) in
# MAGIC Python workers on the executors; under Spark Connect both are on the server side.
# MAGIC `%pip install` puts the package in the notebook's environment, which those processes use
# MAGIC too (on classic compute it is installed on the driver and on every worker). Two things
# MAGIC differ under Spark Connect:
# MAGIC
# MAGIC * The listener is rebuilt on the server from its pickle: it sees nothing of the notebook,
# MAGIC   neither its variables nor environment variables set in it, only the storage options
# MAGIC   given to `register(spark, storage_options={...})` (travelling with it). Give them there
# MAGIC   whenever the group store needs credentials that the server's own environment lacks
# MAGIC   (serverless has no environment variables). Without a working listener nothing is lost:
# MAGIC   the member commits each batch itself at its next trigger and leaves when its query
# MAGIC   ends; only the commit of a query's last batch can then be missing, and that batch is
# MAGIC   read again.
# MAGIC * Standard and serverless compute run user Python in a sandbox: the broker and the group
# MAGIC   store must be reachable from it (egress rules; on serverless, network connectivity
# MAGIC   configuration), and Unity Catalog credentials cannot be used inside the listener.
# MAGIC
# MAGIC Tested by the project: "Run all" of this notebook through Apache Spark Connect
# MAGIC (`SparkSession.builder.remote("local[2]")`), as classic and serverless compute run it
# MAGIC (the cells that read the group log with Spark SQL need Delta Lake in Spark, which every
# MAGIC Databricks runtime has, and are not run there); not on Databricks itself.
# MAGIC
# MAGIC The package is installed from its wheel (`spark_kafka_group-<version>-py3-none-any.whl`,
# MAGIC built with `python -m build`), uploaded to a Unity Catalog volume or a workspace file.

# COMMAND ----------

# MAGIC %pip install /Volumes/main/default/libs/spark_kafka_group-0.3.0-py3-none-any.whl

# COMMAND ----------

dbutils.library.restartPython()

# COMMAND ----------

dbutils.widgets.text("bootstrap_servers", "broker1:9092")
dbutils.widgets.text("topic", "events")
dbutils.widgets.text("group_id", "events-ingest")
dbutils.widgets.text("group_store", "s3://my-bucket/kafka-groups")
dbutils.widgets.text("table", "main.default.events_raw")
dbutils.widgets.text("checkpoint", "s3://my-bucket/checkpoints/events_raw")

bootstrap_servers = dbutils.widgets.get("bootstrap_servers")
topic = dbutils.widgets.get("topic")
group_id = dbutils.widgets.get("group_id")
group_store = dbutils.widgets.get("group_store")
table = dbutils.widgets.get("table")
checkpoint = dbutils.widgets.get("checkpoint")

# COMMAND ----------

# ruff: noqa: E402, F821  (a notebook: imports per cell, Databricks globals)
import spark_kafka_group

# The source and the listener that commits each completed batch to the group log, on every
# compute (the package also registers the source by itself, but not the listener). With a
# group store that needs credentials, also `storage_options={...}`: the `groupStore.*`
# options below without the prefix.
spark_kafka_group.register(spark)  # `spark`, `dbutils`, `display`: notebook globals

events = (
    spark.readStream.format("kafka-group")
    .option("kafka.bootstrap.servers", bootstrap_servers)
    .option("subscribe", topic)
    .option("groupId", group_id)
    .option("groupStore", group_store)
    # delta-rs writes every group log commit as a conditional put: S3, ADLS and GCS need no
    # option for it (docs/object-stores.md); credentials, if not from the compute's role:
    # .option("groupStore.AWS_REGION", ...) and the like
    # A new group ingests the topic from its start (a stream's default is latest, as in Spark)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", "500000")
    # also commit to the Kafka consumer group `group_id`, for lag dashboards
    .option("commitToKafka", "true")
    # Kafka security, e.g.:
    # .option("kafka.security.protocol", "SASL_SSL")
    # .option("kafka.sasl.mechanism", "PLAIN")
    # .option("kafka.sasl.username", dbutils.secrets.get("kafka", "user"))
    # .option("kafka.sasl.password", dbutils.secrets.get("kafka", "password"))
    .load()
)
# Defining the stream starts nothing. No display(events) here: on classic compute it would
# start a query that keeps running as a member of the group and takes partitions from the
# ingest below; serverless refuses it. The ingested table is displayed after the ingest.

# COMMAND ----------

# MAGIC %md
# MAGIC ## Ingest into a Delta table
# MAGIC The table is in the workspace's default format, Delta, whose sink is idempotent per
# MAGIC checkpoint and batch id. `Trigger.AvailableNow` reads what the group's partitions hold
# MAGIC and stops: the trigger serverless streaming allows. Start this cell in several jobs with
# MAGIC the same `group_id` to split the partitions between them.

# COMMAND ----------

query = (
    events.writeStream.option("checkpointLocation", checkpoint)
    .trigger(availableNow=True)
    .toTable(table)
)
query.awaitTermination()  # its member leaves the group when the query ends

# COMMAND ----------

# what the ingest wrote
display(
    spark.table(table)
    .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")
    .limit(20)
)

# COMMAND ----------

# MAGIC %md
# MAGIC ## The group log, with SQL
# MAGIC One row per record: `JOIN`, `GENERATION`, `SYNC`, `LEAVE`, `EXPIRE`, `COMMIT`,
# MAGIC `OFFSET_DELETE`, `DELETE` ... with the member, generation, topic, partition and offset
# MAGIC in typed columns.

# COMMAND ----------

# Python rather than %sql cells: serverless refuses `spark.conf.set` of keys of our own, so the
# path is not passed through a Spark conf variable. On Unity Catalog workspaces, reading a path
# needs an external location that covers it.
group_log = f"delta.`{group_store}/{group_id}`"

# COMMAND ----------

# needs: Delta Lake in Spark
# committed offset of every partition: the newest accepted COMMIT, unless an OFFSET_DELETE came
# after it or a DELETE cleared the group (the query of the Committed offsets page)
from spark_kafka_group.ops.committed import committed_offsets_spark_sql

display(spark.sql(committed_offsets_spark_sql(f"{group_store}/{group_id}")))

# COMMAND ----------

# needs: Delta Lake in Spark
# rebalances: every generation, when and why
display(
    spark.sql(f"""
        SELECT generation, timestamp_millis(timestamp_ms) AS at,
               get_json_object(payload, '$.leader') AS leader,
               get_json_object(payload, '$.members') AS members
        FROM {group_log}
        WHERE kind = 'GENERATION'
        ORDER BY log_version
    """)
)

# COMMAND ----------

# needs: Delta Lake in Spark
# time travel: the log as it was half an hour ago. It reaches back as far as the source option
# groupLogRetention (default 1h); older history is in the table itself, by log_version.
display(
    spark.sql(f"""
        SELECT kind, count(*) AS records
        FROM {group_log} TIMESTAMP AS OF current_timestamp() - INTERVAL 30 MINUTES
        GROUP BY kind
    """)
)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Lag and ownership from Python (the `kafka-group` CLI does the same from a shell)

# COMMAND ----------

from spark_kafka_group.ops.lag import describe_with_lag

report = describe_with_lag(group_store, group_id, bootstrap_servers=bootstrap_servers)
group = report.group
print(f"{group.state.value}, generation {group.generation}, total lag {report.total_lag}")
display(
    spark.createDataFrame(
        report.to_json()["partitions"],
        "topic string, partition int, owner string, owner_state string, committed long, "
        "committed_at_ms long, log_end long, lag long",
    )
)

# COMMAND ----------

# MAGIC %sh
# MAGIC kafka-group describe --store s3://my-bucket/kafka-groups --group events-ingest \
# MAGIC   --bootstrap-servers broker1:9092
# MAGIC kafka-group timeline --store s3://my-bucket/kafka-groups --group events-ingest \
# MAGIC   --out /tmp/timeline.png --json | head -40
