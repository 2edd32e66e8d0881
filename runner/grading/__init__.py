"""Graded checks: verdicts decided outside the sandbox, from values the learner's code cannot make worth anything.

Threat model
------------
The learner's code runs first, in the very process where the values the checks read are extracted.  It
can monkeypatch anything (``torch.Tensor`` properties, builtins, ``json``), install profile, trace and
audit hooks, gc callbacks and signal handlers, start threads and processes, write to every descriptor it
inherits, leave early with ``sys.exit`` / ``os._exit``, and, with enough effort, rewrite the code objects
of this very module.  So nothing computed in that process may *decide* a verdict, and in the end any value
it reports may have been chosen by the learner.  The design makes a chosen value worthless, and makes
choosing one deliberate work rather than an accident or a three-line trick.

1. **Randomised inputs and a reference solution** (the defence that holds whatever happens in the
   sandbox).  The runner seeds ``random`` and torch before the learner's code with a per-run seed, and
   exercises build their inputs from it (``torch.randint(1, 6, (3,))``).  A check without ``expect`` is
   compared with what the same expression gives after the exercise's trusted ``reference`` solution ran
   in a separate, clean job with the same seed.  The expected values never enter the learner's process.
   A hard-coded or forged value is right only for a run whose inputs the learner could not know before
   it started: to choose the right value, the learner has to compute it, which is solving the exercise.
   ``bot.authoring.proof`` (``coursebot lint --run``, and tests/test_exercises.py) proves in the real runner
   that no hard-coded answer passes the reference-compared checks, for fixed pairs of seeds.
2. **The status comes from the process's real end.**  A graded job's status is the wait status the
   zygote reaps, never a "done" message the learner could write; an exception or a non-zero exit fails
   every check, and the report is written only after the code ran to its end.
3. **The nonce is not in the learner's process** while the learner's code runs: it waits in a pipe
   (``NONCE_FD``) that extraction reads only after the code ended and everything below holds.  No frame
   or object holds it, so walking frames or ``gc`` finds nothing to forge a report with.
4. **Extraction the learner cannot steer.**  Check expressions are parsed *here*, outside, into a small
   tree (names, tensor attributes from a fixed list, ``[int]``, ``not``/``and``/``or``, ``is None``;
   ``parse_expression``) and evaluated inside without ``eval``/``compile``: names are read from a copy
   of the namespace with exact ``str`` keys, tensors only through getters captured from
   ``torch._C.TensorBase`` in the zygote before any learner code existed, and only on exact
   ``torch.Tensor`` / ``nn.Parameter`` instances (a subclass is an opaque object).  Before the nonce is
   read (``_neutralise``): profile and trace hooks are cleared, every other process of the job is
   killed, every signal is ignored and blocked, the cyclic gc is off, and then it is verified, without
   any audited call a learner's audit hook could see, that no hook came back and no other thread
   exists; otherwise extraction refuses and the attempt fails.  Every object extraction touches is kept
   alive until the process exits, so no ``__del__`` or weakref callback runs during it, and the report
   is encoded by the C JSON encoder captured in the zygote.
5. **A tagged encoding and a hostile parser.**  Every value in a report is tagged (``["tensor", {...}]``,
   ``["dict", [[k, v], ...]]``, ``["int", 3]``, ...), so a learner's dict can never read as a tensor or
   an error.  ``parse_report`` treats the bytes as hostile: size-, depth- and count-bounded, ints bounded,
   every field schema-checked; a malformed, oversized or refused report is a failed attempt with a reason
   (``checks.no_report``), never an infrastructure error.  Each check is compared in its own guard.

What remains, and why it buys nothing: a learner who reads ``NONCE_FD`` themselves, writes a report and
ends with ``os._exit(0)``, or who rewrites this module's functions (reachable through frames) or torch's
kernels (``torch.library``) before extraction, can report values of their choosing.  Those are values
they could also have produced by honest assignment (``x.grad = torch.tensor(6.)``), and a reference-
compared value is right only if computed from this run's random inputs.  ``true`` checks state facts
(``w.is_leaf``) that are as cheap to make true honestly as to forge; exercises put their weight on
reference-compared values.  The Docker backend passes the nonce in the job's arguments (weaker: point 3
does not hold there), and points 1, 2, 4 and 5 hold as in the sandbox.

6. **The concept, read in the source** (``source.py``).  Where an exercise's values can be produced without
   the concept it teaches, checks of kind ``uses`` and ``inside`` read the submitted code with ``ast``, here,
   outside: nothing of it runs, nothing in the sandbox can change it, and a forged report does not touch
   it.  They prove the concept is written in code that always runs, not that it computed the values: with
   the value checks, a pass needs both.
"""

from .checks import KINDS, NONCE_HEX, Check, ExerciseChecks, job_spec, new_nonce, parse_expression
from .extraction import capture_pristine, write_report
from .report import (
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_REPORT,
    MAX_STR,
    NO_REPORT_REASONS,
    NONCE_FD,
    REPORT_FD,
    Failed,
    Opaque,
    ReportError,
    TensorValue,
    parse_report,
    parse_value,
)
from .source import SOURCE_KINDS
from .verdict import SHOWN, compare, judge_source, verify

__all__ = [
    "KINDS",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_REPORT",
    "MAX_STR",
    "NONCE_FD",
    "NONCE_HEX",
    "NO_REPORT_REASONS",
    "REPORT_FD",
    "SHOWN",
    "SOURCE_KINDS",
    "Check",
    "ExerciseChecks",
    "Failed",
    "Opaque",
    "ReportError",
    "TensorValue",
    "capture_pristine",
    "compare",
    "job_spec",
    "judge_source",
    "new_nonce",
    "parse_expression",
    "parse_report",
    "parse_value",
    "verify",
    "write_report",
]
