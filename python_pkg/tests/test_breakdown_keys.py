"""The step-time breakdown's categories come from the schema's Breakdown alone; the tables keyed
by them name those categories and no others."""

from __future__ import annotations

import re
from pathlib import Path

from gpusight.compare import BREAKDOWN_LABELS
from gpusight.report_schema import breakdown_keys, load_schema
from gpusight.rules.workload import BREAKDOWN_KEYS, CATEGORY_BOTTLENECK, REPORTED_KEYS
from gpusight.watch.trace_analysis import CATEGORIES

ROOT = Path(__file__).resolve().parents[2]


def test_the_keys_are_the_schemas_in_its_order() -> None:
    schema_keys = tuple(load_schema()["definitions"]["Breakdown"]["properties"])
    assert breakdown_keys() == schema_keys == REPORTED_KEYS
    assert BREAKDOWN_KEYS == tuple(k for k in schema_keys if k != "between_steps")


def test_the_trace_split_counts_the_steps_own_categories() -> None:
    # In its priority order, not the schema's: the same set.
    assert len(CATEGORIES) == len(set(CATEGORIES))
    assert set(CATEGORIES) == set(BREAKDOWN_KEYS)


def test_the_tables_keyed_by_category_name_only_categories() -> None:
    assert set(BREAKDOWN_LABELS) == set(REPORTED_KEYS)
    assert set(CATEGORY_BOTTLENECK) <= set(BREAKDOWN_KEYS)


def test_the_typescript_reads_the_generated_keys() -> None:
    generator = (ROOT / "scripts/gen-report-types.mjs").read_text("utf-8")
    assert "export const BREAKDOWN_KEYS" in generator
    assert "definitions.Breakdown.properties" in generator
    # No TypeScript module outside the generated ones lists the categories again.
    listing = re.compile(r"\[\s*'compute',\s*'data_wait',", re.S)
    for path in (ROOT / "src").rglob("*.ts"):
        if "generated" in path.parts or path.name.endswith(".spec.ts"):
            continue
        assert not listing.search(path.read_text("utf-8")), path
