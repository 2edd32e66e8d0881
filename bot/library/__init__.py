"""The content the bot teaches from, accepted: loaded, every screen checked against Telegram's limits, reloaded live.

An Edition is one accepted version of the lessons and catalogs; the Library holds the one in use.
"""
