"""Pure parts of the warm process: traceback trimming, exit codes."""

from runner import zygote


def _raise(src):
    import linecache

    linecache.cache[zygote.SNIPPET] = (len(src), None, src.splitlines(True), zygote.SNIPPET)
    try:
        exec(compile(src, zygote.SNIPPET, "exec"), {})
    except BaseException as e:
        return zygote.format_learner_exception(e)
    raise AssertionError("no exception")


def test_only_learner_frames():
    text = _raise("def f():\n    return 1 / 0\nf()\n")
    assert 'File "<snippet>", line 3' in text and 'File "<snippet>", line 2' in text
    assert "test_runner_zygote" not in text and "runner/" not in text
    assert text.strip().endswith("ZeroDivisionError: division by zero")


def test_library_frames_dropped():
    text = _raise("import json\njson.loads('{')\n")
    assert "json/decoder.py" not in text and "<snippet>" in text


def test_syntax_error_has_no_runner_frames():
    try:
        compile("x = (", zygote.SNIPPET, "exec")
    except SyntaxError as e:
        text = zygote.format_learner_exception(e)
    assert "SyntaxError" in text and "Traceback" not in text


def test_chained():
    text = _raise("try:\n    1/0\nexcept Exception as e:\n    raise ValueError('x') from e\n")
    assert "ZeroDivisionError" in text and "ValueError: x" in text


def test_exit_codes():
    assert zygote._exit_code_of(SystemExit()) == 0
    assert zygote._exit_code_of(SystemExit(3)) == 3
    assert zygote._exit_code_of(SystemExit(256 + 4)) == 4
    assert zygote._exit_code_of(SystemExit(True)) == 1
