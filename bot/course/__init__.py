"""The course: its model (frozen dataclasses) and the lesson files' format, read into it with every problem at its line.

Below everything that teaches: it knows nothing of Telegram screens, the database or the command line.
"""
