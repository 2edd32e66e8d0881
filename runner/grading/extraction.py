"""Inside the sandbox: the checks' values read after the learner's code ended, without running any of its code.

``capture_pristine`` runs in the zygote before any learner code exists and keeps the builtins, getters and
the C JSON encoder extraction uses; ``write_report`` neutralises the process (hooks, threads, signals, gc),
reads the nonce, evaluates each expression tree and writes the tagged report (report.py reads it back).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from .checks import NONCE_HEX, TENSOR_ATTRIBUTES
from .report import INT_BOUND, MAX_DEPTH, MAX_DIMS, MAX_ELEMENTS, MAX_ITEMS, MAX_NAME, MAX_REPORT, MAX_STR

# Captured in the zygote before any learner code exists (capture_pristine).
_P: dict[str, Any] = {}


class _Fail(Exception):
    """An expression could not be evaluated; the argument is the error's name shown to the learner."""


def capture_pristine() -> None:
    """Called in the zygote before any learner code exists."""
    import _signal  # type: ignore[import-not-found]  # signal's C half: its functions, not the module's wrappers
    import builtins
    import gc
    import sys
    import threading

    import torch

    base = torch._C.TensorBase
    getters = {name: base.__dict__[name].__get__ for name in (*TENSOR_ATTRIBUTES, "retains_grad")}
    _P.update(
        type=builtins.type,
        len=builtins.len,
        str=builtins.str,
        int=builtins.int,
        float=builtins.float,
        bool=builtins.bool,
        list=builtins.list,
        tuple=builtins.tuple,
        dict=builtins.dict,
        list_iter=builtins.list.__iter__,
        tuple_iter=builtins.tuple.__iter__,
        dict_items=builtins.dict.items,
        list_item=builtins.list.__getitem__,
        tuple_item=builtins.tuple.__getitem__,
        type_name=builtins.type.__dict__["__name__"].__get__,
        str_item=builtins.str.__getitem__,
        memoryview=builtins.memoryview,
        # The C encoder itself: json.dumps and JSONEncoder are Python code a learner can patch.
        encode=json.encoder.c_make_encoder(  # type: ignore[attr-defined]
            None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
        ),
        join="".join,
        read=os.read,
        pread=os.pread,
        write=os.write,
        close=os.close,
        open=os.open,
        kill=os.kill,
        getpid=os.getpid,
        settrace=sys.settrace,
        setprofile=sys.setprofile,
        gettrace=sys.gettrace,
        getprofile=sys.getprofile,
        setswitchinterval=sys.setswitchinterval,
        shutdown_threads=threading._shutdown,  # type: ignore[attr-defined]
        gc_disable=gc.disable,
        signal=_signal.signal,
        sig_ign=_signal.SIG_IGN,
        sigmask=_signal.pthread_sigmask,
        sig_block=_signal.SIG_BLOCK,
        signals=sorted(int(s) for s in _signal.valid_signals()),
        unstoppable=(int(_signal.SIGKILL), int(_signal.SIGSTOP)),
        Tensor=torch.Tensor,
        Parameter=torch.nn.Parameter,
        dtype=torch.dtype,
        Size=torch.Size,
        getters=getters,
        tolist=base.tolist,
        numel=base.numel,
        dim=base.dim,
        is_complex=base.is_complex,
        tensor_bool=base.__bool__,
        tensor_item=base.__getitem__,
        tf_modes=getattr(torch._C, "_len_torch_function_stack", lambda: 0),
        td_modes=getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0),
    )


def _neutralise() -> str | None:
    """Stop everything that could run learner code during extraction; a refusal reason if it did not hold.

    Order matters.  Calls a learner's audit hook can see (settrace, setprofile, open, kill) come first,
    while the nonce is not yet in this process; the kill comes last of them, so a process forked by a hook
    on the way dies with the rest.  From the signals on, nothing audited runs, so no learner code runs at
    all, and what the hooks may have redone is checked.
    """
    P = _P
    P["shutdown_threads"]()  # the learner's non-daemon threads end first, as at a normal exit
    status = P["open"]("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    P["settrace"](None)
    P["setprofile"](None)
    if P["getpid"]() <= 2:  # pid 2 under the job's own init, pid 1 in a container; never a host process
        try:
            P["kill"](-1, 9)  # every other process of the job (its init, pid 1, is spared by the kernel)
        except OSError:
            pass  # none left
    for sig in P["signals"]:
        if sig not in P["unstoppable"]:
            try:
                P["signal"](sig, P["sig_ign"])  # also drops a handler already tripped but not yet run
            except (OSError, ValueError):
                pass
    P["sigmask"](P["sig_block"], P["signals"])
    P["gc_disable"]()
    P["setswitchinterval"](1000.0)
    if P["gettrace"]() is not None or P["getprofile"]() is not None:
        return "hooks"
    text = P["pread"](status, 4096, 0)
    P["close"](status)
    if b"\nThreads:\t1\n" not in text:
        return "threads"
    return None


def _truth(v: Any) -> bool:
    P = _P
    T = P["type"](v)
    if v is None:
        return False
    if T is P["bool"]:
        return v is True
    if T is P["int"] or T is P["float"]:
        return not v == 0
    if T is P["str"] or T is P["list"] or T is P["tuple"]:
        return not P["len"](v) == 0
    if (T is P["Tensor"] or T is P["Parameter"]) and P["numel"](v) == 1:
        return P["tensor_bool"](v) is True
    raise _Fail("TypeError")


def _evaluate(node: list[Any], ns: dict[str, Any], keep: list[Any]) -> Any:
    """Evaluate a parse_expression tree without running any code the learner could have changed."""
    P = _P
    op = node[0]
    if op == "name":
        if node[1] not in ns:
            raise _Fail("NameError")
        return ns[node[1]]
    if op == "const":
        return node[1]
    if op == "attr":
        obj = _evaluate(node[1], ns, keep)
        T = P["type"](obj)
        if T is not P["Tensor"] and T is not P["Parameter"]:
            raise _Fail("AttributeError")
        if node[2] == "grad" and not P["getters"]["is_leaf"](obj) and not P["getters"]["retains_grad"](obj):
            return None  # a non-leaf's .grad is None unless retained, and reading it warns into the output
        value = P["getters"][node[2]](obj)
        keep.append(value)
        return value
    if op == "item":
        obj = _evaluate(node[1], ns, keep)
        T = P["type"](obj)
        try:
            if T is P["list"]:
                value = P["list_item"](obj, node[2])
            elif T is P["tuple"]:
                value = P["tuple_item"](obj, node[2])
            elif T is P["Tensor"] or T is P["Parameter"]:
                if P["dim"](obj) == 0:
                    raise _Fail("IndexError")
                value = P["tensor_item"](obj, node[2])
            else:
                raise _Fail("TypeError")
        except IndexError:
            raise _Fail("IndexError") from None
        keep.append(value)
        return value
    if op == "not":
        return not _truth(_evaluate(node[1], ns, keep))
    if op == "and" or op == "or":
        value = None
        for sub in node[1]:
            value = _evaluate(sub, ns, keep)
            if _truth(value) == (op == "or"):
                return value
        return value
    if op == "is_none":
        return (_evaluate(node[1], ns, keep) is None) != node[2]
    raise _Fail("SyntaxError")  # pragma: no cover - parse_expression makes only the nodes above


def _name_of(T: Any) -> str:
    # str.__getitem__ itself: a class's __name__ may be a str subclass with its own slicing.
    name: str = _P["str_item"](_P["type_name"](T), slice(0, MAX_NAME))
    return name


def _tensor(t: Any, depth: int, keep: list[Any]) -> list[Any]:
    P = _P
    get = P["getters"]
    shape = get["shape"](t)
    keep.append(shape)
    fn = get["grad_fn"](t)
    keep.append(fn)
    leaf = P["bool"](get["is_leaf"](t))
    out: dict[str, Any] = {
        "shape": [P["int"](n) for n in P["tuple_iter"](shape)],
        "dtype": P["str"](get["dtype"](t)).replace("torch.", ""),
        "requires_grad": P["bool"](get["requires_grad"](t)),
        "is_leaf": leaf,
        "grad_fn": None if fn is None else _name_of(P["type"](fn)),
        "data": None,
        "grad": None,
    }
    if P["numel"](t) <= MAX_ELEMENTS and P["len"](out["shape"]) <= MAX_DIMS and not P["is_complex"](t):
        data = P["tolist"](t)
        keep.append(data)
        out["data"] = data
    if depth == 0 and (leaf or get["retains_grad"](t)):  # else None, and reading it would warn
        grad = get["grad"](t)
        keep.append(grad)
        if P["type"](grad) is P["Tensor"]:
            out["grad"] = _tensor(grad, depth + 1, keep)
    return ["tensor", out]


def _encode(v: Any, depth: int, keep: list[Any]) -> list[Any]:
    """A value as the tagged report encoding (parse_value reads it back), built from exact types only."""
    P = _P
    T = P["type"](v)
    if v is None:
        return ["none"]
    if T is P["bool"]:
        return ["bool", v]
    if T is P["int"]:
        return ["int", v] if -INT_BOUND < v < INT_BOUND else ["object", "int"]
    if T is P["float"]:
        return ["float", v]
    if T is P["str"]:
        return ["str", v[:MAX_STR]]  # an exact str: its slicing is the builtin one
    if T is P["Tensor"] or T is P["Parameter"]:
        return _tensor(v, 0, keep)
    if T is P["Size"]:
        return ["list", [["int", P["int"](n)] for n in P["tuple_iter"](v)]]
    if T is P["dtype"]:
        return ["str", P["str"](v).replace("torch.", "")]
    if (T is P["list"] or T is P["tuple"] or T is P["dict"]) and (depth >= MAX_DEPTH or P["len"](v) > MAX_ITEMS):
        return ["object", _name_of(T) + (" (too deep)" if depth >= MAX_DEPTH else " (too long)")]
    if T is P["list"] or T is P["tuple"]:
        items = P["list_iter"](v) if T is P["list"] else P["tuple_iter"](v)
        return ["list", [_encode(x, depth + 1, keep) for x in items]]
    if T is P["dict"]:
        return [
            "dict",
            [[k[:MAX_STR], _encode(x, depth + 1, keep)] for k, x in P["dict_items"](v) if P["type"](k) is P["str"]],
        ]
    return ["object", _name_of(T)]


def _extract(ns: Mapping[str, Any], exprs: Mapping[str, Any], keep: list[Any]) -> dict[str, Any]:
    P = _P
    names = {k: v for k, v in P["dict_items"](ns) if P["type"](k) is P["str"]}
    keep.append(names)
    values: dict[str, Any] = {}
    for cid, tree in exprs.items():
        try:
            if P["tf_modes"]() or P["td_modes"]():
                raise _Fail("RuntimeError")  # a torch function or dispatch mode would run learner code
            values[cid] = _encode(_evaluate(tree, names, keep), 0, keep)
        except _Fail as e:
            values[cid] = ["error", e.args[0]]
        except BaseException as e:  # torch raised while reading (a meta tensor's data, say)
            keep.append(e)
            values[cid] = ["error", _name_of(P["type"](e))]
    return values


def _read_nonce(fd: int) -> str | None:
    try:
        raw = _P["read"](fd, NONCE_HEX + 1)
        _P["close"](fd)
    except OSError:
        return None
    text: str = raw.decode("ascii", "replace")
    return text if _P["len"](text) == NONCE_HEX and not text.strip("0123456789abcdef") else None


def write_report(fd: int, ns: Mapping[str, Any], spec: Mapping[str, Any], nonce_fd: int | None = None) -> None:
    """Extract the checks' values after the learner's code ran to its end, and write the report to ``fd``.

    The nonce is read from ``nonce_fd`` once nothing of the learner's can run any more (the sandbox), or
    taken from ``spec`` (the Docker backend).  The caller must not return into learner code afterwards:
    the zygote exits at once.
    """
    P = _P
    keep: list[Any] = []  # nothing extraction touched is freed before the process ends (no __del__ runs)
    try:
        refused = _neutralise()
        nonce = spec.get("nonce") if nonce_fd is None else None
        if refused is None and nonce_fd is not None:
            nonce = _read_nonce(nonce_fd)
            refused = None if nonce is not None else "nonce"
        msg: dict[str, Any] = {"v": 2}
        if refused is not None or P["type"](nonce) is not P["str"]:
            msg["refused"] = refused or "nonce"
        else:
            msg["nonce"] = nonce
            msg["values"] = _extract(ns, spec["exprs"], keep)
        data = P["join"](P["encode"](msg, 0)).encode("ascii")
        if P["len"](data) > MAX_REPORT:
            data = b'{"v": 2, "refused": "too_large"}'
    except BaseException as e:
        keep.append(e)
        data = b'{"v": 2, "refused": "malformed"}'
    try:
        view = P["memoryview"](data)
        while view:
            n = P["write"](fd, view)
            view = view[n:]
        P["close"](fd)
    except BaseException as e:
        keep.append(e)
