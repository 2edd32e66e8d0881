"""The verdict logic (pure): check expressions, the tagged report, the hostile parser, comparisons and the facts
a failed check carries.  Extraction inside the sandbox is proved in test_grading_forgeries.py."""

import json
import re

import pytest

from runner import grading as G
from runner.errors import InvalidRequest


def T(data, shape=None, dtype="float32", grad=None, **kw):
    """A tensor as extraction tags it."""
    if shape is None:
        shape = [] if not isinstance(data, list) else [len(data)]
    fields = {
        "shape": shape,
        "dtype": dtype,
        "data": data,
        "requires_grad": False,
        "is_leaf": True,
        "grad_fn": None,
        "grad": grad,
        **kw,
    }
    return ["tensor", fields]


def f(x):
    return ["float", float(x)]


def L(*items):
    return ["list", list(items)]


def report(nonce, **values):
    return json.dumps({"v": 2, "nonce": nonce, "values": values}).encode()


CH = G.ExerciseChecks(
    checks=(
        G.Check("grad", "x.grad", kind="close", expect=[6.0, 4.0]),
        G.Check("shape", "y", kind="shape", expect=[2, 3]),
        G.Check("rg", "x.requires_grad", kind="true"),
        G.Check("n", "n", kind="equal", expect=3),
    )
)
GOOD = {"grad": T([6.0, 4.0000001]), "shape": T(None, shape=[2, 3]), "rg": ["bool", True], "n": ["int", 3]}


def test_all_pass():
    outcomes, passed = G.verify(CH, "ok", report("N", **GOOD), "N")
    assert passed and all(o.passed for o in outcomes)
    assert [o.id for o in outcomes] == ["grad", "shape", "rg", "n"]


def test_one_fails_with_what_was_got_and_expected():
    outcomes, passed = G.verify(CH, "ok", report("N", **{**GOOD, "grad": T([6.0, 5.0])}), "N")
    assert not passed
    bad = [o for o in outcomes if not o.passed]
    assert [o.id for o in bad] == ["grad"]
    assert bad[0].message_key == "checks.mismatch"
    assert bad[0].params["got"] == "tensor([6., 5.])" and bad[0].params["expected"] == "[6.0, 4.0]"


@pytest.mark.parametrize("status", ["error", "timeout", "killed", "memory_limit", "output_limit"])
def test_a_job_that_did_not_end_ok_never_passes(status):
    outcomes, passed = G.verify(CH, status, report("N", **GOOD), "N")
    assert not passed and not any(o.passed for o in outcomes)
    assert {o.message_key for o in outcomes} == {"checks.not_run"}


@pytest.mark.parametrize(
    "raw, reason",
    [
        (None, "missing"),
        (b"", "missing"),
        (b"PASSED", "malformed"),
        (b"garbage{", "malformed"),
        (report("WRONG", **GOOD), "malformed"),
        (report("N", **GOOD) + report("N", **GOOD), "malformed"),  # the learner wrote one first
        (json.dumps({"v": 2, "nonce": "N", "values": {}, "passed": True}).encode(), "malformed"),
        (json.dumps({"nonce": "N", "values": {"n": 3}}).encode(), "malformed"),  # the old, untagged format
        (b"x" * (G.MAX_REPORT + 1), "too_large"),
        (b'{"v": 2, "refused": "threads"}', "threads"),
        (b'{"v": 2, "refused": "hooks"}', "hooks"),
        (b'{"v": 2, "refused": "<b>boo</b>"}', "malformed"),
        (b"\xff\xfe", "malformed"),
    ],
)
def test_a_forged_missing_or_malformed_report_fails_every_check_with_its_reason(raw, reason):
    outcomes, passed = G.verify(CH, "ok", raw, "N")
    assert not passed and not any(o.passed for o in outcomes)
    assert {(o.message_key, o.params["reason"]) for o in outcomes} == {("checks.no_report", reason)}


# Values the learner's code can put in a report (it can read the nonce and write one itself): none may crash
# the verdict, every one is a failed attempt.
HOSTILE = {
    "a 400-digit int": ["int", 10**400],
    "a 400-digit int in a tensor": T([10**400, 1.0]),
    "a tensor without its fields": ["tensor", {"shape": [2]}],
    "a tensor whose data is not its shape": T([1.0, 2.0, 3.0], shape=[2]),
    "a tensor of strings": T(["a", "b"]),
    "a tensor of 10**12 elements": T([1.0], shape=[10**6, 10**6]),
    "a tensor with a negative size": T([], shape=[-1]),
    "a tensor whose grad is a list": T(1.0, grad=["list", []]),
    "a tensor whose grad's grad is a tensor": T(1.0, grad=T(1.0, grad=T(1.0))),
    "a dtype that is markup": T(1.0, dtype="<b>"),
    "an unknown tag": ["eval", "1"],
    "a tag with extra fields": ["int", 1, 2],
    "a bool that is an int": ["bool", 1],
    "a float that is a string": ["float", "6.0"],
    "a string longer than extraction makes": ["str", "x" * (G.MAX_STR + 1)],
    "a list longer than extraction makes": ["list", [["int", 1]] * (G.MAX_ITEMS + 1)],
    "a dict with a non-string key": ["dict", [[1, ["int", 1]]]],
    "an error name of 2,000 characters": ["error", "E" * 2000],
    "an error name that is markup": ["error", "<b>x</b>"],
    "an untagged number": 6.0,
    "a nested list 100 deep": json.loads("[" * 100 + "]" * 100),
}


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_value_is_a_failed_attempt_never_a_crash(value):
    outcomes, passed = G.verify(CH, "ok", report("N", **{**GOOD, "grad": value}), "N")
    assert not passed
    assert {o.message_key for o in outcomes if not o.passed} == {"checks.no_report"}


def test_a_report_nested_deeper_than_any_parser_recursion_is_malformed():
    deep = b'{"v": 2, "nonce": "N", "values": {"n": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}"
    outcomes, passed = G.verify(CH, "ok", deep[: G.MAX_REPORT], "N")
    assert not passed and outcomes[0].params["reason"] == "malformed"
    outcomes, passed = G.verify(CH, "ok", deep, "N")
    assert not passed and outcomes[0].params["reason"] == "too_large"


def test_a_learner_dict_shaped_like_a_tensor_is_a_dict():
    spoof = {"shape": [2], "dtype": "float32", "data": [6.0, 4.0], "requires_grad": False}
    for shaped in (["dict", [["__tensor__", ["dict", [[k, ["str", str(v)]] for k, v in spoof.items()]]]]],):
        outcomes, passed = G.verify(CH, "ok", report("N", **{**GOOD, "grad": shaped}), "N")
        assert not passed and outcomes[0].message_key == "checks.mismatch"
    parsed = G.parse_value(["dict", [["__error__", ["str", "x" * G.MAX_STR]]]])
    assert parsed == {"__error__": "x" * G.MAX_STR} and not isinstance(parsed, G.Failed)


def test_an_expression_that_raised_names_its_error():
    c = G.Check("a", "f", kind="close", expect=1.0)
    assert G.compare(c, G.Failed("NameError"), 1.0) == (False, "checks.error", {"expr": "f", "error": "NameError"})
    assert G.compare(c, G.Opaque("MyTensor"), 1.0)[:2] == (False, "checks.wrong_type")


def test_close_semantics():
    c = G.Check("a", "a", kind="close", expect=None, rtol=0, atol=1e-3)
    assert G.compare(c, 1.0005, 1.0)[0]
    assert not G.compare(c, 1.01, 1.0)[0]
    assert not G.compare(c, [1.0, 2.0], [1.0])[0]  # shape differs
    assert not G.compare(c, G.parse_value(T([1.0, 2.0])), [[1.0, 2.0]])[0]  # [2] vs [1, 2]
    assert G.compare(c, float("nan"), float("nan"))[0]
    assert not G.compare(c, True, 1.0)[0]  # bool is not a number here


def test_equal_keeps_bools_apart():
    c = G.Check("a", "a", kind="equal", expect=1)
    assert not G.compare(c, True, 1)[0]
    assert G.compare(c, 1, 1)[0]
    assert G.compare(c, 1.0, 1)[0]


def test_dtype_shape_and_true():
    t64 = G.parse_value(T(1.0, dtype="float64"))
    assert G.compare(G.Check("d", "x", kind="dtype", expect="float64"), t64, "float64")[0]
    assert G.compare(G.Check("s", "x", kind="shape", expect=[]), t64, [])[0]
    true = G.Check("t", "x", kind="true")
    assert not G.compare(true, 1, None)[0]
    assert G.compare(true, True, None)[0]
    assert G.compare(true, G.parse_value(T(True, dtype="bool")), None)[0]
    assert not G.compare(true, G.parse_value(T([True], dtype="bool")), None)[0]  # not a 0-d tensor


REF = G.ExerciseChecks(checks=(G.Check("g", "x.grad"), G.Check("y", "y")), reference="x = 1")


def test_a_check_without_expect_compares_with_the_reference_solutions_value():
    assert REF.needs_reference and all(c.from_reference for c in REF.checks)
    ref = {"g": G.parse_value(T([1.0, 2.0])), "y": [0.5, 0.25]}
    outcomes, passed = G.verify(REF, "ok", report("N", g=T([1.0, 2.0]), y=L(f(0.5), f(0.25))), "N", ref)
    assert passed
    outcomes, passed = G.verify(REF, "ok", report("N", g=T([1.0, 3.0]), y=L(f(0.5), f(0.25))), "N", ref)
    assert not passed and outcomes[0].params["expected"] == "tensor([1., 2.])"
    outcomes, passed = G.verify(REF, "ok", report("N", g=T([1.0, 2.0]), y=L(f(0.5), f(0.25))), "N", None)
    assert not passed and outcomes[0].message_key == "checks.no_reference"


def test_against_a_reference_tensor_a_list_or_a_tracked_tensor_does_not_pass():
    ref = {"g": G.parse_value(T([1.0, 2.0])), "y": [0.5]}
    as_list = G.verify(REF, "ok", report("N", g=L(f(1), f(2)), y=L(f(0.5))), "N", ref)[0][0]
    assert not as_list.passed
    tracked = G.verify(REF, "ok", report("N", g=T([1.0, 2.0], requires_grad=True), y=L(f(0.5))), "N", ref)[0][0]
    assert not tracked.passed and tracked.params["still_requires_grad"] is True
    assert tracked.params["got"] == "tensor([1., 2.], requires_grad=True)"


@pytest.mark.parametrize(
    "got, expected, k",
    [
        (T([2.0, 4.0]), T([1.0, 2.0]), 2),
        (T([3.0, 0.0, 6.0]), T([1.0, 0.0, 2.0]), 3),
        (T(12.0), T(4.0), 3),
        (T([2.0, 5.0]), T([1.0, 2.0]), None),  # not one multiple
        (T([1.0, 2.0]), T([1.0, 2.0]), None),
        (T([0.0, 0.0]), T([0.0, 0.0]), None),
        (T([-2.0]), T([1.0]), None),
    ],
)
def test_a_mismatch_that_is_a_whole_multiple_says_which(got, expected, k):
    check = G.Check("g", "x.grad")
    passed, _, params = G.compare(check, G.parse_value(got), G.parse_value(expected))
    assert not passed or k is None
    assert params.get("ratio") == k


def test_none_where_a_value_was_expected_is_said():
    passed, _, params = G.compare(G.Check("g", "x.grad"), None, G.parse_value(T(4.0)))
    assert not passed and params["got_none"] is True and params["got"] == "None"


def test_what_a_failed_check_shows_is_bounded():
    huge = G.parse_value(T([123456.789] * 1000, shape=[1000]))
    passed, _, params = G.compare(G.Check("g", "x", kind="close", expect=1.0), huge, 1.0)
    assert not passed and len(params["got"]) <= G.SHOWN and len(params["expected"]) <= G.SHOWN
    passed, _, params = G.compare(G.Check("g", "x", kind="equal", expect="s"), "y" * G.MAX_STR, "s")
    assert len(params["got"]) <= G.SHOWN


@pytest.mark.parametrize(
    "expr, tree",
    [
        ("x", ["name", "x"]),
        ("x.grad", ["attr", ["name", "x"], "grad"]),
        ("grads[-1]", ["item", ["name", "grads"], -1]),
        (
            "w.is_leaf and not w.requires_grad",
            ["and", [["attr", ["name", "w"], "is_leaf"], ["not", ["attr", ["name", "w"], "requires_grad"]]]],
        ),
        ("y.grad_fn is not None", ["is_none", ["attr", ["name", "y"], "grad_fn"], True]),
        ("a or None", ["or", [["name", "a"], ["const", None]]]),
    ],
)
def test_a_check_expression_becomes_a_small_tree(expr, tree):
    assert G.parse_expression(expr) == tree
    assert G.Check("c", expr, kind="true").tree == tree


@pytest.mark.parametrize(
    "expr",
    [
        "x.grad.sum()",
        "x.__class__",
        "x.data",
        "__import__('os')",
        "[x for x in y]",
        "x[0:2]",
        "x[i]",
        "x + 1",
        "x == 1",
        "lambda: 1",
        "x if y else z",
        "(" * 40 + "x" + ")" * 40 + " and " * 0 + "not " * 40 + "x",
        "x.",
    ],
)
def test_anything_else_in_a_check_expression_is_refused_before_it_reaches_the_sandbox(expr):
    with pytest.raises(InvalidRequest):
        G.Check("c", expr, kind="true")


def test_validation():
    with pytest.raises(InvalidRequest):
        G.ExerciseChecks(checks=())
    with pytest.raises(InvalidRequest):
        G.ExerciseChecks(checks=(G.Check("a", "x", expect=1), G.Check("a", "y", expect=1)))
    with pytest.raises(InvalidRequest):
        G.ExerciseChecks(checks=(G.Check("a", "x"),))  # no expect, no reference
    with pytest.raises(InvalidRequest):
        G.Check("a", "x", kind="bogus")
    with pytest.raises(InvalidRequest):
        G.ExerciseChecks(checks=(G.Check("a", "x", expect=1),), seed=-1)


def test_job_spec_carries_trees_and_the_nonce_never_expectations():
    spec = G.job_spec(CH, "N")
    assert spec["nonce"] == "N" and spec["exprs"]["grad"] == ["attr", ["name", "x"], "grad"]
    assert "6.0" not in json.dumps(spec)


def test_round_trip_dict():
    checks = G.ExerciseChecks(CH.checks, reference="x = 1", seed=5, reference_seed=7)
    assert G.ExerciseChecks.from_dict(json.loads(json.dumps(checks.to_dict()))) == checks


def test_nonces_are_unique_and_the_length_extraction_reads():
    nonces = {G.new_nonce() for _ in range(100)}
    assert len(nonces) == 100 and {len(n) for n in nonces} == {G.NONCE_HEX}


@pytest.mark.parametrize(
    "value, shown",
    [
        (T(8.0), "tensor(8.)"),
        (T(-4.0), "tensor(-4.)"),
        (T([4.0, 8.0]), "tensor([4., 8.])"),
        (T([0.5, 1.25]), "tensor([0.5, 1.25])"),
        (T([1.0 / 3, 2.718281828]), "tensor([0.3333, 2.718])"),  # at most 4 significant digits (issue 20)
        (T([[1.0, 2.0], [3.0, 4.0]], shape=[2, 2]), "tensor([[1., 2.], [3., 4.]])"),
        (T(2.0, requires_grad=True), "tensor(2., requires_grad=True)"),
        (T(6.0, requires_grad=True, is_leaf=False, grad_fn="MulBackward0"), "tensor(6., grad_fn=<MulBackward0>)"),
        (T([1, 2], dtype="int64"), "tensor([1, 2])"),
        (T(3, dtype="int32"), "tensor(3, dtype=torch.int32)"),
        (T(1.5, dtype="float64"), "tensor(1.5, dtype=torch.float64)"),
        (T(float("nan")), "tensor(nan)"),
        (T(None, shape=[200, 200]), "tensor(size=[200, 200])"),
        (L(f(4), f(8)), "[4.0, 8.0]"),
        (L(f(47.409698486328125), f(0.0004515525361057371)), "[47.41, 0.0004516]"),
        (["none"], "None"),
        (["bool", False], "False"),
        (["str", "hi"], "'hi'"),
        (["object", "Linear"], "<Linear>"),
    ],
)
def test_a_mismatch_shows_what_the_learner_got_as_python_prints_it(value, shown):
    check = G.Check(id="c", expr="x", kind="equal", expect=123)
    passed, _, params = G.compare(check, G.parse_value(value), 123)
    assert not passed and params["got"] == shown


def test_an_expression_is_measured_before_it_is_parsed(monkeypatch):
    # A 7.6 MiB expression once took the runner 8 s and 1.5 GB to parse before it was refused.
    import ast

    real = ast.parse

    def parse(source, filename="<unknown>", mode="exec", **kwargs):
        if mode == "eval" and len(source) > 10_000:
            raise AssertionError("parsed an expression too long to be a check")
        return real(source, filename, mode, **kwargs)

    monkeypatch.setattr(ast, "parse", parse)
    with pytest.raises(InvalidRequest, match=r"too long for a check \(7969171 characters, at most 200\)") as refused:
        G.Check("g", "x.grad and " * 724_470 + "x")
    assert "x.grad" not in str(refused.value)


# --- issue 21: checks of the submitted source, and "same" -----------------------------------------------------

from runner.grading import source as S  # noqa: E402

LESSON_1 = "import torch\nw = torch.randint(1, 100, (3,)).float()\nw.requires_grad_()\ny = w * 3\nd = y.detach()\n"
LESSON_4 = (
    "import torch\nw = torch.rand(3)\nw.requires_grad_()\n((w - 3) ** 2).sum().backward()\n"
    "with torch.no_grad():\n    w -= 0.1 * w.grad\n    pred = w * 2\n"
)


@pytest.mark.parametrize(
    ("code", "met"),
    [
        (LESSON_1, True),
        ("w = torch.ones(3, requires_grad=True)\n", True),
        ("w = torch.ones(3)\nw.requires_grad = True\n", True),
        ("w.requires_grad_(True)\n", True),
        ("with torch.enable_grad():\n    for _ in range(1):\n        w.requires_grad_()\n", True),
        ("w.requires_grad_(False)\n", False),
        ("w = torch.ones(3, requires_grad=False)\n", False),
        ("if False:\n    w.requires_grad_()\n", False),  # written, never run
        ("def f():\n    w.requires_grad_()\n", False),
        ("f = lambda: w.requires_grad_()\n", False),
        ("x = False and w.requires_grad_()\n", False),
        ("x = w.requires_grad_() if False else None\n", False),
        ("try:\n    w.requires_grad_()\nexcept Exception:\n    pass\n", False),
        ("[w.requires_grad_() for _ in []]\n", False),
        ("s = 'w.requires_grad_()'\nexec(s)\n", False),  # a string is not code
        ("w.requires_grad_(\n", False),  # not Python
    ],
)
def test_uses_requires_grad_is_read_only_in_code_that_always_runs(code, met):
    assert S.judge(code, "uses", "requires_grad", None) is met


def test_uses_detach_and_inside_no_grad():
    assert S.judge(LESSON_1, "uses", "detach", None)
    assert not S.judge(LESSON_1.replace("y.detach()", "y.data"), "uses", "detach", None)
    for name in ("w", "pred"):
        assert S.judge(LESSON_4, "inside", name, ["no_grad"])
        assert S.judge(LESSON_4.replace("no_grad", "inference_mode"), "inside", name, ["no_grad"])
        assert not S.judge(LESSON_4.replace("torch.no_grad()", "open('x')"), "inside", name, ["no_grad"])
    assert S.judge("with torch.no_grad():\n    w.sub_(1)\n", "inside", "w", ["no_grad"])  # in place, by a method
    assert not S.judge("with torch.no_grad():\n    w.sub(1)\n", "inside", "w", ["no_grad"])
    assert not S.judge("with torch.no_grad():\n    pass\npred = w * 2\n", "inside", "pred", ["no_grad"])
    assert not S.judge("if x:\n    with torch.no_grad():\n        pred = w\n", "inside", "pred", ["no_grad"])


def test_source_larger_than_the_bound_is_never_parsed():
    assert not S.judge(LESSON_1 + "#" * S.SOURCE_MAX_BYTES, "uses", "requires_grad", None)


def test_a_source_check_is_judged_outside_whatever_the_run_reported():
    checks = G.ExerciseChecks(
        (G.Check("v", "x", kind="equal", expect=1), G.Check("on", "requires_grad", kind="uses")),
    )
    judged = G.judge_source(checks, "x = 1\n")
    assert judged == {"on": False}
    outcomes, passed = G.verify(checks, "ok", report("N", v=["int", 1]), "N", None, judged)
    assert not passed and [(o.id, o.passed, o.message_key) for o in outcomes] == [
        ("v", True, "checks.passed"),
        ("on", False, "checks.source"),
    ]
    assert dict(outcomes[1].params) == {"kind": "uses", "expr": "requires_grad"}
    assert G.job_spec(checks, "N")["exprs"].keys() == {"v"}  # nothing of it goes into the sandbox
    # A forged report cannot answer for it: its id in the values changes nothing.
    forged = report("N", v=["int", 1], on=["bool", True])
    assert not G.verify(checks, "ok", forged, "N", None, judged)[1]


@pytest.mark.parametrize(
    ("kind", "expr", "expect", "message"),
    [
        ("uses", "grad", None, "a 'uses' check names one of: requires_grad, detach"),
        ("uses", "detach", [1], "takes no 'expect'"),
        ("inside", "w", None, "'expect' lists blocks among: no_grad"),
        ("inside", "w.x", ["no_grad"], "names one variable"),
    ],
)
def test_a_source_check_naming_what_the_runner_does_not_know_is_refused(kind, expr, expect, message):
    with pytest.raises(InvalidRequest, match=re.escape(message)):
        G.Check("c", expr, kind=kind, expect=expect)


def test_same_wants_the_place_in_the_graph_too():
    tracked = T([3.0], requires_grad=True, is_leaf=False, grad_fn="MulBackward0")
    plain = T([3.0])
    ch = G.ExerciseChecks((G.Check("y", "y", kind="same"),), reference="y = 1")
    ref = {"y": G.parse_value(tracked)}
    assert G.verify(ch, "ok", report("N", y=tracked), "N", ref)[1]
    outcomes, passed = G.verify(ch, "ok", report("N", y=plain), "N", ref)
    assert not passed and outcomes[0].params["lost_requires_grad"] is True
    close = G.ExerciseChecks((G.Check("y", "y", kind="close"),), reference="y = 1")
    assert G.verify(close, "ok", report("N", y=plain), "N", ref)[1]  # close: the numbers alone, as before


def test_a_long_list_is_cut_at_a_whole_number_and_values_that_round_alike_get_more_digits():
    # Issue 20: no 17-digit floats cut mid-number; rounding never makes a wrong value look right.
    check = G.Check(id="c", expr="x", kind="close", expect=[0.1] * 40)
    got = G.parse_value(["list", [["float", 0.123456789123] for _ in range(40)]])
    passed, _, params = G.compare(check, got, [0.1] * 40)
    assert not passed and len(params["got"]) <= G.SHOWN and params["got"].endswith(", …]"), params["got"]
    assert all(item in ("…", "0.1235") for item in params["got"][1:-1].split(", ")), params["got"]
    assert params["got_numbers"] == [0.123456789123] * 40
    close = G.Check(id="c", expr="x", kind="close", expect=2.0, rtol=0, atol=0)
    passed, _, params = G.compare(close, G.parse_value(["float", 2.00001]), 2.0)
    assert not passed and params["got"] == "2.00001" and params["expected"] == "2.0", params
