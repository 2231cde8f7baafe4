"""The query's progress listener, in the user's driver: what Spark's query progress gives.

:mod:`.progress` commits each completed batch of a ``kafka-group`` query on its member's
behalf (and ``leave_group`` leaves for a query's members on request); :mod:`.writes` holds
those writes in a member's name (the listener's commit object, the LEAVE); :mod:`.lag`
computes Spark's Kafka lag figures from the progress.
"""
