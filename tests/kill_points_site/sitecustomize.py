"""Run at the start of every Python process of a test member whose PYTHONPATH has this
directory (tests/processes.py's ``MemberProcess(kill_point=...)``): the driver script, Spark's
streaming-source process and its Python workers. Hooks tests/kill_points.py's points there."""

import os

if os.environ.get("KILL_POINT"):
    from tests.kill_points import install

    install()
