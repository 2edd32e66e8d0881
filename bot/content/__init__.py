"""The course content: its model, reading lesson files, checking them, and how complete each translation is."""
