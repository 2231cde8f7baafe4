"""What tests and benchmarks share; part of the package so that the benchmarks import nothing
from ``tests/``, and so it imports only the runtime dependencies (no pytest).

- :mod:`.simulation`: the production group members without Spark, a broker or delta-rs, over
  the in-memory log, stepped one by one or in a discrete-event simulation of a whole group;
- :mod:`.waiting`: :func:`~.waiting.wait_until`, polling real processes for a state;
- :mod:`.production`: :class:`~.production.SteadyProducer`, records arriving all the time;
- :mod:`.group_log`: :func:`~.group_log.group_records`, a group's log as a list;
- :mod:`.servers` and :mod:`.seaweedfs`: an S3 server (SeaweedFS) started on this machine;
- :mod:`.skewed_group` and :mod:`.clock_member_app`: member processes whose wall clocks are off.
"""
