"""Trying the source on one machine: the quickstart (``kafka-group quickstart``) and the local
parts it runs on.

* :mod:`.run`: the quickstart's steps and options.
* :mod:`.embedded`: an embedded Kafka-compatible broker (Tansu) on a free loopback port.
* :mod:`.sample_data`: topics and sample records.

The benchmarks and the test fixtures use the broker and the sample data too.
"""
