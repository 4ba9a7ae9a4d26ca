"""Seeded fuzzing of ``gpusight html``, ``diff`` and ``merge`` over report shapes and values: every
case ends with exit 0 (the report was valid and drawn) or 2 with one line on stderr, never an
internal error, a traceback or a hang (in-process calls of ``gpusight.cli.main``)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from gpusight.cli import main
from html_support import fixed_report, typical_report

SEED = 18
CASES = 400

VALUES: list[Any] = [
    -1,
    0,
    -0.0,
    1e308,
    -1e308,
    10**400,  # a valid JSON integer that no float holds
    2**63,
    1e-320,
    101,
    0.5,
    "",
    "x" * 10_000,
    "</script><!--<script>alert(1)</script>",
    "\u2028\u2029 \ud800 caf\u00e9 \U0001f600",
    "@@GPUSIGHT_SCRIPT@@",
    True,
    False,
    None,
    [],
    {},
    [1, 2, 3],
    {"a": {"b": [None]}},
    [[[[[[[[[[1]]]]]]]]]],
]


def _small(report: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(report)
    data["run"]["timeline"] = data["run"]["timeline"][:8]
    data["run"]["step_times_ms"] = data["run"]["step_times_ms"][:8]
    data["run"]["step_starts_s"] = data["run"]["step_starts_s"][:8]
    return data


ODD_NUMBERS: list[Any] = [0, -0.0, 1e308, 10**400, 2**63, 1e-320, 0.5, 100, 3]
ODD_STRINGS: list[str] = [v for v in VALUES if isinstance(v, str)]


def same_kind(node: Any, rng: random.Random) -> Any:
    """An odd value of the same JSON type (mostly still valid: the renderers' edge cases)."""
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, (int, float)):
        return rng.choice(ODD_NUMBERS)
    if isinstance(node, str):
        return rng.choice(ODD_STRINGS)
    if isinstance(node, list):
        return node * rng.choice([0, 2, 200])
    return node


def mutate(data: Any, rng: random.Random) -> Any:
    """A few random changes: values swapped for odd ones (of the same type or not), keys dropped
    or added, lists emptied or repeated."""
    kind_only = rng.random() < 0.6
    for _ in range(rng.randint(1, 4)):
        parent: Any = None
        key: Any = None
        node = data
        while isinstance(node, (dict, list)) and node and rng.random() < 0.75:
            k = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
            parent, key, node = node, k, node[k]
        if parent is None:
            continue
        op = rng.randrange(10)
        if kind_only:
            parent[key] = same_kind(node, rng)
        elif op == 0 and isinstance(parent, dict):
            del parent[key]
        elif op == 1 and isinstance(parent, dict):
            parent[rng.choice(["extra", "__proto__", "constructor", ""])] = rng.choice(VALUES)
        elif op == 2 and isinstance(node, list):
            parent[key] = node * rng.randint(0, 50)
        elif op == 3 and isinstance(node, (int, float)) and not isinstance(node, bool):
            parent[key] = node * rng.choice([-1, 0, 1e6, 1e300, 1e-300])
        else:
            parent[key] = copy.deepcopy(rng.choice(VALUES))
    return data


def damage_text(text: str, rng: random.Random) -> str:
    """The JSON text itself damaged: cut, a NaN, a stray byte, deep nesting."""
    op = rng.randrange(4)
    if op == 0:
        return text[: rng.randrange(len(text))]
    if op == 1:
        return text.replace(": 0", ": NaN", 1).replace(": 1", ": -Infinity", 1)
    if op == 2:
        i = rng.randrange(len(text))
        return text[:i] + rng.choice(["\x00", "}", '"', "\\", "\ufffd"]) + text[i:]
    depth = rng.choice([100, 5000, 200_000])
    return text[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.timeout(120)
def test_fuzz_html_diff_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    base = _small(typical_report().to_dict())
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_small(fixed_report().to_dict())))
    outcomes = {0: 0, 2: 0}
    for case in range(CASES):
        data = mutate(copy.deepcopy(base), rng)
        if rng.random() < 0.5:  # a rank's report, for merge
            run = data.get("run")
            if isinstance(run, dict):
                run["kernels"] = {"dist_rank": rng.choice([0, 1, 3]), "dist_world_size": 4}
        text = json.dumps(data, indent=1, allow_nan=True)
        if rng.random() < 0.15:
            text = damage_text(text, rng)
        path = tmp_path / f"case{case}.json"
        path.write_text(text, "utf-8", errors="surrogatepass")
        verb = ("html", "diff", "diff-after", "merge")[case % 4]
        argv = {
            "html": ["html", str(path), "-o", str(tmp_path / "out.html")],
            "diff": ["diff", str(path), str(other), "--html", str(tmp_path / "diff.html")],
            "diff-after": ["diff", str(other), str(path)],
            "merge": ["merge", str(path), "--json", str(tmp_path / "merged.json")],
        }[verb]
        code = main(argv)
        out = capsys.readouterr()
        where = f"case {case} ({verb}): {out.err[-2000:]}"
        assert code in (0, 2), where
        assert "Traceback" not in out.err and "internal error" not in out.err, where
        if code == 2:
            assert len(out.err.strip().splitlines()) == 1, where
        outcomes[code] += 1
    # Both kinds happen: the fuzzing reaches valid reports as well as refused ones.
    assert outcomes[0] > 30 and outcomes[2] > 30, outcomes
