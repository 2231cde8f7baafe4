"""The ``kafka-group`` command line. Operator commands arrive in a later change."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from spark_kafka_group._version import __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kafka-group", description="Operate spark-kafka-group consumer groups."
    )
    parser.add_argument("--version", action="version", version=f"kafka-group {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
