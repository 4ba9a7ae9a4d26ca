"""docs/whatif.md lists every knob of the registry, as generated from it (issue #51: the faces
read the registry). Regenerate with ``python scripts/gen_knobs_doc.py`` after adding a knob."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from gpusight.finding_catalogue import CATALOGUE
from gpusight.knobs import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "gen_knobs_doc", ROOT / "scripts" / "gen_knobs_doc.py"
)
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def test_docs_whatif_md_is_up_to_date_and_names_every_knob_and_row() -> None:
    doc = (ROOT / "docs" / "whatif.md").read_text("utf-8")
    assert doc == gen.generate(), (
        "docs/whatif.md is out of date: run python scripts/gen_knobs_doc.py"
    )
    assert re.findall(r"^## `([a-z_0-9]+)`$", doc, re.M) == [k.name for k in REGISTRY]
    for knob in REGISTRY:
        for row in knob.local_rows():
            assert f"`{row.key}`" in doc
            assert row.procedure in gen.HOW


def test_each_knob_says_its_findings_and_they_are_the_catalogues() -> None:
    for knob in REGISTRY:
        assert knob.findings, knob.name
        assert set(knob.findings) <= set(CATALOGUE), knob.name
        assert {r.finding_id for r in knob.local_rows()} <= set(knob.findings), knob.name
