"""A long check's log: each line printed at once and kept (and appended to a file as it comes,
so that a run stopped at its limit keeps its log), its sections, and the failures it counts."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class Log:
    def __init__(self, path: Path | None = None) -> None:
        self.lines: list[str] = []
        self.failures: list[str] = []
        self.path = path

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(text + "\n")

    def fail(self, name: str, exc: BaseException) -> None:
        """A failure counted, logged with its traceback."""
        self.failures.append(f"{name}: {type(exc).__name__}: {exc}")
        self(f"!!! {name} failed: {type(exc).__name__}: {exc}")
        self(traceback.format_exc())

    @contextmanager
    def section(
        self,
        name: str,
        *,
        at: str = "",
        skip: str | None = None,
        on_fail: Callable[[Exception], None] | None = None,
    ) -> Iterator[bool]:
        """``=== name`` (then ``at``), the block, ``--- name: N s``. A block that raises is a
        failure logged and counted, and the next section still runs; with ``skip`` (why), the
        block is told not to run (it gets False)."""
        self(f"\n=== {name}{at}")
        if skip is not None:
            self(f"--- {name}: {skip}")
            yield False
            return
        t0 = time.perf_counter()
        try:
            yield True
        except Exception as exc:
            self.fail(name, exc)
            if on_fail is not None:
                on_fail(exc)
        self(f"--- {name}: {time.perf_counter() - t0:.1f} s")

    def safe(self, name: str, fn: Callable[[], Any]) -> Any:
        """``fn()``; one that raises is a failure logged and counted, and gives None."""
        try:
            return fn()
        except Exception as exc:
            self.fail(name, exc)
            return None
