"""Operator-side building blocks of the ``kafka-group`` CLI and the Kafka offset mirror.

* :mod:`.kafka_offsets`: read and write a real Kafka consumer group's committed offsets
  (``export-to-kafka``, ``import-from-kafka``, the ``commitToKafka`` and
  ``importFromKafkaGroup`` source options).
* :mod:`.lag`: a group's description with log end offsets and lag (``describe``).
* :mod:`.reset`: the target offsets of ``reset-offsets``.
* :mod:`.timeline`: partition ownership and commits over the whole group log (``timeline``).
"""
