"""Request parameters: from query string, urlencoded, multipart or JSON body to a typed dict.

Telegram accepts all four encodings and treats every value as a string it parses per
field. PTB sends form fields and JSON-encodes every non-string value (reply_markup,
options, entities, correct_option_ids, allowed_updates, commands, ...: see
``telegram.request.RequestParameter.json_value``), so ints arrive as "123" and bools
as "true". Decoding once here lets the recorded params and the method code see real
types; unknown fields stay strings.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from aiohttp.web_request import FileField

from .errors import bad_request

JSON_FIELDS = frozenset(
    {
        "reply_markup",
        "options",
        "entities",
        "caption_entities",
        "explanation_entities",
        "question_entities",
        "description_entities",
        "text_entities",
        "correct_option_ids",
        "allowed_updates",
        "commands",
        "scope",
        "link_preview_options",
        "reply_parameters",
        "media",
        "menu_button",
        "message_ids",
        "country_codes",
        "reaction",
    }
)
INT_FIELDS = frozenset(
    {
        "chat_id",
        "message_id",
        "offset",
        "limit",
        "timeout",
        "user_id",
        "cache_time",
        "open_period",
        "close_date",
        "message_thread_id",
        "reply_to_message_id",
        "from_chat_id",
        "correct_option_id",
        "max_connections",
        "direct_messages_topic_id",
    }
)
BOOL_FIELDS = frozenset(
    {
        "disable_notification",
        "protect_content",
        "is_anonymous",
        "allows_multiple_answers",
        "is_closed",
        "show_alert",
        "drop_pending_updates",
        "disable_web_page_preview",
        "allow_sending_without_reply",
        "allows_revoting",
        "allow_adding_options",
        "hide_results_until_closes",
        "shuffle_options",
        "members_only",
        "allow_paid_broadcast",
        "show_caption_above_media",
        "has_spoiler",
        "disable_content_type_detection",
    }
)
_JSON_NAMES = {"reply_markup": "reply keyboard markup"}
_TRUE = frozenset({"true", "1", "True"})
_FALSE = frozenset({"false", "0", "False"})


async def read_params(request: web.BaseRequest) -> dict[str, Any]:
    """Merge query string and body parameters, as the Bot API server does."""
    params: dict[str, Any] = dict(request.query) if request.query_string else {}
    if request.body_exists:
        content_type = request.content_type
        if content_type == "application/json":
            try:
                body = json.loads(await request.read())
            except ValueError:
                raise bad_request("can't parse JSON object") from None
            if not isinstance(body, dict):
                raise bad_request("JSON object expected")
            params.update(body)
        elif content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.post()
            for name, value in form.items():
                params[name] = _uploaded(value) if isinstance(value, FileField) else value
    return decode(params)


def decode(params: dict[str, Any]) -> dict[str, Any]:
    """Turn the string values of known fields into JSON values, ints and bools."""
    for name, value in params.items():
        if not isinstance(value, str):
            continue
        if name in JSON_FIELDS:
            try:
                params[name] = json.loads(value)
            except ValueError:
                raise bad_request(f"can't parse {_JSON_NAMES.get(name, name)} JSON object") from None
        elif name in INT_FIELDS:
            try:
                params[name] = int(value)
            except ValueError:
                pass  # e.g. chat_id "@channel"; the method decides
        elif name in BOOL_FIELDS:
            if value in _TRUE:
                params[name] = True
            elif value in _FALSE:
                params[name] = False
    return params


def _uploaded(field: FileField) -> dict[str, Any]:
    """An uploaded file: its metadata and its bytes (the request's size limit bounds them)."""
    stream = field.file
    stream.seek(0)
    data = stream.read()
    return {
        "uploaded": True,
        "file_name": field.filename,
        "content_type": field.content_type,
        "size": len(data),
        "data": data,
    }


def integer(params: dict[str, Any], name: str, missing: str | None = None, default: int | None = None) -> int | None:
    """An int parameter; `missing` is Telegram's description when it is required and absent."""
    value = params.get(name)
    if value is None or value == "":
        if missing is not None:
            raise bad_request(missing)
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise bad_request(f'field "{name}" must be of type Integer')
    return value


def required_integer(params: dict[str, Any], name: str, missing: str) -> int:
    """A required int parameter; `missing` is Telegram's description when it is absent."""
    value = integer(params, name, missing)
    assert value is not None  # integer() raised for a missing one
    return value


def string(params: dict[str, Any], name: str, missing: str | None = None) -> str | None:
    value = params.get(name)
    if value is None:
        if missing is not None:
            raise bad_request(missing)
        return None
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def flag(params: dict[str, Any], name: str) -> bool:
    return params.get(name) is True
