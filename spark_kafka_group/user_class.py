"""A user's class named ``module:Class`` (an assignor, a rebalance listener): one rule for the
name's form and one resolver (the standard library's :func:`pkgutil.resolve_name`), with errors
that name the thing, the value and the fix."""

from __future__ import annotations

import pkgutil
import re
import sys

from spark_kafka_group.errors import OptionError

#: A dotted module path, a colon, a (dotted) class name.
_CLASS_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

#: Where a user's module must be importable: the query's streaming source runs the assignor and
#: the listener, on the driver, in a Python process of Spark's.
IMPORTABLE_WHERE = (
    "The module must be importable by the Python that runs each query's streaming source on its "
    "driver (PYSPARK_PYTHON): install it in that environment or put its directory on the "
    "driver's PYTHONPATH before Spark starts, for every query of the group."
)


def check_class_spec(
    spec: str, *, subject: str, example: str, error: type[Exception] = OptionError
) -> str:
    """``spec`` stripped, if it has the form ``module:Class``; else ``error`` saying what
    ``subject``, the option and its value as the message should name them (e.g.
    ``"Option 'rebalanceListener' = 'x'"``), must look like."""
    stripped = spec.strip()
    if not _CLASS_SPEC.match(stripped):
        raise error(
            f"{subject} is not 'module:Class' (a dotted module path, a colon, a class name), "
            f"e.g. {example!r}."
        )
    return stripped


def resolve_class(
    spec: str, *, subject: str, example: str, error: type[Exception] = OptionError
) -> type:
    """The class ``spec`` (``module:Class``) names, imported. Raises ``error``, its message
    starting with ``subject`` (as for :func:`check_class_spec`), when the form is wrong, the
    module cannot be imported, it has no such attribute, or the attribute is not a class."""
    spec = check_class_spec(spec, subject=subject, example=example, error=error)
    module_name, _, class_name = spec.partition(":")
    try:
        target = pkgutil.resolve_name(spec)
    except Exception as exc:  # an import runs user code: any error is the user's to fix
        if module_name not in sys.modules:  # a failed import leaves no module behind
            raise error(
                f"{subject}: cannot import module {module_name!r} "
                f"({type(exc).__name__}: {exc}). {IMPORTABLE_WHERE}"
            ) from None
        raise error(
            f"{subject}: module {module_name!r} has no {class_name!r}: name a class defined in it."
        ) from None
    if not isinstance(target, type):
        raise error(
            f"{subject} names a {type(target).__name__}, not a class: name a class defined in "
            f"{module_name!r}, e.g. {example!r}."
        )
    return target
