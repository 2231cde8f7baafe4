"""``module:Class`` names (assignors, the rebalance listener) resolve through one function, and
every way a name can be wrong gets a message naming the option, the value and the fix."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group.assignors import AssignorLookupError, load_assignor
from spark_kafka_group.member.listener import RebalanceListenerRunner
from spark_kafka_group.options import parse_options
from spark_kafka_group.user_class import resolve_class

USERS_MODULE = """
from spark_kafka_group.group.assignors import Assignor


class AuditListener:
    def __init__(self):
        self.assigned = []

    def on_partitions_assigned(self, partitions):
        self.assigned.append(partitions)


class NeedsArguments:
    def __init__(self, where):
        self.where = where


def not_a_class():
    return None


class Outer:
    class Inner:
        pass


class MineAssignor(Assignor):
    name = "mine-for-test"

    def assign(self, partitions_per_topic, subscriptions):
        return {m: [] for m in subscriptions}
"""

BROKEN_MODULE = "raise RuntimeError('the module itself fails')\n"


@pytest.fixture
def users_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / "users_classes_for_test.py").write_text(USERS_MODULE)
    (tmp_path / "users_broken_for_test.py").write_text(BROKEN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("users_classes_for_test", "users_broken_for_test"):
        monkeypatch.delitem(sys.modules, name, raising=False)


def resolve(spec: str) -> type:
    return resolve_class(spec, subject=f"Option 'x' = {spec!r}", example="my_pkg.mod:Thing")


def test_a_class_and_a_nested_class_resolve(users_modules: None) -> None:
    assert resolve("users_classes_for_test:AuditListener").__name__ == "AuditListener"
    assert resolve(" users_classes_for_test:Outer.Inner ").__qualname__ == "Outer.Inner"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_for_test:Thing", r"cannot import module 'no_such_module_for_test'"),
        ("users_broken_for_test:Thing", r"cannot import module 'users_broken_for_test'.*fails"),
        ("users_classes_for_test:Missing", r"module 'users_classes_for_test' has no 'Missing'"),
        ("users_classes_for_test:not_a_class", r"names a function, not a class"),
        ("users_classes_for_test", r"is not 'module:Class'"),
        ("a b:C", r"is not 'module:Class'"),
    ],
)
def test_each_wrong_name_says_what_and_how_to_fix(
    users_modules: None, spec: str, says: str
) -> None:
    with pytest.raises(OptionError, match=says) as info:
        resolve(spec)
    message = str(info.value)
    assert message.startswith(f"Option 'x' = {spec!r}")  # the option and the value
    if "cannot import" in says:
        assert "PYTHONPATH" in message  # the fix
    else:
        assert "name a class" in message or "e.g. 'my_pkg.mod:Thing'" in message


def test_the_listener_goes_through_the_resolver(users_modules: None) -> None:
    runner = RebalanceListenerRunner.load("users_classes_for_test:AuditListener")
    runner.assigned([])
    with pytest.raises(OptionError, match=r"^Option 'rebalanceListener' = .*has no 'Nope'"):
        RebalanceListenerRunner.load("users_classes_for_test:Nope")
    with pytest.raises(OptionError, match=r"^Option 'rebalanceListener' = .*not a class"):
        RebalanceListenerRunner.load("users_classes_for_test:not_a_class")
    with pytest.raises(OptionError, match=r"cannot create the listener.*no constructor arguments"):
        RebalanceListenerRunner.load("users_classes_for_test:NeedsArguments")


def test_the_assignors_go_through_the_resolver(users_modules: None) -> None:
    assert load_assignor("users_classes_for_test:MineAssignor").name == "mine-for-test"
    with pytest.raises(AssignorLookupError, match=r"has no 'Nope'"):
        load_assignor("users_classes_for_test:Nope")
    with pytest.raises(AssignorLookupError, match=r"not a class"):
        load_assignor("users_classes_for_test:not_a_class")
    with pytest.raises(AssignorLookupError, match=r"is not an assignor"):
        load_assignor("users_classes_for_test:AuditListener")


def test_the_option_checks_the_listener_form_with_the_same_rule() -> None:
    base = {
        "kafka.bootstrap.servers": "b:9092",
        "subscribe": "t",
        "groupId": "g",
        "groupStore": "/s",
    }
    with pytest.raises(OptionError, match=r"Option 'rebalanceListener' = 'a b:C' is not"):
        parse_options({**base, "rebalanceListener": "a b:C"})
    parsed = parse_options({**base, "rebalanceListener": " pkg.mod:Cls "})
    assert parsed.group.rebalance_listener == "pkg.mod:Cls"
