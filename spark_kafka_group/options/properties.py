"""Java ``.properties`` files: Kafka's client properties (``--command-config``) and the option
files in ``conf/``."""

from __future__ import annotations

import javaproperties


def read_properties(path: str) -> dict[str, str]:
    """The file's settings, read as ``java.util.Properties.load`` does: ``=``, ``:`` or
    whitespace between key and value, ``#``/``!`` comments, backslash escapes (``\\uXXXX``
    too) and lines continued with a trailing backslash. Raises OSError if the file cannot be
    read."""
    with open(path, encoding="utf-8") as f:
        return dict(javaproperties.load(f))
