"""The ``kafka-group`` command line: operate kafka-group consumer groups like Kafka's own.

    kafka-group list [--state [STATES]]   (every command: --store defaults as groupStore does)
    kafka-group describe (--group G ... | --all-groups) [--offsets | --members [--verbose] |
        --state] [--bootstrap-server B]
    kafka-group reset-offsets (--group G ... | --all-groups) (--topic T[:p,p] | --all-topics)
        (--to-earliest | --to-latest | --to-current | --to-offset N | --to-datetime ISO |
         --by-duration PnDTnHnMnS | --shift-by N | --from-file CSV) [--export] [--execute]
    kafka-group delete-offsets --group G --topic T[:p,p] ... --bootstrap-server B
    kafka-group export-to-kafka --group G --kafka-group K --bootstrap-server B
    kafka-group import-from-kafka --group G --kafka-group K --bootstrap-server B
    kafka-group timeline --group G --out group.png
    kafka-group delete --group G [--yes]
    kafka-group exporter --bootstrap-server B [--group G ...] [--port 9308]

Names, meanings and output columns are ``kafka-consumer-groups``'s; every command that talks
to Kafka takes ``--bootstrap-server`` (default ``$KAFKA_BOOTSTRAP_SERVERS``),
``--command-config`` and ``--timeout``. ``--json`` prints a machine-readable result instead of
text. Exit codes: 0 success, 1 the operation failed (the message says why), 2 wrong usage.

One module per command (``reset_offsets.py`` is ``kafka-group reset-offsets``; ``list`` is
``list_groups.py``), each with its parser (``add_parser``) and what it does (``run``);
:mod:`.arguments` holds what they share, :mod:`.output` how they print, :mod:`.main` the
parser and the exit codes. The logic lives in :mod:`spark_kafka_group.ops` (the group commands
in :mod:`spark_kafka_group.ops.admin`) and :mod:`spark_kafka_group.kafka.consumer_group_offsets`.
"""
