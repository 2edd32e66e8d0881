"""Decisions as pure flows: ``(state, course, input) -> Outcome``, no I/O.

A handler unpacks its update, reads the learner's snapshot (bot.snapshot), calls a flow, shows the Outcome's screens
and hands its changes and events to storage, which writes them in one transaction keyed by the update. Steps that
cross features (open a place, leave the practice, finish a lesson) are calls between these modules, never between
handler modules: ``reading`` (slides, opening a place), ``quiz`` (the Quick Check's decisions), ``drills`` (taps on a
drill), ``practice`` (the exercise: open, hints, leave, a graded run's verdict), ``lessons`` (a lesson finished).
"""
