"""The Hypothesis profiles of tests/conftest.py: CI's has no deadline and repeats its examples."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def test_the_ci_profile_has_no_deadline_and_fixed_examples() -> None:
    ci = settings.get_profile("ci")
    assert ci.deadline is None
    assert ci.derandomize
    assert HealthCheck.too_slow in ci.suppress_health_check


def test_the_profile_named_by_the_environment_is_the_one_loaded() -> None:
    wanted = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
    current = settings.default
    assert current is not None
    assert current.deadline == wanted.deadline
    assert current.derandomize == wanted.derandomize
