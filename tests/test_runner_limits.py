import dataclasses

import pytest

from runner.errors import InvalidRequest
from runner.limits import DEFAULT, MAXIMUM, Limits


def test_defaults_are_positive_and_below_maximum():
    for f in dataclasses.fields(Limits):
        assert 0 < getattr(DEFAULT, f.name) <= getattr(MAXIMUM, f.name)


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.cpu_time_s = 99


def test_from_dict_overrides_and_clamps():
    lim = Limits.from_dict({"cpu_time_s": 2, "memory_bytes": 10**15})
    assert lim.cpu_time_s == 2
    assert lim.memory_bytes == MAXIMUM.memory_bytes
    assert lim.wall_time_s == DEFAULT.wall_time_s


def test_from_dict_none_is_base():
    base = Limits(cpu_time_s=1.0)
    assert Limits.from_dict(None, base) is base


@pytest.mark.parametrize(
    "bad", [{"nope": 1}, {"cpu_time_s": 0}, {"cpu_time_s": -1}, {"max_processes": True}, {"memory_bytes": "1"}]
)
def test_bad_limits_rejected(bad):
    with pytest.raises(InvalidRequest):
        Limits.from_dict(bad)


def test_round_trip():
    assert Limits(**DEFAULT.to_dict()) == DEFAULT
