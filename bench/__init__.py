"""Benchmarks: bench/bot.py measures coursebot against a bare PTB bot (bench/framework_bot.py)."""
