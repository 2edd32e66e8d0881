"""Where learners struggle: `coursebot stats`, a report over the learning events the bot records.

``query`` reads the events table (aggregated in SQL, over the report's indexes), ``report`` turns the figures
into a report about the course (funnel, time per slide, questions, exercises, with flags), ``text`` and ``html``
show it.
"""
