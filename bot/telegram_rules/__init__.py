"""Telegram's rules, as the bot, lint and the built-in Bot API server all need them; imports nothing of the bot.

limits (numbers and names, from PTB's telegram.constants where it states them), units (UTF-16 and UTF-8
lengths), html (Telegram's HTML parse mode, ported from tdlib and pinned by golden cases), text (a message as
Telegram stores it, and its one visible length).
"""
