"""Config.from_env: one readable line per mistake, sane defaults, and a token that never shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.config import Config
from bot.errors import ConfigError
from runner.client import RunnerConfig

TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


def env(**values: str) -> dict[str, str]:
    return {"TELEGRAM_BOT_TOKEN": TOKEN, **values}


def config_error(environment: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        Config.from_env(environment)
    return str(caught.value)


@pytest.mark.parametrize("environment", [{}, {"TELEGRAM_BOT_TOKEN": ""}, {"TELEGRAM_BOT_TOKEN": "   "}])
def test_no_token_is_no_error_the_course_is_then_served_in_the_web_chat(environment):
    assert Config.from_env(environment).token == ""


def test_the_web_chat_and_reload_settings_are_read_with_their_defaults_beside_the_database():
    default = Config.from_env({"COURSEBOT_DB": "/srv/cb/progress.sqlite3"})
    assert (default.web_host, default.web_port, default.watch) == ("127.0.0.1", 8080, True)
    assert default.control_path == Path("/srv/cb/control.sock")
    assert default.web_history == Path("/srv/cb/webchat.sqlite3")
    chosen = Config.from_env(
        {
            "COURSEBOT_WEB_HOST": "::1",
            "COURSEBOT_WEB_PORT": "0",
            "COURSEBOT_WATCH": "off",
            "COURSEBOT_CONTROL_SOCKET": "/run/cb.sock",
        }
    )
    assert (chosen.web_host, chosen.web_port, chosen.watch) == ("::1", 0, False)
    assert chosen.control_path == Path("/run/cb.sock")


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("COURSEBOT_WEB_PORT", "http", "must be a number"),
        ("COURSEBOT_WEB_PORT", "70000", "up to 65535"),
        ("COURSEBOT_WATCH", "sometimes", "must be on or off"),
    ],
)
def test_bad_web_and_reload_settings_are_one_line_naming_the_variable(name, value, said):
    message = config_error({name: value})
    assert name in message and said in message and "\n" not in message


@pytest.mark.parametrize("token", ["987654321", "987654321:AA HdqT", "987654321:AA\tHdq", "not-a-token"])
def test_malformed_token_is_refused_naming_the_variable(token):
    message = config_error({"TELEGRAM_BOT_TOKEN": token})
    assert "TELEGRAM_BOT_TOKEN" in message
    assert "does not look like a bot token" in message
    assert token not in message


def test_token_surrounded_by_whitespace_is_trimmed():
    assert Config.from_env({"TELEGRAM_BOT_TOKEN": f"  {TOKEN}\n"}).token == TOKEN


def test_defaults_apply_when_only_the_token_is_set():
    config = Config.from_env(env())
    assert config.db_path == Path("data/coursebot.sqlite3")
    assert config.lessons_dir == Path("lessons")
    assert config.locales_dir == Path("locales")
    assert config.api_base_url == "https://api.telegram.org"
    assert config.bot_base_url == "https://api.telegram.org/bot"
    assert config.messages_per_second == 30.0
    assert config.max_retries == 5
    assert config.concurrent_updates == 256
    assert config.log_level == "INFO"


def test_empty_variables_fall_back_to_the_defaults():
    config = Config.from_env(env(COURSEBOT_DB=" ", COURSEBOT_LESSONS="", TELEGRAM_API_BASE_URL=""))
    assert config.db_path == Path("data/coursebot.sqlite3")
    assert config.lessons_dir == Path("lessons")
    assert config.api_base_url == "https://api.telegram.org"


def test_paths_and_api_url_are_read_from_their_variables(tmp_path):
    config = Config.from_env(
        env(
            COURSEBOT_DB=str(tmp_path / "progress.db"),
            COURSEBOT_LESSONS=str(tmp_path / "content"),
            COURSEBOT_LOCALES=str(tmp_path / "catalogs"),
            TELEGRAM_API_BASE_URL="http://127.0.0.1:8081/",
        )
    )
    assert config.db_path == tmp_path / "progress.db"
    assert config.lessons_dir == tmp_path / "content"
    assert config.locales_dir == tmp_path / "catalogs"
    assert config.api_base_url == "http://127.0.0.1:8081"
    assert config.bot_base_url == "http://127.0.0.1:8081/bot"


def test_api_url_without_http_scheme_is_refused_naming_the_variable():
    message = config_error(env(TELEGRAM_API_BASE_URL="api.telegram.org"))
    assert "TELEGRAM_API_BASE_URL" in message
    assert "api.telegram.org" in message


def test_numbers_are_read_from_their_variables():
    config = Config.from_env(
        env(
            COURSEBOT_MESSAGES_PER_SECOND="12.5",
            COURSEBOT_MAX_RETRIES="0",
            COURSEBOT_CONCURRENT_UPDATES="8",
            COURSEBOT_LOG_LEVEL="debug",
            COURSEBOT_EVENTS_DAYS="90",
        )
    )
    assert config.events_days == 90
    assert Config.from_env(env(COURSEBOT_EVENTS_DAYS="0")).events_days == 0  # keeps none
    assert config.messages_per_second == 12.5
    assert config.max_retries == 0
    assert config.concurrent_updates == 8
    assert config.log_level == "DEBUG"


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("COURSEBOT_MESSAGES_PER_SECOND", "fast"),
        ("COURSEBOT_MAX_RETRIES", "1.5"),
        ("COURSEBOT_MAX_RETRIES", "five"),
        ("COURSEBOT_CONCURRENT_UPDATES", "lots"),
        ("COURSEBOT_EVENTS_DAYS", "a year"),
        ("COURSEBOT_EVENTS_DAYS", "30.5"),
    ],
)
def test_non_numeric_value_is_refused_naming_the_variable(name, raw):
    message = config_error(env(**{name: raw}))
    assert message.startswith(f"{name} must be a number")
    assert repr(raw) in message


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("COURSEBOT_MESSAGES_PER_SECOND", "0"),
        ("COURSEBOT_MAX_RETRIES", "-1"),
        ("COURSEBOT_CONCURRENT_UPDATES", "0"),
        ("COURSEBOT_EVENTS_DAYS", "-1"),
    ],
)
def test_number_below_its_minimum_is_refused_naming_the_variable(name, raw):
    message = config_error(env(**{name: raw}))
    assert message.startswith(f"{name} must be at least")


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_non_finite_messages_per_second_is_refused_naming_the_variable(raw):
    message = config_error(env(COURSEBOT_MESSAGES_PER_SECOND=raw))
    assert "COURSEBOT_MESSAGES_PER_SECOND" in message


def test_unknown_log_level_is_refused_naming_the_variable():
    message = config_error(env(COURSEBOT_LOG_LEVEL="verbose"))
    assert "COURSEBOT_LOG_LEVEL" in message
    assert "VERBOSE" in message


def test_token_never_appears_in_repr_or_str_of_the_config():
    config = Config.from_env(env())
    assert config.token == TOKEN
    assert TOKEN not in repr(config)
    assert TOKEN not in str(config)
    assert "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw" not in repr(config)
    assert "db_path" in repr(config)  # the repr is still useful


def test_the_defaults_are_the_configs_own_when_nothing_is_set():
    # from_env states no default of its own: an empty environment gives the dataclass's.
    assert Config.from_env(env()) == Config(token=TOKEN)


def test_the_runners_settings_are_read_with_the_bots():
    config = Config.from_env(env(RUNNER_POOL="1", RUNNER_QUEUE="4", RUNNER_BWRAP="/opt/bwrap"))
    assert (config.runner_config.pool_size, config.runner_config.queue) == (1, 4)
    assert config.runner_config.bwrap == "/opt/bwrap"
    assert Config.from_env(env()).runner_config == RunnerConfig()


@pytest.mark.parametrize(
    ("name", "raw"), [("RUNNER_POOL", "lots"), ("RUNNER_BACKEND", "vm"), ("RUNNER_BWRAP", "bwrap")]
)
def test_a_bad_runner_setting_is_a_config_error_on_one_line_naming_its_variable(name, raw):
    message = config_error(env(**{name: raw}))
    assert "\n" not in message
    assert name in message
    assert repr(raw) in message


@pytest.mark.parametrize(
    ("raw", "runner"),
    [
        ("", "embedded"),
        ("off", "off"),
        ("unix:///run/coursebot/runner.sock", "unix:///run/coursebot/runner.sock"),
        ("/run/coursebot/runner.sock", "unix:///run/coursebot/runner.sock"),
        ("tcp://127.0.0.1:7000", "tcp://127.0.0.1:7000"),
        ("tcp://:7000", "tcp://127.0.0.1:7000"),
    ],
)
def test_the_runner_address_is_read_from_its_variable(raw, runner):
    assert Config.from_env(env(COURSEBOT_RUNNER_URL=raw)).runner == runner


@pytest.mark.parametrize("raw", ["http://runner", "runner.sock", "tcp://localhost", "tcp://host:99999"])
def test_an_unknown_runner_address_is_refused_naming_the_variable(raw):
    message = config_error(env(COURSEBOT_RUNNER_URL=raw))
    assert message.startswith("COURSEBOT_RUNNER_URL")
    assert "\n" not in message
    assert repr(raw) in message


def test_the_readme_documents_every_runner_setting_with_the_bots_and_its_default():
    from runner.config import SETTINGS

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| `([^`]+)` \|", readme, re.MULTILINE))
    for setting in SETTINGS:
        assert rows.get(setting.variable) == setting.default(), setting.variable


def _readme_rows() -> dict[str, tuple[str, str]]:
    """The README's configuration table: variable -> (default cell, meaning cell), as written."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| variable | default | meaning |") :].splitlines()[2:]
    rows = {}
    for line in table:
        if not line.startswith("| `"):
            break
        variable, default, meaning = (cell.strip() for cell in line.strip("|").split(" | ", 2))
        rows[variable.strip("`")] = (default, meaning)
    return rows


def test_the_readme_states_every_bot_setting_with_its_default_and_meaning():
    from bot.config import SETTINGS
    from runner.config import SETTINGS as RUNNER_SETTINGS

    rows = _readme_rows()
    assert set(rows) == {s.variable for s in SETTINGS} | {s.variable for s in RUNNER_SETTINGS}
    for setting in SETTINGS:
        assert rows[setting.variable] == (setting.default(), setting.meaning), setting.variable


def test_every_setting_names_a_field_of_the_config_once():
    import dataclasses

    from bot.config import SETTINGS

    # db_url is COURSEBOT_DB's too: the setting holds a file's path (db_path) or a PostgreSQL URL (db_url).
    fields = {f.name for f in dataclasses.fields(Config)} - {"runner_config", "db_url"}
    assert sorted(s.field for s in SETTINGS) == sorted(fields)
    variables = [name for s in SETTINGS for name in s.variables]
    assert len(set(variables)) == len(variables)


def test_an_older_name_of_a_variable_is_still_read():
    assert Config.from_env(env(COURSEBOT_RUNNER="off")).runner == "off"
    assert Config.from_env(env(COURSEBOT_RUNNER="off", COURSEBOT_RUNNER_URL="embedded")).runner == "embedded"


@pytest.mark.parametrize("raw", ["9464", "host:port", "host:0", "host:70000", "[::1", "a b:1"])
def test_a_monitoring_address_that_is_not_host_and_port_is_one_line_naming_the_variable(raw):
    message = config_error(env(COURSEBOT_MONITORING=raw))
    assert message.startswith("COURSEBOT_MONITORING must be HOST:PORT") and repr(raw) in message


@pytest.mark.parametrize(
    ("raw", "address"), [("0.0.0.0:9464", ("0.0.0.0", 9464)), ("[::1]:9464", ("::1", 9464)), ("off", None)]
)
def test_the_monitoring_address_is_read_by_the_runners_address_parser(raw, address):
    assert Config.from_env(env(COURSEBOT_MONITORING=raw)).monitoring == address
