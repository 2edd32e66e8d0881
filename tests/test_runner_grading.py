"""The verdict logic (pure) and the threat model's promises (pure side)."""

import json

import pytest

from runner import grading as G
from runner.errors import InvalidRequest


def T(data, shape=None, dtype="float32", **kw):
    if shape is None:
        shape = [] if not isinstance(data, list) else [len(data)]
    return {
        "__tensor__": {
            "shape": shape,
            "dtype": dtype,
            "data": data,
            "requires_grad": False,
            "is_leaf": True,
            "grad_fn": None,
            "grad": None,
            **kw,
        }
    }


def report(nonce, **values):
    return json.dumps({"nonce": nonce, "values": values}).encode()


CH = G.ExerciseChecks(
    checks=(
        G.Check("grad", "x.grad", kind="close", expect=[6.0, 4.0]),
        G.Check("shape", "y", kind="shape", expect=[2, 3]),
        G.Check("rg", "x.requires_grad", kind="true"),
        G.Check("n", "n", kind="equal", expect=3),
    )
)


def test_all_pass():
    raw = report("N", grad=T([6.0, 4.0000001]), shape=T(None, shape=[2, 3]), rg=True, n=3)
    outcomes, passed = G.verify(CH, "ok", raw, "N")
    assert passed and all(o.passed for o in outcomes)
    assert [o.id for o in outcomes] == ["grad", "shape", "rg", "n"]


def test_one_fails_with_params():
    raw = report("N", grad=T([6.0, 5.0]), shape=T(None, shape=[2, 3]), rg=True, n=3)
    outcomes, passed = G.verify(CH, "ok", raw, "N")
    assert not passed
    bad = [o for o in outcomes if not o.passed]
    assert [o.id for o in bad] == ["grad"]
    assert bad[0].message_key == "checks.mismatch" and "got" in bad[0].params
    assert "expect" not in bad[0].params  # the answer is not handed out


@pytest.mark.parametrize("status", ["error", "timeout", "killed", "memory_limit", "output_limit"])
def test_not_ok_never_passes(status):
    raw = report("N", grad=T([6.0, 4.0]), shape=T(None, shape=[2, 3]), rg=True, n=3)
    outcomes, passed = G.verify(CH, status, raw, "N")
    assert not passed and not any(o.passed for o in outcomes)
    assert outcomes[0].message_key == "checks.not_run"


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        b"PASSED",
        b"garbage{",
        report("WRONG", grad=T([6.0, 4.0]), shape=T(None, shape=[2, 3]), rg=True, n=3),
        # two reports back to back (learner wrote one first)
        report("N", n=3) + report("N", n=3),
        json.dumps({"nonce": "N", "values": {}, "passed": True}).encode(),
        b"x" * (G.MAX_REPORT + 1),
    ],
)
def test_forged_missing_or_malformed_reports_fail(raw):
    outcomes, passed = G.verify(CH, "ok", raw, "N")
    assert not passed and not any(o.passed for o in outcomes)


def test_missing_value_fails():
    outcomes, passed = G.verify(CH, "ok", report("N", n=3), "N")
    assert not passed
    assert {o.id for o in outcomes if o.passed} == {"n"}


def test_error_and_object_values():
    c = G.Check("a", "f()", kind="close", expect=1.0)
    assert G.compare(c, {"__error__": "NameError"}, 1.0)[:2] == (False, "checks.error")
    assert G.compare(c, {"__object__": "MyTensor"}, 1.0)[:2] == (False, "checks.wrong_type")


def test_close_semantics():
    c = G.Check("a", "a", kind="close", expect=None, rtol=0, atol=1e-3)
    assert G.compare(c, 1.0005, 1.0)[0]
    assert not G.compare(c, 1.01, 1.0)[0]
    assert not G.compare(c, [1.0, 2.0], [1.0])[0]  # shape differs
    assert not G.compare(c, T([1.0, 2.0]), [[1.0, 2.0]])[0]  # [2] vs [1, 2]
    assert G.compare(c, float("nan"), float("nan"))[0]
    assert not G.compare(c, True, 1.0)[0]  # bool is not a number here


def test_equal_keeps_bools_apart():
    c = G.Check("a", "a", kind="equal", expect=1)
    assert not G.compare(c, True, 1)[0]
    assert G.compare(c, 1, 1)[0]
    assert G.compare(c, 1.0, 1)[0]


def test_dtype_and_true():
    assert G.compare(G.Check("d", "x", kind="dtype", expect="float64"), T(1.0, dtype="float64"), "float64")[0]
    assert not G.compare(G.Check("t", "x", kind="true"), 1, None)[0]
    assert G.compare(G.Check("t", "x", kind="true"), True, None)[0]


def test_reference_values_used_when_no_expect():
    ch = G.ExerciseChecks(checks=(G.Check("g", "x.grad"),), reference="x = 1")
    assert ch.needs_reference
    outcomes, passed = G.verify(ch, "ok", report("N", g=T([1.0])), "N", {"g": T([1.0])})
    assert passed
    outcomes, passed = G.verify(ch, "ok", report("N", g=T([1.0])), "N", None)
    assert not passed and outcomes[0].message_key == "checks.no_reference"


def test_validation():
    with pytest.raises(InvalidRequest):
        G.ExerciseChecks(checks=())
    with pytest.raises(InvalidRequest):
        G.ExerciseChecks(checks=(G.Check("a", "x", expect=1), G.Check("a", "y", expect=1)))
    with pytest.raises(InvalidRequest):
        G.ExerciseChecks(checks=(G.Check("a", "x"),))  # no expect, no reference
    with pytest.raises(InvalidRequest):
        G.Check("a", "x", kind="bogus")


def test_job_spec_hides_expectations():
    spec = G.job_spec(CH, "N")
    assert spec == {"nonce": "N", "exprs": {"grad": "x.grad", "shape": "y", "rg": "x.requires_grad", "n": "n"}}
    assert "6.0" not in json.dumps(spec)


def test_round_trip_dict():
    assert G.ExerciseChecks.from_dict(json.loads(json.dumps(CH.to_dict()))) == CH


def test_nonces_are_unique():
    assert len({G.new_nonce() for _ in range(100)}) == 100


def _t(data, dtype="float32", **extra):
    return {
        "__tensor__": {
            "shape": [],
            "dtype": dtype,
            "requires_grad": False,
            "is_leaf": True,
            "grad_fn": None,
            "data": data,
            "grad": None,
            **extra,
        }
    }


@pytest.mark.parametrize(
    "value, shown",
    [
        (_t(8.0), "tensor(8.)"),
        (_t(-4.0), "tensor(-4.)"),
        (_t([4.0, 8.0]), "tensor([4., 8.])"),
        (_t([0.5, 1.25]), "tensor([0.5000, 1.2500])"),
        (_t([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.], [3., 4.]])"),
        (_t(2.0, requires_grad=True), "tensor(2., requires_grad=True)"),
        (_t(6.0, requires_grad=True, is_leaf=False, grad_fn="MulBackward0"), "tensor(6., grad_fn=<MulBackward0>)"),
        (_t([1, 2], dtype="int64"), "tensor([1, 2])"),
        (_t(3, dtype="int32"), "tensor(3, dtype=torch.int32)"),
        (_t(1.5, dtype="float64"), "tensor(1.5000, dtype=torch.float64)"),
        (_t(float("nan")), "tensor(nan)"),
        (_t(None, shape=[200, 200]), "tensor(size=[200, 200])"),
        ([4.0, 8.0], "[4.0, 8.0]"),
    ],
)
def test_a_mismatch_shows_what_the_learner_got_as_torch_prints_it(value, shown):
    check = G.Check(id="c", expr="x", kind="equal", expect=123)
    passed, _, params = G.compare(check, value, 123)
    assert not passed and params["got"] == shown
