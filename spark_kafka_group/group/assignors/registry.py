"""Where assignors come from: the built-ins found in this package, and ``module:Class``.

A built-in assignor is any concrete :class:`Assignor` subclass defined in a module of this
package: adding one is adding its file (its ``name`` is the protocol name members send). A
user's assignor is named ``module:Class`` (as Kafka's ``partition.assignment.strategy`` takes
class names): the class must subclass :class:`Assignor`, take no constructor arguments and
declare a ``name`` of its own.

Assignors travel pickled (in the settings, to the query's streaming-source process) by their
entry: unpickling goes through :func:`load_assignor`, so a process that cannot import a user's
assignor fails with what to install where, not a bare ``ModuleNotFoundError``. Every class this
module hands out is registered for that with :mod:`copyreg`.
"""

from __future__ import annotations

import copyreg
import difflib
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import TypeGuard

from spark_kafka_group.errors import AssignorLookupError
from spark_kafka_group.group.assignors.abstract import Assignor, RebalanceProtocol
from spark_kafka_group.user_class import resolve_class

_EXAMPLE = "my_pkg.assignors:RackAwareAssignor"


def _package_modules() -> list[ModuleType]:
    package = importlib.import_module(__package__ or "spark_kafka_group.group.assignors")
    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    ]


@cache
def builtin_assignors() -> dict[str, Assignor]:
    """The built-in assignors by protocol name, in name order."""
    found: dict[str, Assignor] = {}
    for module in _package_modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or not _is_assignor_class(cls):
                continue
            name = _declared_name(cls)
            if name in found:
                raise RuntimeError(f"two built-in assignors are named {name!r}")
            found[name] = _travels_by_entry(cls)()
    return dict(sorted(found.items()))


def load_assignor(entry: str) -> Assignor:
    """The assignor an ``assignmentStrategy`` entry names: a built-in name (any case) or
    ``module:Class``. Raises :class:`AssignorLookupError`."""
    builtins = builtin_assignors()
    entry = entry.strip()
    if ":" not in entry:
        found = builtins.get(entry.lower())
        if found is not None:
            return found
        close = difflib.get_close_matches(entry.lower(), list(builtins), n=1, cutoff=0.5)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise AssignorLookupError(
            f"{entry!r} is not a built-in assignor ({', '.join(builtins)}){hint}; a user's "
            "assignor is named 'module:Class', e.g. 'my_pkg.assignors:RackAwareAssignor'."
        )
    target = resolve_class(
        entry, subject=f"assignor {entry!r}", example=_EXAMPLE, error=AssignorLookupError
    )
    if not _is_assignor_class(target):
        raise AssignorLookupError(
            f"{entry!r} is not an assignor: it must be a concrete subclass of "
            "spark_kafka_group.group.assignors.Assignor (a class-level 'name' and an "
            "'assign(partitions_per_topic, subscriptions)' method)."
        )
    name = _declared_name(target)
    if not name or name != name.strip() or "," in name or ":" in name:
        raise AssignorLookupError(
            f"{entry!r} declares name = {name!r}: give the class a protocol name of its own "
            "(no spaces at the ends, no ',' or ':'), e.g. name = 'rack-aware'."
        )
    if name in builtins and type(builtins[name]) is target:
        return builtins[name]  # a built-in named by its class
    if name in builtins:
        raise AssignorLookupError(
            f"{entry!r} declares name = {name!r}, the built-in assignor's name: members would "
            "take one for the other. Give the class a protocol name of its own."
        )
    if not isinstance(target.rebalance_protocol, RebalanceProtocol):
        raise AssignorLookupError(
            f"{entry!r} declares rebalance_protocol = {target.rebalance_protocol!r}: use "
            "RebalanceProtocol.EAGER or RebalanceProtocol.COOPERATIVE."
        )
    try:
        return _travels_by_entry(target)()
    except Exception as exc:
        raise AssignorLookupError(
            f"cannot create {entry!r} ({type(exc).__name__}: {exc}): the class must take no "
            "constructor arguments."
        ) from None


def assignor_entry(assignor: Assignor) -> str:
    """The ``assignmentStrategy`` entry that names ``assignor``: :func:`load_assignor`'s
    inverse."""
    builtin = builtin_assignors().get(assignor.name)
    if builtin is not None and type(builtin) is type(assignor):
        return assignor.name
    cls = type(assignor)
    return f"{cls.__module__}:{cls.__qualname__}"


def _reduce(assignor: Assignor) -> tuple[Callable[[str], Assignor], tuple[str]]:
    return load_assignor, (assignor_entry(assignor),)


def _travels_by_entry(cls: type[Assignor]) -> type[Assignor]:
    copyreg.pickle(cls, _reduce)
    return cls


def _is_assignor_class(cls: object) -> TypeGuard[type[Assignor]]:
    return isinstance(cls, type) and issubclass(cls, Assignor) and not inspect.isabstract(cls)


def _declared_name(cls: type) -> str:
    name = getattr(cls, "name", None)
    return name if isinstance(name, str) else ""
