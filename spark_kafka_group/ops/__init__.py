"""Operator-side building blocks of the ``kafka-group`` CLI.

* :mod:`.lag`: a group's description with log end offsets and lag (``describe``).
* :mod:`.reset`: the target offsets of ``reset-offsets``.
* :mod:`.timeline`: partition ownership and commits over the whole group log (``timeline``).

A Kafka consumer group's committed offsets (``export-to-kafka``, ``import-from-kafka``, and
the source options ``commitToKafka`` / ``importFromKafkaGroup``) are in
:mod:`spark_kafka_group.kafka.consumer_group_offsets`: the running source needs them, and
nothing on the source's path imports this package.
"""
