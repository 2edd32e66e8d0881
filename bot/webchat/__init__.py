"""The web chat: a phone-sized Telegram app in the browser, served with the real bot behind it.

Modules: local (the bot, the built-in Bot API server and the web chat, run together),
server (HTTP and WebSockets), page (one open page: what the learner does, what they
are shown), learners (the web chat's users), strings (the page's own words), and
static/ (the page: HTML, CSS, JavaScript; no build step).
"""
