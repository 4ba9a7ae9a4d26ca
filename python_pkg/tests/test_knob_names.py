"""A knob's change is written once, in ``knobs/`` (issue #51): the two what-if drivers (``whatif/``
in the kernel, ``rerun/`` re-running the script) read it from the registry.

Found by reading each driver module's tokens: a knob's change key as a name or as a whole string
literal. The drivers still name some keys where they feed the step (the DataLoader's arguments,
autocast around the step, the combined loop's inputs); those are listed here with why, and the
list may only shrink: a new one fails this test.
"""

from __future__ import annotations

import ast
import builtins
import tokenize
from pathlib import Path

from gpusight.knobs import REGISTRY
from gpusight.knobs.base import Knob

PKG = Path(__file__).resolve().parents[1] / "gpusight"

# Where a driver still names a change key, and why.
STILL_NAMED: dict[str, set[str]] = {
    # how the kernel's copies take a change: the inputs' layout, a larger batch, the loader's
    # arguments on a clone
    "whatif/arms.py": {"batch_size", "channels_last", "persistent_workers", "to_device"},
    "whatif/batch_sweep.py": {"batch_size", "num_workers"},
    "whatif/context.py": {"batch_size", "num_workers"},
    "whatif/findings.py": {"batch_size"},  # the DataLoader call's batch, from the sweep's factor
    # the graph row's param (report API): whether the replayed forward ran under autocast
    "whatif/inference.py": {"autocast"},
    "whatif/loaders.py": {"batch_size", "num_workers", "persistent_workers", "prefetch_factor"},
    "whatif/procedures.py": {
        "num_workers",
        "persistent_workers",
        "pin_memory",
        "prefetch_factor",
    },
}


def _keys() -> set[str]:
    return {key for k in REGISTRY for key in (*k.keys, *(r.key for r in k.local_rows()))}


def _not_a_change(before: list[tokenize.TokenInfo], name: str) -> bool:
    """Python's own (a builtin such as ``compile``, ``re.compile``), or a knob's module read
    from the registry's package (``knobs.tf32``): not a driver naming a change."""
    if len(before) >= 2 and before[-1].string == ".":
        return before[-2].string in ("re", "knobs")
    return hasattr(builtins, name)


def _named(path: Path, keys: set[str]) -> set[str]:
    found: set[str] = set()
    before: list[tokenize.TokenInfo] = []
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            value: object = None
            if tok.type == tokenize.NAME and not _not_a_change(before, tok.string):
                value = tok.string
            elif tok.type == tokenize.STRING:
                try:
                    value = ast.literal_eval(tok.string)
                except (ValueError, SyntaxError):
                    continue
            if isinstance(value, str) and value in keys:
                found.add(value)
            before = [*before[-1:], tok]
    return found


def _drivers() -> dict[str, set[str]]:
    keys = _keys()
    out = {}
    for folder in ("whatif", "rerun"):
        for path in sorted((PKG / folder).glob("*.py")):
            got = _named(path, keys)
            if got:
                out[f"{folder}/{path.name}"] = got
    return out


def test_the_drivers_name_no_knobs_change_beyond_the_list_of_where_they_still_do() -> None:
    found = _drivers()
    new = {f: sorted(v - STILL_NAMED.get(f, set())) for f, v in found.items()}
    assert not {f: v for f, v in new.items() if v}, "a driver names a knob's change: move it"
    gone = {f: sorted(v - found.get(f, set())) for f, v in STILL_NAMED.items()}
    # A name the drivers no longer write comes off the list, so that it cannot come back.
    assert not {f: v for f, v in gone.items() if v}


def test_a_knob_that_is_only_torchs_flags_is_written_in_its_module_alone() -> None:
    flags = [k for k in REGISTRY if type(k).flags_on is not Knob.flags_on]
    assert {k.name for k in flags} >= {"tf32", "cudnn_benchmark"}
    found = _drivers()
    for knob in flags:
        for key in knob.keys:
            where = sorted(f for f, v in found.items() if key in v and f != "whatif/restore.py")
            assert where == [], (knob.name, where)
        # Both drivers turn it on through flags_on, and the combined loop says it in its lines.
        assert knob.setup_code, knob.name
