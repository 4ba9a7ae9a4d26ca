"""A sync inside a library's line whose fix is an option of that library: the option written
into the user's own call that sets the library up (the script's one ``TrainingArguments(...)``,
its Lightning progress bar), as a diff that applies and still parses."""

from __future__ import annotations

import ast

from gpusight.fixes.diff_apply import apply, parse
from gpusight.report import Finding
from gpusight.rules.workload import CodeSource, GpuWindow, SyncSite, WorkloadEvidence, analyse

LIB = "/venv/lib/python3.12/site-packages"

HF = """\
from transformers import Trainer, TrainingArguments

args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=8,
    report_to=[],
)
trainer = Trainer(model=model, args=args, train_dataset=train_ds)
trainer.train()
"""

LIGHTNING = """\
import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar

trainer = L.Trainer(max_epochs=3, callbacks=[TQDMProgressBar()])
trainer.fit(model, loader)
"""

LIGHTNING_NO_BAR = """\
import lightning as L

trainer = L.Trainer(max_epochs=3)
trainer.fit(model, loader)
"""


def sync_finding(site: SyncSite, src: CodeSource | None) -> Finding:
    split = {"compute": 55.0, "sync_stall": 40.0, "launch_overhead": 5.0}
    ev = WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[100.0] * 6,
        cuda_available=True,
        cuda_devices=1,
        window=GpuWindow(steps=3, gpu=True, split_ms=split),
        syncs=[site],
        forward_source=src,
    )
    f = next((f for f in analyse(ev).findings if f.id == "code.host_sync"), None)
    assert f is not None
    return f


def patched(f: Finding, src: CodeSource) -> str:
    assert f.fix.patch is not None, f.fix
    (diff,) = parse(f.fix.patch)
    assert diff.path == src.path and [p.path for p in f.fix.patch_files] == [src.path]
    out = apply(src.text, diff)
    ast.parse(out)
    return out


def hf_nan_check() -> SyncSite:
    return SyncSite(kind="sync", count=170, file=f"{LIB}/transformers/trainer.py", line=1959,
                    code="and (torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step))",
                    idle_ms=25.3)  # fmt: skip


def test_the_trainers_nan_check_is_turned_off_in_the_scripts_training_arguments() -> None:
    src = CodeSource("train.py", HF, 9)
    f = sync_finding(hf_nan_check(), src)
    out = patched(f, src)
    (call,) = [n for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Call)
               and getattr(n.func, "id", None) == "TrainingArguments"]  # fmt: skip
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert keywords == {"output_dir": "out", "per_device_train_batch_size": 8, "report_to": [],
                        "logging_nan_inf_filter": False}, out  # fmt: skip
    assert any(e.label == "change" and e.value == "logging_nan_inf_filter=False"
               for e in f.evidence)  # fmt: skip


def test_no_single_call_to_patch_leaves_the_fix_as_text() -> None:
    """Two TrainingArguments in the file (which one trains is not known), none at all, or a
    notebook cell: the option named, no diff."""
    two = HF + 'eval_args = TrainingArguments(output_dir="eval")\n'
    for text in (two, "import train_lib\ntrain_lib.main()\n"):
        f = sync_finding(hf_nan_check(), CodeSource("train.py", text, 2))
        assert f.fix.patch is None and "logging_nan_inf_filter=False" in (f.fix.code or "")
    f = sync_finding(hf_nan_check(), None)
    assert f.fix.patch is None and "logging_nan_inf_filter=False" in (f.fix.code or "")


def test_lightnings_bar_read_is_patched_as_the_scripts_bar_redrawn_less_often() -> None:
    site = SyncSite(kind="sync", count=120,
                    file=f"{LIB}/lightning/fabric/utilities/apply_func.py", line=134,
                    code="return value.item()", idle_ms=30.0)  # fmt: skip
    src = CodeSource("fit.py", LIGHTNING, 5)
    out = patched(sync_finding(site, src), src)
    assert "TQDMProgressBar(refresh_rate=50)" in out
    # A file that makes no bar of its own runs Lightning's default one: the switch turns it off.
    bare = CodeSource("fit.py", LIGHTNING_NO_BAR, 4)
    f = sync_finding(site, bare)
    assert "enable_progress_bar=False" in patched(f, bare)
    assert f.fix.code == "Trainer(..., enable_progress_bar=False)"


def test_a_library_check_with_no_keyword_gets_no_patch() -> None:
    """The model's padding check is fixed by calling the model without attention_mask, which
    depends on the data: named, not written."""
    site = SyncSite(kind="sync", count=85, file=f"{LIB}/transformers/masking_utils.py",
                    line=331, code="and (padding_mask is None or padding_mask.all())",
                    idle_ms=50.0)  # fmt: skip
    f = sync_finding(site, CodeSource("train.py", HF, 9))
    assert f.fix.patch is None and "attention_mask" in (f.fix.code or "")
