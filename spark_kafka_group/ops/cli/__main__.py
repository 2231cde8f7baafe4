"""``python -m spark_kafka_group.ops.cli``: the ``kafka-group`` command."""

from spark_kafka_group.ops.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
