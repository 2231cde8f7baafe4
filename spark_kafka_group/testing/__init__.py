"""What tests and benchmarks use to run the production group members without Spark, a broker
or delta-rs: :mod:`.simulation` (members over the in-memory log, stepped one by one or in a
discrete-event simulation of a whole group). Part of the package so that the benchmarks import
nothing from ``tests/``."""
