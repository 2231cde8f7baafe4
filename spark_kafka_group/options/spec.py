"""One option as declared: its name, type, default, checks and documentation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_kafka_group.errors import OptionError
from spark_kafka_group.options.values import Check, ValueType


@dataclass(frozen=True)
class OptionSpec:
    """One option as users see it. Parsing an option is :meth:`value`; ``docs/options.md`` is
    generated from these (:mod:`spark_kafka_group.options.docs`), so ``doc`` is the option's
    user documentation, in Markdown: a one-sentence summary, then optionally a blank line and
    the details."""

    name: str  # documented spelling
    type: ValueType[Any]
    default: str | None
    doc: str
    #: Run in order on the parsed value, each refusing it with an OptionError.
    checks: tuple[Check, ...] = ()
    #: When given, the option is required and this completes "Option 'x' is required...".
    required: str | None = None
    #: The value when the option is neither given nor has a literal default (a computed one).
    fallback: Callable[[], Any] | None = None
    #: The attribute of ``SourceOptions`` or ``GroupSettings`` that takes the value as is;
    #: ``None`` when a rule combines it with other options.
    field: str | None = None
    #: The default as the reference shows it, where ``default`` is not a literal value
    #: (computed, required, or applying only to some reads).
    default_doc: str | None = None

    def value(self, text: str | None) -> Any:
        """The option's value from its text as given (``None``: not given). A blank text counts
        as not given once the checks accepted it."""
        if text is None:
            text = self.default
        if text is None:
            return self._missing()
        value = self.type.parse(self.name, text)
        for check in self.checks:
            check(self.name, text, value)
        return self._missing() if value == "" else value

    def default_value(self) -> Any:
        return self.value(None)

    def _missing(self) -> Any:
        if self.required is not None:
            raise OptionError(f"Option {self.name!r} is required{self.required}")
        return self.fallback() if self.fallback is not None else None
