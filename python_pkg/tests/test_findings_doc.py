"""docs/findings.md lists every finding id the schema holds and the code raises, as generated.

Regenerate with ``python scripts/gen_findings_doc.py`` after adding an id (schema enum, an entry
in ``gpusight/finding_catalogue.py``, and the rule that raises it).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from gpusight.finding_catalogue import CATALOGUE, LAYERS
from gpusight.report_schema import finding_ids

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_findings_doc", ROOT / "scripts" / "gen_findings_doc.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_the_catalogue_holds_exactly_the_schema_ids() -> None:
    assert set(CATALOGUE) == set(finding_ids())
    assert {fid.split(".", 1)[0] for fid in finding_ids()} <= set(LAYERS)


def test_every_id_the_code_raises_is_in_the_schema_and_every_id_is_raised() -> None:
    raised = gen.scan(set(finding_ids()))
    assert set(raised) <= set(finding_ids())
    # No dead ids: each one has code that raises it (a rule, a benchmark or a what-if).
    assert set(raised) == set(finding_ids())
    # The scan sees what the rules say, so that an empty scan cannot pass.
    host_sync = raised["code.host_sync"]
    # The rule raises it; the statement knob picks it for a measured line that waits on the GPU,
    # the nan-check knob for the Trainer's own check of the loss.
    assert host_sync.modules == {"gpusight.rules.workload_findings", "gpusight.knobs.statement",
                                 "gpusight.knobs.nan_check"}  # fmt: skip
    assert "sync.defer_item" in host_sync.snippets
    assert raised["env.launch_blocking"].severities == {"critical", "warn"}


def test_the_scan_notices_an_id_outside_the_schema(tmp_path: Path) -> None:
    (tmp_path / "rule.py").write_text(
        "def r():\n"
        "    return Finding(id='load.made_up', severity='warn', title='t',\n"
        "        evidence=[Evidence('queue depth', 3)], fix=fix('Do less.', 'x.less'))\n"
    )
    raised = gen.scan({"load.input_bound"}, tmp_path)
    assert set(raised) == {"load.made_up"}
    assert raised["load.made_up"].evidence == ["queue depth"]
    assert raised["load.made_up"].snippets == {"x.less"}
    wrong = gen.problems(["load.input_bound"], {"load.input_bound"}, {"load.made_up"})
    assert wrong == ["load.made_up: raised by the code, not in the schema"]
    assert gen.problems(["a.b", "c.d"], {"a.b", "e.f"}, set()) == [
        "c.d: in the schema, not in finding_catalogue.py",
        "e.f: in finding_catalogue.py, not in the schema",
    ]


def test_docs_findings_md_is_up_to_date() -> None:
    doc = ROOT / "docs" / "findings.md"
    expected = gen.generate()
    assert doc.read_text("utf-8") == expected, (
        "docs/findings.md is out of date: run python scripts/gen_findings_doc.py"
    )
    listed = re.findall(r"^### `([a-z]+\.[a-z0-9_]+)`$", expected, re.M)
    assert listed == list(finding_ids())


@pytest.mark.parametrize("fid", finding_ids())
def test_each_entry_says_what_and_how(fid: str) -> None:
    entry = CATALOGUE[fid]
    assert entry.meaning.endswith(".") and len(entry.meaning) > 40
    assert entry.measured_by.endswith(".") and len(entry.measured_by) > 20


def test_the_scan_sees_the_finding_a_knob_or_an_experiment_picks(tmp_path: Path) -> None:
    (tmp_path / "knob.py").write_text(
        'FINDING = "load.input_bound"\n'
        "def _finding(s):\n"
        '    return "load.small_batch" if s else "load.launch_bound"\n'
        "class E:\n"
        '    finding_id = "cfg.tf32_disabled"\n'
        '    label = "load.amp_unused"  # a label, not a finding\n'
    )
    ids = {"load.input_bound", "load.small_batch", "load.launch_bound", "cfg.tf32_disabled",
           "load.amp_unused"}  # fmt: skip
    raised = gen.scan(ids, tmp_path)
    assert set(raised) == ids - {"load.amp_unused"}
    assert raised["load.input_bound"].modules == {"gpusight.knob"}
