"""Quickstart: two ``format("kafka-group")`` queries share a topic as one consumer group.

The same as ``kafka-group quickstart``, which ships in the package
(:mod:`spark_kafka_group.quickstart.run` has the steps and the options):

    python jobs/quickstart.py
    python jobs/quickstart.py --bootstrap-servers broker:9092 --group-store s3://bucket/groups
"""

from __future__ import annotations

import sys

from spark_kafka_group.quickstart.run import main

if __name__ == "__main__":
    sys.exit(main())
