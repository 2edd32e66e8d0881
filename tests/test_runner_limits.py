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


NOT_NUMBERS = [float("nan"), float("inf"), float("-inf"), "5", None, [1], {"a": 1}, True, False]


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Limits)])
@pytest.mark.parametrize("bad", NOT_NUMBERS, ids=repr)
def test_every_limit_refuses_what_is_not_a_finite_number(field, bad):
    with pytest.raises(InvalidRequest, match=field):
        Limits.from_dict({field: bad})
    with pytest.raises(InvalidRequest, match=field):
        Limits(**{field: bad})


@pytest.mark.parametrize("field", ["memory_bytes", "max_processes", "output_bytes", "tmpfs_bytes", "open_files"])
def test_counts_and_sizes_are_whole_numbers(field):
    with pytest.raises(InvalidRequest, match="whole number"):
        Limits.from_dict({field: 100.5})
    # JSON may carry a whole number as 1e6: it is taken as the integer it is.
    value = getattr(Limits.from_dict({field: 100.0}), field)
    assert value == 100 and type(value) is int


def test_limits_beyond_the_maximum_are_clamped_not_refused():
    assert Limits.from_dict({"output_bytes": 10**30}).output_bytes == MAXIMUM.output_bytes
