"""Operator-side building blocks of the ``kafka-group`` CLI.

* :mod:`.lag`: a group's description with log end offsets and lag (``describe``).
* :mod:`.kafka_views`: ``describe`` and ``list`` printed as ``kafka-consumer-groups`` prints.
* :mod:`.reset`: the target offsets of ``reset-offsets``, and Kafka's CSV reset plans.
* :mod:`.exporter`: ``exporter``'s Prometheus collector; :mod:`.record_times` (lag in
  seconds) and :mod:`.status` (a partition's Burrow-style status) are its parts.
* :mod:`.assets`: the Grafana dashboard and Prometheus alert rules shipped with it.
* :mod:`.timeline`: partition ownership and commits over the whole group log (``timeline``).

A Kafka consumer group's committed offsets (``export-to-kafka``, ``import-from-kafka``, and
the source options ``commitToKafka`` / ``importFromKafkaGroup``) are in
:mod:`spark_kafka_group.kafka.consumer_group_offsets`: the running source needs them, and
nothing on the source's path imports this package.
"""
