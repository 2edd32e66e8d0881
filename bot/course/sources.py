"""A translation's `sources:` block as the file format holds it: the English each translated part was made from.

Each part keeps its English fields as they were (read back here as plain data); older files keep only an
8-digit hash of them, a legacy stamp. How a stamp compares with the English as it is now, and how the block is
written, is the authors' side (bot.authoring.stamps).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

STAMP_LENGTH = 8  # hex digits of a legacy stamp's hash
LEGACY = re.compile(f"[0-9a-f]{{{STAMP_LENGTH}}}")  # used with fullmatch


def legacy_digest(snapshot: Mapping[str, Any]) -> str:
    """Return the hash older stamps kept of a part's English: its fields in order, checks as (id, fail) pairs."""
    fields = [list(value.items()) if isinstance(value, Mapping) else value for value in snapshot.values()]
    return hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()[:STAMP_LENGTH]


def plain(value: Any) -> Any:
    """Return YAML-read data as plain str, list and dict, for comparing what was stamped with what is current."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return value
