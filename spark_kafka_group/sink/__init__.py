"""Sinks: writing a group's batches so that every record lands once (``delta.py``: into a
Delta table through ``foreachBatch``; ``landed.py``: its pure decisions)."""
