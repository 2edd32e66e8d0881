"""`coursebot webhook set|info|delete`, the deploy step of webhook mode, run as a real process against the stand-in."""

from __future__ import annotations

import asyncio
import sys

from tests.conftest import ROOT
from tests.test_cli import clean_env


async def webhook(standin, *args: str, token: str | None = None, **env: str) -> tuple[int, str, str]:
    """Run `python -m bot webhook ARGS` against ``standin``; return (exit code, stdout, stderr)."""
    variables = {"TELEGRAM_API_BASE_URL": standin.api_base_url, **env}
    if token is not None:
        variables["TELEGRAM_BOT_TOKEN"] = token
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "webhook",
        *args,
        cwd=ROOT,
        env=clean_env(**variables),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_set_info_and_delete(standin):
    code, out, err = await webhook(
        standin, "set", "https://bot.example.org/hook", "--max-connections", "7", token=standin.token,
        COURSEBOT_WEBHOOK_SECRET="from_the_environment",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert (
        out.splitlines()[0]
        == "webhook set: Telegram sends @coursebot_test_bot's updates to https://bot.example.org/hook"
    )
    assert standin.webhook is not None
    assert (standin.webhook.secret, standin.webhook.max_connections) == ("from_the_environment", 7)
    # The updates the bot handles, and no others.
    assert standin.updates.allowed == {"message", "edited_message", "callback_query", "poll_answer", "my_chat_member"}

    code, out, _ = await webhook(standin, "info", token=standin.token)
    assert code == 0
    assert out.splitlines()[:3] == ["webhook: https://bot.example.org/hook", "pending updates: 0", "max connections: 7"]

    code, out, _ = await webhook(standin, "set", "http://127.0.0.1:9/", "--secret", "given", token=standin.token)
    assert code == 0
    assert standin.webhook.secret == "given"  # --secret wins over the environment

    code, out, _ = await webhook(standin, "delete", "--drop-pending-updates", token=standin.token)
    assert code == 0
    assert (
        out
        == "webhook deleted and the updates waiting dropped: the bot can poll again (unset COURSEBOT_WEBHOOK_LISTEN)\n"
    )
    assert standin.webhook is None and standin.webhook_url == ""
    code, out, _ = await webhook(standin, "info", token=standin.token)
    assert out.splitlines()[0] == "no webhook is set: the bot polls"


async def test_errors_are_one_line(standin):
    code, out, err = await webhook(standin, "info")
    assert (code, out) == (2, "")
    assert err == "coursebot: TELEGRAM_BOT_TOKEN is not set: give it the token from @BotFather.\n"

    code, out, err = await webhook(standin, "set", "https://bot.example.org/hook", token=standin.token)
    assert code == 2
    assert err.startswith("coursebot: the webhook needs a secret: give --secret, or set COURSEBOT_WEBHOOK_SECRET")
    assert len(err.splitlines()) == 1

    code, out, err = await webhook(standin, "set", "http://example.org/hook", "--secret", "s", token=standin.token)
    assert code == 1
    assert err == "coursebot: Telegram refused setWebhook: Bad webhook: an https url must be provided for webhook\n"

    code, out, err = await webhook(standin, "info", token="123456:WRONG")
    assert code == 1
    assert err == (
        f"coursebot: the Bot API at {standin.api_base_url} refused TELEGRAM_BOT_TOKEN: check it with @BotFather.\n"
    )

    standin.fail_next("setWebhook", 429, retry_after=5)
    code, out, err = await webhook(standin, "set", "https://x.example/h", "--secret", "s", token=standin.token)
    assert code == 1
    assert err == (
        "coursebot: Telegram refused setWebhook: too many requests, retry in 5 s "
        "(run this step once per deploy, not from each replica).\n"
    )
    assert standin.webhook is None
