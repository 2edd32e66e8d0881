"""The one exception type method implementations raise to refuse a call.

Everything that Telegram refuses is an ``ApiError``; the HTTP layer turns it into
Telegram's error JSON (``{"ok": false, "error_code": ..., "description": ...}``).
Keeping a single type means the transport never has to know *why* a call failed.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A refused Bot API call, carrying Telegram's status code and description."""

    def __init__(self, error_code: int, description: str, parameters: dict[str, Any] | None = None):
        super().__init__(description)
        self.error_code = error_code
        self.description = description
        self.parameters = parameters

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": False, "error_code": self.error_code, "description": self.description}
        if self.parameters:
            body["parameters"] = self.parameters
        return body


def bad_request(reason: str) -> ApiError:
    """Telegram prefixes every 400 description with "Bad Request: "."""
    return ApiError(400, f"Bad Request: {reason}")


def forbidden(reason: str) -> ApiError:
    return ApiError(403, f"Forbidden: {reason}")
