"""Whether a model's calls can be captured in a CUDA graph, from what the watched run saw.

A CUDA graph (``torch.compile(mode="reduce-overhead")``) replays the kernels it recorded, with
the shapes and addresses it recorded. It is unsafe, or silently slower, where the captured calls

- read a GPU value on the host (``.item()``, ``.cpu()``, ``nonzero``, ...): a sync inside the
  model is either host-dependent control flow, which a replay cannot follow, or a graph break;
- change shape from call to call (variable-length sequences, ragged graph batches): each new
  shape is a new recording, and its memory pool;
- take inputs that live on the CPU, or a model whose parameters do.

Syncs in the loop outside the model (a ``loss.item()`` for logging) are no blocker: the graph
covers the model's calls only, and the step still waits there; the check names them as what
stays. Each blocker names its line, so the user sees what to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_SHAPES = 2
"""More distinct input shapes than this among the first calls: shapes that change every step
(two allow for an epoch's last, shorter batch)."""


@dataclass(frozen=True)
class Blocker:
    what: str
    where: str | None = None
    """``file:line`` of the code that blocks the capture, where one line does."""

    def text(self) -> str:
        return f"{self.what} ({self.where})" if self.where else self.what


def _where(sync: dict[str, Any]) -> str | None:
    shown, line = sync.get("file"), sync.get("line")
    return f"{shown}:{line}" if shown and line else None


def _code(sync: dict[str, Any]) -> str:
    code = str(sync.get("code") or "").strip()
    return f"`{code}`" if code else f"a {sync.get('kind') or 'host'} sync"


def sync_blockers(facts: dict[str, Any]) -> list[Blocker]:
    """Syncs made while the model's call was in flight, most frequent first."""
    syncs = [s for s in facts.get("syncs") or [] if int(s.get("in_model") or 0) > 0]
    syncs.sort(key=lambda s: -int(s.get("in_model") or 0))
    return [
        Blocker(
            f"{_code(s)} reads a GPU value on the host inside the model's call: a CUDA graph "
            "cannot replay host-dependent work",
            _where(s),
        )
        for s in syncs
    ]


def shape_blockers(facts: dict[str, Any]) -> list[Blocker]:
    shapes = ((facts.get("model") or {}).get("input_shapes")) or []
    if len(shapes) <= MAX_SHAPES:
        return []
    shown = ", ".join("x".join(str(n) for n in s) for s in shapes[:3])
    return [
        Blocker(
            f"the model's input shape changes from call to call ({shown}, ...): each shape is "
            "recorded again; pad or bucket the batches to a few fixed shapes first",
            None,
        )
    ]


def placement_blockers(facts: dict[str, Any]) -> list[Blocker]:
    m = facts.get("model") or {}
    where = [*(m.get("param_devices") or []), *(m.get("input_devices") or [])]
    if "cpu" not in where:
        return []
    return [Blocker("the model or its inputs are on the CPU: a CUDA graph holds GPU work only")]


def blockers(facts: dict[str, Any]) -> list[Blocker]:
    """What stops the model's calls from being captured in a CUDA graph (empty: nothing seen)."""
    return [*placement_blockers(facts), *sync_blockers(facts), *shape_blockers(facts)]


def staying_syncs(facts: dict[str, Any]) -> list[str]:
    """The step's syncs outside the model (``file:line``): a graph of the model leaves them."""
    return [
        w
        for s in facts.get("syncs") or []
        if int(s.get("count") or 0) > int(s.get("in_model") or 0) and (w := _where(s))
    ]
