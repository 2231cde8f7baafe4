"""How ``kafka-group`` commands print: text for people, ``--json`` for programs."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any


def emit(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=False, default=str))
    else:
        print(text())


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [[str("-" if v is None else v) for v in row] for row in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def iso(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
