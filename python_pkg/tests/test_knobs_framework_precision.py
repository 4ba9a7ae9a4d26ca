"""Mixed precision through the framework's own switch, on the real frameworks (CPU).

A script that trains through Hugging Face's ``Trainer``, Lightning's ``Trainer`` or
``Accelerator`` gets its precision what-if through ``TrainingArguments(bf16=True)``,
``precision="bf16-mixed"`` or ``mixed_precision="bf16"`` (what its users switch on), not autocast
around the model's forward; the baseline's run says which framework the script used.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from gpusight.after_import import after_import
from gpusight.knobs import by_name, plan_groups, took_effect
from gpusight.knobs.framework_precision import observe, trained_through
from gpusight.rerun.inject import InjectError, install

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


def test_a_callback_runs_after_the_import_and_once_for_a_module_already_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "gs_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "late.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    remove = after_import({"gs_probe_pkg.late": lambda m: seen.append(m.VALUE)})
    try:
        assert seen == []
        import gs_probe_pkg.late  # noqa: F401

        assert seen == [1]
        again = after_import({"gs_probe_pkg.late": lambda m: seen.append(m.VALUE + 1)})
        assert seen == [1, 2]
        again()
    finally:
        remove()
        for name in ("gs_probe_pkg.late", "gs_probe_pkg"):
            sys.modules.pop(name, None)
    assert not any(type(f).__name__ == "_Finder" for f in sys.meta_path)


def test_a_failing_callback_leaves_the_import_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gs_probe_broken.py").write_text("VALUE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def boom(m: Any) -> None:
        raise AttributeError("no such class in this version")

    remove = after_import({"gs_probe_broken": boom})
    try:
        import gs_probe_broken

        assert gs_probe_broken.VALUE == 3
    finally:
        remove()
        sys.modules.pop("gs_probe_broken", None)


def test_training_arguments_get_bf16(tmp_path: Path) -> None:
    from transformers import TrainingArguments

    inj = install({"autocast": "bfloat16", "autocast_via": "transformers"})
    try:
        args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
        assert args.bf16 is True
        kept = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[], fp16=False)
        assert kept.bf16 is True
    finally:
        inj.undo()
    assert inj.applied.get("autocast") == 2
    assert TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[]).bf16 is False


def test_lightning_gets_bf16_mixed_and_an_explicit_choice_stays() -> None:
    import lightning as L

    inj = install({"autocast": "bfloat16", "autocast_via": "lightning"})
    try:
        kw = {"accelerator": "cpu", "logger": False, "enable_checkpointing": False}
        assert L.Trainer(**kw).precision == "bf16-mixed"
        assert L.Trainer(precision="64-true", **kw).precision == "64-true"
    finally:
        inj.undo()
    assert inj.applied.get("autocast") == 1
    assert L.Trainer(accelerator="cpu", logger=False).precision == "32-true"


def test_accelerator_gets_bf16() -> None:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    inj = install({"autocast": "bfloat16", "autocast_via": "accelerate"})
    try:
        assert Accelerator(cpu=True).mixed_precision == "bf16"
    finally:
        inj.undo()
        AcceleratorState._reset_state(True)
    assert inj.applied.get("autocast") == 1


def test_the_run_records_the_framework_that_trains(tmp_path: Path) -> None:
    import lightning as L

    seen, stop = observe()
    try:
        L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False)
    finally:
        stop()
    assert seen == ["lightning"]
    # The HF Trainer makes an Accelerator of its own: the Trainer is the switch to turn.
    assert trained_through(["accelerate", "transformers"]) == "transformers"
    assert trained_through([]) is None


def _facts(framework: str | None) -> dict[str, Any]:
    return {
        "cuda": True,
        "framework": framework,
        "model": {"autocast": False, "name": "BertForSequenceClassification"},
        "breakdown_ms": {"compute": 80.0, "launch_overhead": 20.0},
        "finding_ids": ["load.amp_unused"],
    }


def test_the_plan_names_the_frameworks_switch_and_the_fix_is_its_own() -> None:
    arm = next(g for g in plan_groups(_facts("transformers")) if g.name == "autocast").arms[0]
    assert arm.changes == {"autocast": "bfloat16", "autocast_via": "transformers"}
    assert "TrainingArguments" in arm.label
    knob = by_name("autocast")
    assert knob is not None
    fix = knob.fix(arm, 8, _facts("transformers"))
    assert fix.code is not None and "bf16=True" in fix.code
    ast.parse(fix.code)
    plain = next(g for g in plan_groups(_facts(None)) if g.name == "autocast").arms[0]
    assert plain.changes == {"autocast": "bfloat16"}
    assert "forward" in plain.label


def test_a_switch_never_turned_says_so() -> None:
    changes = {"autocast": "bfloat16", "autocast_via": "lightning"}
    why = took_effect({"injected": {}}, changes)
    assert why is not None and "precision=" in why
    assert took_effect({"injected": {"autocast": 1}}, changes) is None


def test_bad_switches_are_refused() -> None:
    with pytest.raises(InjectError, match="autocast_via must be one of"):
        install({"autocast": "bfloat16", "autocast_via": "keras"})
    with pytest.raises(InjectError, match="needs autocast"):
        install({"autocast_via": "lightning"})


def test_a_script_trained_through_lightning_gets_the_switch_in_its_rerun(tmp_path: Path) -> None:
    """End to end on the CPU: ``gpusight run --inject`` turns Lightning's switch on in an
    unmodified script (its trainer prints the precision it got)."""
    import subprocess

    script = tmp_path / "train_pl.py"
    script.write_text(
        textwrap.dedent(
            """
            import lightning as L
            trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False)
            print("PRECISION", trainer.precision)
            """
        )
    )
    facts = tmp_path / "facts.json"
    cmd = [sys.executable, "-m", "gpusight", "run", "--inject",
           '{"autocast": "bfloat16", "autocast_via": "lightning"}', "--facts", str(facts),
           "--json", str(tmp_path / "r.json"), str(script)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert "PRECISION bf16-mixed" in out.stdout, out.stderr[-2000:]
    import json

    data = json.loads(facts.read_text())
    assert data["framework"] == "lightning"
    assert data["injected"].get("autocast") == 1
