import pytest

from runner.result import CheckOutcome, MessageKey, RunResult, Status


def sample(**kw):
    base = {
        "status": "ok",
        "stdout": "a",
        "stderr": "",
        "exit_code": 0,
        "signal": None,
        "duration_ms": 1.5,
        "truncated": False,
    }
    base.update(kw)
    return RunResult(**base)


def test_public_dict_has_exactly_the_cli_fields():
    assert list(sample().public_dict()) == [
        "status",
        "stdout",
        "stderr",
        "exit_code",
        "signal",
        "duration_ms",
        "truncated",
    ]


def test_round_trip_with_checks():
    r = sample(checks=[CheckOutcome("a", True, "checks.passed", {"expr": "x"})], passed=True)
    back = RunResult.from_dict(r.to_dict())
    assert back == r
    assert back.graded and back.passed and back.ok


def test_unknown_status_rejected():
    with pytest.raises(ValueError):
        sample(status="weird")


def test_statuses():
    assert set(Status) == {"ok", "error", "timeout", "cpu_limit", "memory_limit", "output_limit", "killed"}


def test_status_and_message_keys_read_back_as_their_enums_and_travel_as_plain_strings():
    r = sample(status="timeout", checks=[CheckOutcome("a", False, "checks.not_run", {"status": "timeout"})])
    wire = r.to_dict()
    assert wire["status"] == "timeout" and type(wire["status"]) is Status  # json.dumps writes "timeout"
    back = RunResult.from_dict({**wire, "status": "timeout"})
    assert back.status is Status.TIMEOUT and back.checks[0].message_key is MessageKey.NOT_RUN
    # A check's own key (not one of the runner's) stays the string it is.
    assert CheckOutcome("a", False, "lesson.own_key").message_key == "lesson.own_key"


def test_outcome_params_are_read_only():
    o = CheckOutcome("a", False, "k", {"x": 1})
    with pytest.raises(TypeError):
        o.params["x"] = 2
