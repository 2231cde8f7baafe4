"""What a query reads: ``subscribe``, ``subscribePattern`` or ``assign``, exactly one."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from typing import Any

from spark_kafka_group.errors import OptionError
from spark_kafka_group.options.values import ValueType

SUBSCRIPTION_OPTIONS = ("subscribe", "subscribePattern", "assign")


def _topics(name: str, value: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in value.split(",") if t.strip())
    if not topics:
        raise OptionError(
            f"Option {name!r} = {value!r} names no topic: give a comma-separated list "
            "such as 'orders,payments'."
        )
    return topics


# Java regex syntax that Python's re refuses or reads otherwise: what it is, what to write.
_JAVA_ONLY_SYNTAX: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"\\[pP]\{"),
        "\\p{...} / \\P{...} (Java's Unicode and POSIX classes such as \\p{javaLowerCase})",
        "a character class such as [a-z] or [^0-9]",
    ),
    (
        re.compile(r"\\Q"),
        "\\Q...\\E (Java's quoting)",
        "a backslash before each special character, e.g. orders\\.v1",
    ),
    (
        re.compile(r"\[[^\]]*&&"),
        "&& inside [...] (Java's class intersection, which Python reads as the characters & and [)",
        "one class listing what you mean, e.g. [b-df-hj-np-tv-z]",
    ),
    (
        re.compile(r"\(\?<[A-Za-z]"),
        "(?<name>...) (Java's named group)",
        "(?P<name>...) or a group without a name",
    ),
    (
        re.compile(r"[*+?}]\+"),
        "a possessive quantifier (*+, ++, ?+), which Python's re supports from 3.11 only",
        "a plain quantifier (*, +, ?): a topic name is matched whole either way",
    ),
)


def _java_only_syntax(value: str) -> tuple[str, str] | None:
    for pattern, what, fix in _JAVA_ONLY_SYNTAX:
        if pattern.search(value):
            return what, fix
    return None


def _pattern(name: str, value: str) -> str:
    """A Python regular expression (``re``), matched against whole topic names."""
    if not value.strip():
        raise OptionError(f"Option {name!r} is empty: give a regex such as 'orders-.*'.")
    error: re.error | None = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # Python's "possible set intersection"
            re.compile(value)
    except re.error as exc:
        error = exc
    java = _java_only_syntax(value)
    # Java's class intersection compiles in Python, with another meaning: refused as well.
    if java is not None and (error is not None or java[0].startswith("&&")):
        raise OptionError(
            f"Option {name!r} = {value!r} uses {java[0]}: subscribePattern is a Python regular "
            f"expression (Python's re), not a Java one; write {java[1]}."
        )
    if error is not None:
        raise OptionError(
            f"Option {name!r} = {value!r} is not a valid Python regular expression: {error}."
        )
    return value


def _assign(name: str, value: str) -> dict[str, tuple[int, ...]]:
    example = 'e.g. {"orders": [0, 1, 2]}'
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"Option {name!r} = {value!r} is not valid JSON ({exc.msg}); {example}."
        ) from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(
            f"Option {name!r} = {value!r} must be a non-empty JSON object; {example}."
        )
    result: dict[str, tuple[int, ...]] = {}
    for topic, partitions in parsed.items():
        if (
            not isinstance(partitions, list)
            or not partitions
            or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
            )
        ):
            raise OptionError(
                f"Option {name!r}: topic {topic!r} maps to {partitions!r}; expected a non-empty "
                f"list of partition numbers >= 0, {example}."
            )
        result[topic] = tuple(sorted(set(partitions)))
    return result


TOPICS: ValueType[tuple[str, ...]] = ValueType("comma-separated list", _topics)
PATTERN: ValueType[str] = ValueType("regular expression", _pattern)
ASSIGNMENT_JSON: ValueType[dict[str, tuple[int, ...]]] = ValueType("JSON", _assign)


def check_one_subscription(values: Mapping[str, Any]) -> None:
    given = [name for name in SUBSCRIPTION_OPTIONS if values[name] is not None]
    if len(given) != 1:
        what = "none was given" if not given else f"got {', '.join(repr(g) for g in given)}"
        raise OptionError(
            "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' is required; "
            f"{what}."
        )
