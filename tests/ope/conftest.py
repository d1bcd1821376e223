"""Shared set-up of the certkit.ope tests: the reference simulator and policies."""

import pytest

from certkit.ope import LinearThresholdPolicy, StrategicSimulator


@pytest.fixture(scope="session")
def sim():
    return StrategicSimulator()


@pytest.fixture(scope="session")
def pi0():
    return LinearThresholdPolicy([1.0, 1.0], 1.0, temperature=1.0)


@pytest.fixture(scope="session")
def pi():
    return LinearThresholdPolicy([1.0, 0.0], 1.0, temperature=0.25)
