"""What a report keeps when it leaves the machine as a file to share (the HTML page): no host
name, and no path that names the user or the environment (the home folder reads ``~``, the
Python environment ``<python env>``). The JSON report keeps everything: it is the data."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

HOST_KEYS = ("hostname",)


def private_parts() -> list[tuple[str, str]]:
    """(text, what it reads instead), longest first: the environment before the home folder
    it usually lies in."""
    parts = []
    for path, shown in ((sys.prefix, "<python env>"), (sys.base_prefix, "<python>"),
                        (os.path.expanduser("~"), "~")):  # fmt: skip
        if path and path not in ("/", "~") and len(path) > 1:
            parts.append((os.path.realpath(path), shown))
            parts.append((path, shown))
    return sorted(set(parts), key=lambda p: -len(p[0]))


def shared(data: Any, parts: list[tuple[str, str]] | None = None) -> Any:
    """``data`` (a report's dict) with its host name left out and private paths replaced."""
    parts = private_parts() if parts is None else parts
    if isinstance(data, str):
        for text, shown in parts:
            if text in data:
                data = data.replace(text, shown)
        return data
    if isinstance(data, Mapping):
        return {k: shared(v, parts) for k, v in data.items() if k not in HOST_KEYS}
    if isinstance(data, list):
        return [shared(v, parts) for v in data]
    return data
