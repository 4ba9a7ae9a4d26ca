"""A knob's change is written once, in ``knobs/`` (issue #51): the two what-if drivers (``whatif/``
in the kernel, ``rerun/`` re-running the script) read it from the registry.

Found by reading each driver module's tokens: a knob's change key as a name or as a whole string
literal. A driver reads a DataLoader's arguments, a report row's parameters and a change's keys
through the knobs (``knobs/loader.py``, ``knobs/dataloader.py``, ``knobs/batch.py``).
"""

from __future__ import annotations

import ast
import builtins
import tokenize
from pathlib import Path

from gpusight.knobs import REGISTRY
from gpusight.knobs.base import Knob

PKG = Path(__file__).resolve().parents[1] / "gpusight"


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


def test_the_drivers_name_no_knobs_change() -> None:
    assert _drivers() == {}, "a driver names a knob's change: read it from the knob"


def test_the_search_finds_a_key_as_a_name_an_argument_and_a_string(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "w = loader.num_workers\n"
        "clone(dl, pin_memory=True)\n"
        "changes = {'prefetch_factor': 4}\n"
        "label = f'batch_size={n}'\n"  # a label's text is not the key
        "flags = knobs.tf32\n"  # a knob's module, read from the registry's package
    )
    assert _named(probe, _keys()) == {"num_workers", "pin_memory", "prefetch_factor"}


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
