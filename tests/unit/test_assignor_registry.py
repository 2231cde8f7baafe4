"""The built-in assignors are found in their own files: adding one is adding a file."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import spark_kafka_group.group.assignors as assignors_package
from spark_kafka_group.group.assignors import (
    AssignorLookupError,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    builtin_assignors,
    load_assignor,
)

NEW_ASSIGNOR = """
from spark_kafka_group.group.assignors.abstract import Assignor


class ReverseAssignor(Assignor):
    name = "reverse-for-test"

    def assign(self, partitions_per_topic, subscriptions):
        return {m: [] for m in subscriptions}
"""


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    builtin_assignors.cache_clear()
    yield
    sys.modules.pop("spark_kafka_group.group.assignors.reverse_for_test", None)
    builtin_assignors.cache_clear()


def test_the_built_ins_are_the_assignors_defined_in_the_package() -> None:
    found = builtin_assignors()
    assert found == {
        "cooperative-sticky": CooperativeStickyAssignor(),
        "range": RangeAssignor(),
        "roundrobin": RoundRobinAssignor(),
        "sticky": StickyAssignor(),
    }
    assert found["cooperative-sticky"].rebalance_protocol is RebalanceProtocol.COOPERATIVE
    assert {a.rebalance_protocol for n, a in found.items() if n != "cooperative-sticky"} == {
        RebalanceProtocol.EAGER
    }


def test_a_new_file_in_the_package_is_a_new_built_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    # The package directory is the source tree; a second directory on its __path__ stands in
    # for adding the file there.
    (tmp_path / "reverse_for_test.py").write_text(NEW_ASSIGNOR)
    monkeypatch.setattr(assignors_package, "__path__", [*assignors_package.__path__, str(tmp_path)])
    assert "reverse-for-test" in builtin_assignors()
    assert load_assignor("Reverse-For-Test").name == "reverse-for-test"


def test_an_assignor_pickles_by_its_entry_and_unpickling_explains_a_missing_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settings travel pickled to the streaming-source process: there, an assignor whose module
    cannot be imported fails with what to do, not a bare ModuleNotFoundError."""
    (tmp_path / "users_assignors.py").write_text(NEW_ASSIGNOR.replace("reverse-for-test", "mine"))
    monkeypatch.syspath_prepend(str(tmp_path))
    mine = load_assignor("users_assignors:ReverseAssignor")
    data = pickle.dumps((mine, RangeAssignor()))
    assert pickle.loads(data) == (mine, RangeAssignor())
    monkeypatch.delitem(sys.modules, "users_assignors")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    with pytest.raises(
        AssignorLookupError, match=r"cannot import module 'users_assignors'.*PYTHONPATH"
    ):
        pickle.loads(data)
