"""What brings a learner back, as pure pieces the flows and storage build on.

- ``review``: a spaced-review card (FSRS) per Quick Check question and per drill once met, and what is due.
- ``reminders``: when to remind a learner, from their own habit, never in their quiet hours, once a day.
- ``plan``: a learner's next reminder, and what the sweep does when it comes (send, pause, or nothing).
- ``streak``: days in a row with something finished, one missed day forgiven.
- ``deeplinks``: ``t.me/<bot>?start=<lesson>`` and ``?start=review``, built and parsed.
- ``completion_card``: the image a learner gets for finishing the course (``textline`` draws its lines).
- ``bulk_sender``: sends many messages under Telegram's bot-wide rate, waiting out a 429.

Nothing here does I/O of its own except the bulk sender, which is handed its send, clock and sleep; ``plan``
reads the rows bot.storage.retention returns.
"""
