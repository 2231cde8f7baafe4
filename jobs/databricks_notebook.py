# Databricks notebook source
# MAGIC %md
# MAGIC # Kafka consumer groups on Spark: `format("kafka-group")`
# MAGIC
# MAGIC Several notebooks or jobs with the same `groupId` share a topic's partitions as one
# MAGIC consumer group (cooperative rebalancing, static membership). The group's state and
# MAGIC committed offsets live in a Delta table per group under `groupStore`, which you can
# MAGIC query with SQL (below). Set the widgets, then run all.

# COMMAND ----------

# MAGIC %pip install spark-kafka-group

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

spark_kafka_group.register(spark)  # `spark`, `dbutils`, `display`: notebook globals

events = (
    spark.readStream.format("kafka-group")
    .option("kafka.bootstrap.servers", bootstrap_servers)
    .option("subscribe", topic)
    .option("groupId", group_id)
    .option("groupStore", group_store)
    # S3 group logs need a safe compare-and-swap: conditional puts (or a DynamoDB lock)
    .option("groupStore.conditional_put", "etag")
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
display(events.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Ingest into a Delta table
# MAGIC Spark's Delta sink is idempotent per checkpoint and batch id. Start this cell in several
# MAGIC jobs with the same `group_id` to split the partitions between them.

# COMMAND ----------

query = (
    events.writeStream.format("delta")
    .option("checkpointLocation", checkpoint)
    .trigger(availableNow=True)
    .toTable(table)
)
query.awaitTermination()
spark_kafka_group.leave_group(query)  # hand the partitions over now, not at session timeout

# COMMAND ----------

# MAGIC %md
# MAGIC ## The group log, with SQL
# MAGIC One row per record: `JOIN`, `GENERATION`, `SYNC`, `HEARTBEAT`, `LEAVE`, `EXPIRE`,
# MAGIC `COMMIT`, ... with the member, generation, topic, partition and offset in typed columns.

# COMMAND ----------

spark.conf.set("kafka_group.log", f"{group_store}/{group_id}")

# COMMAND ----------

# MAGIC %sql
# MAGIC -- committed offset of every partition: the last accepted COMMIT
# MAGIC SELECT topic, partition, max_by(offset, log_version) AS committed_offset,
# MAGIC        timestamp_millis(max(timestamp_ms)) AS committed_at,
# MAGIC        max_by(member_id, log_version) AS committed_by
# MAGIC FROM delta.`${kafka_group.log}`
# MAGIC WHERE kind = 'COMMIT'
# MAGIC GROUP BY topic, partition
# MAGIC ORDER BY topic, partition

# COMMAND ----------

# MAGIC %sql
# MAGIC -- rebalances: every generation, when and why
# MAGIC SELECT generation, timestamp_millis(timestamp_ms) AS at,
# MAGIC        get_json_object(payload, '$.leader') AS leader,
# MAGIC        get_json_object(payload, '$.members') AS members
# MAGIC FROM delta.`${kafka_group.log}`
# MAGIC WHERE kind = 'GENERATION'
# MAGIC ORDER BY log_version

# COMMAND ----------

# MAGIC %sql
# MAGIC -- time travel: the log as it was an hour ago
# MAGIC SELECT kind, count(*) AS records
# MAGIC FROM delta.`${kafka_group.log}` TIMESTAMP AS OF current_timestamp() - INTERVAL 1 HOUR
# MAGIC GROUP BY kind

# COMMAND ----------

# MAGIC %md
# MAGIC ## Lag and ownership from Python (the `kafka-group` CLI does the same from a shell)

# COMMAND ----------

from spark_kafka_group.ops.lag import describe_with_lag

report = describe_with_lag(group_store, group_id, bootstrap_servers=bootstrap_servers)
print(f"{report.state}, generation {report.generation}, total lag {report.total_lag}")
display(spark.createDataFrame([p.__dict__ for p in report.partitions]))

# COMMAND ----------

# MAGIC %sh
# MAGIC kafka-group describe --store s3://my-bucket/kafka-groups --group events-ingest \
# MAGIC   --bootstrap-servers broker1:9092
# MAGIC kafka-group timeline --store s3://my-bucket/kafka-groups --group events-ingest \
# MAGIC   --out /tmp/timeline.png --json | head -40
