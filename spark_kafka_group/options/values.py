"""Option value types and checks, shared by the option specs.

A :class:`ValueType` turns an option's text into its value; a check refuses a parsed value.
Both raise :class:`~spark_kafka_group.errors.OptionError` naming the option, the value as the
user gave it, and what to give instead.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from spark_kafka_group.errors import OptionError

T = TypeVar("T")

#: ``(option name, text as given, parsed value)``: raises OptionError when the value is refused.
Check = Callable[[str, str, Any], None]


@dataclass(frozen=True)
class ValueType(Generic[T]):
    """How an option's text becomes its value; ``name`` is the type as the reference shows it."""

    name: str
    parse: Callable[[str, str], T]  # (option name, text) -> value


def _bool(name: str, text: str) -> bool:
    word = text.strip().lower()
    if word in ("true", "false"):
        return word == "true"
    raise OptionError(f"Option {name!r} = {text!r} must be 'true' or 'false'.")


def _int(name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise OptionError(f"Option {name!r} = {text!r} is not a whole number.") from None


def _stripped(name: str, text: str) -> str:
    return text.strip()


_DURATION_UNITS_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _scaled(name: str, text: str, units: dict[str, int], default: str, refusal: str) -> int:
    """A whole number with an optional unit of ``units`` (``default`` when none), as Spark's
    time and size strings; ``refusal`` ends the error for any other text."""
    alternatives = "|".join(sorted(units, key=len, reverse=True))
    match = re.fullmatch(rf"\s*(\d+)\s*({alternatives})?\s*", text.lower())
    if not match:
        raise OptionError(f"Option {name!r} = {text!r} {refusal}")
    return int(match.group(1)) * units[match.group(2) or default]


def _duration_ms(name: str, text: str) -> int:
    """Spark's time strings: ``500ms``, ``30s``, ``15m``, ``1h``, ``2d``; a bare number is ms."""
    return _scaled(
        name,
        text,
        _DURATION_UNITS_MS,
        "ms",
        "is not a duration: use a number with a unit such as '500ms', '30s', '15m', '1h' or "
        "'2d' (a bare number is milliseconds).",
    )


_SIZE_UNITS = {
    unit + suffix: 1 << (10 * power)
    for power, unit in enumerate("bkmgt")
    for suffix in ("", "b")
    if unit + suffix != "bb"
}


def _bytes(name: str, text: str) -> int:
    """Spark's size strings: ``512k``, ``64m``, ``1g`` (also ``kb``, ``mb``, ``gb``; powers of
    1024, as Spark's ``byteStringAsBytes``); a bare number is bytes."""
    return _scaled(
        name,
        text,
        _SIZE_UNITS,
        "b",
        "is not a size: use a number of bytes, or a number with a unit such as '512k', '64m' "
        "or '1g'.",
    )


def duration_text(ms: int) -> str:
    """``ms`` in the largest unit that divides it: the inverse of the ``duration`` type."""
    for unit in ("d", "h", "m", "s"):
        if ms and ms % _DURATION_UNITS_MS[unit] == 0:
            return f"{ms // _DURATION_UNITS_MS[unit]}{unit}"
    return f"{ms}ms"


BOOLEAN: ValueType[bool] = ValueType("boolean", _bool)
INTEGER: ValueType[int] = ValueType("integer", _int)
MILLISECONDS: ValueType[int] = ValueType("integer (ms)", _int)
EPOCH_MS: ValueType[int] = ValueType("timestamp (epoch ms)", _int)
STRING: ValueType[str] = ValueType("string", _stripped)
DURATION: ValueType[int] = ValueType("duration", _duration_ms)
BYTES: ValueType[int] = ValueType("size (bytes)", _bytes)


def choice(words: tuple[str, ...], fix: str) -> ValueType[str]:
    """One of ``words`` (any case); ``fix`` says what each means."""

    def parse(name: str, text: str) -> str:
        word = text.strip().lower()
        if word not in words:
            raise OptionError(f"Option {name!r} = {word!r} is not valid: use {fix}.")
        return word

    return ValueType(" / ".join(f"`{w}`" for w in words), parse)


def positive(name: str, text: str, value: int) -> None:
    if value <= 0:
        raise OptionError(f"Option {name!r} = {text!r} must be a positive number.")


def non_negative(name: str, text: str, value: int) -> None:
    if value < 0:
        raise OptionError(f"Option {name!r} = {text!r} must be 0 or more.")


def within(low: int, high: int, why: str) -> Check:
    """``low <= value <= high`` (milliseconds); ``why`` names where the bounds come from."""

    def check(name: str, text: str, value: int) -> None:
        if not low <= value <= high:
            raise OptionError(
                f"Option {name!r} = {text!r} is outside the range a group accepts: use "
                f"{low} to {high} ms ({why})."
            )

    return check


def not_empty(fix: str) -> Check:
    def check(name: str, text: str, value: str) -> None:
        if not value:
            raise OptionError(f"Option {name!r} is empty: {fix}.")

    return check


def suggestion(value: str, choices: tuple[str, ...]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""
