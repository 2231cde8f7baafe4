"""The query's progress listener, in the user's driver: what Spark's query progress gives.

:mod:`.progress` commits each completed batch of a ``kafka-group`` query on its member's
behalf and writes the LEAVE of its dynamic members when the query terminates; :mod:`.writes`
holds those writes in a member's name (the listener's commit object, the LEAVE); :mod:`.lag`
computes Spark's Kafka lag figures from the progress.
"""
