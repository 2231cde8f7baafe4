"""The query's progress listener, in the user's driver: what Spark's query progress gives.

:mod:`.progress` commits each completed batch of a ``kafka-group`` query on its member's
behalf; :mod:`.writes` holds that write, into the listener's own commit object for the member
(the listener never appends to the group log); :mod:`.lag` computes Spark's Kafka lag figures
from the progress. Leaving on request, ``leave_group``, is an operator's action, in
:mod:`spark_kafka_group.ops.leave`.
"""
