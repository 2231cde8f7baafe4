"""The operator's side: the ``kafka-group`` command (:mod:`.cli`, one module per command) and
what it is built on.

* :mod:`.admin`: describe a group, reset its offsets, and the rule of every command that
  needs a group without live members (also the Python API's ``describe_group`` and
  ``reset_offsets``).
* :mod:`.lag`: a group's description with log end offsets and lag (``describe``).
* :mod:`.kafka_views`: ``describe`` and ``list`` printed as ``kafka-consumer-groups`` prints.
* :mod:`.reset`: the target offsets of ``reset-offsets``, and Kafka's CSV reset plans.
* :mod:`.exporter`: ``exporter``'s Prometheus collector; :mod:`.record_times` (lag in
  seconds) and :mod:`.status` (a partition's Burrow-style status) are its parts.
* :mod:`.assets`: the Grafana dashboard and Prometheus alert rules shipped with it.
* :mod:`.timeline`: partition ownership and commits over the whole group log (``timeline``).
* :mod:`.delete` (``delete``) and :mod:`.delete_offsets` (``delete-offsets``).
* :mod:`.committed`: a group's committed offsets as one SQL query over its log.

A Kafka consumer group's committed offsets (``export-to-kafka``, ``import-from-kafka``, and
the source options ``commitToKafka`` / ``importFromKafkaGroup``) are in
:mod:`spark_kafka_group.kafka.consumer_group_offsets`: the running source needs them. The
source imports one thing from here, :func:`.admin.describe_group`, for
``startingOffsets=group`` (a read of the group's committed offsets, no join).
"""
