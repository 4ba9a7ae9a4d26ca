"""The trainer callbacks watch a window of real training steps, on the CPU, with the real
frameworks (Hugging Face ``Trainer``, Lightning ``Trainer``): a report of that many steps,
written where a script's report goes, and nothing left installed afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import gpusight  # noqa: E402
from gpusight.integrations.window import StepWindow  # noqa: E402
from gpusight.report_schema import validate  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    # Two shared cores: one intra-op thread keeps the steps calm.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def assert_released() -> None:
    """Every hook came off: a new watch can start and sees its own steps only."""
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gpusight.watch(steps=2, warmup=0, profile_steps=0) as w:
        for _ in range(5):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    assert w.report is not None and w.report.run is not None
    assert w.report.run["steps"] == 2


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="steps must be at least 1, got 0"):
        StepWindow(steps=0)
    with pytest.raises(ValueError, match="must not be negative"):
        StepWindow(start_step=-1)


# --- Hugging Face -------------------------------------------------------------------------------


class TinyRegressor(torch.nn.Module):
    """What Trainer expects of a model: keyword inputs, a loss in the output."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
        )

    def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
        out = self.net(x).squeeze(-1)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


def hf_trainer(tmp_path: Path, callback: Any, max_steps: int = 14, model: Any = None) -> Any:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    torch.manual_seed(0)
    data = [{"x": torch.randn(32), "labels": torch.randn(())} for _ in range(256)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=max_steps,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        use_cpu=True,
        dataloader_num_workers=0,
    )
    return transformers.Trainer(
        model=model or TinyRegressor(),
        args=args,
        train_dataset=data,
        callbacks=[callback] if callback is not None else [],
    )


def test_hf_callback_watches_a_window_and_writes_the_report(tmp_path: Path) -> None:
    from gpusight.integrations.huggingface import REPORT_NAME, GpusightCallback

    callback = GpusightCallback(steps=6, warmup=2, profile_steps=2, start_step=3, display=False)
    trainer = hf_trainer(tmp_path, callback)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()

    report = callback.report
    assert report is not None and report.kind == "watch"
    assert report.run is not None and report.run["steps"] == 6
    validate(report.to_dict())
    # A script's report goes to the trainer's output_dir.
    assert callback.window.written == tmp_path / "out" / REPORT_NAME
    page = (tmp_path / "out" / REPORT_NAME).read_text("utf-8")
    assert page.lower().startswith("<!doctype html>") and 'data-gpusight="report"' in page
    # The training itself went on to max_steps and trained the model.
    assert trainer.state.global_step == 14
    assert any(
        not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True)
    )
    assert_released()


def test_hf_window_after_training_ended_gives_no_report(tmp_path: Path) -> None:
    from gpusight.integrations.huggingface import GpusightCallback

    callback = GpusightCallback(steps=4, start_step=50, display=False)
    hf_trainer(tmp_path, callback, max_steps=5).train()
    assert callback.report is None and callback.window.written is None
    assert not (tmp_path / "out" / "gpusight-report.html").exists()
    assert_released()


def test_hf_watch_train_releases_the_watch_when_training_raises(tmp_path: Path) -> None:
    from gpusight.integrations.huggingface import watch_train

    class Boom(TinyRegressor):
        calls = 0

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            Boom.calls += 1
            if Boom.calls == 4:
                raise RuntimeError("the model raised")
            return super().forward(x, labels)

    trainer = hf_trainer(tmp_path, callback=None, model=Boom())
    with pytest.raises(RuntimeError, match="the model raised"):
        watch_train(trainer, steps=8, warmup=0, profile_steps=0, output=tmp_path / "r.json")
    # The window closed with what it had: a valid report of the steps before the error.
    assert gpusight.load_report(tmp_path / "r.json")["kind"] == "watch"
    assert_released()


# --- Lightning ----------------------------------------------------------------------------------


def lightning_fit(tmp_path: Path, callback: Any, max_steps: int = 14, fail_at: int = -1) -> Any:
    L = pytest.importorskip("lightning.pytorch")

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
            )

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            if batch_idx == fail_at:
                raise RuntimeError("the step raised")
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=1e-3)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(256, 32), torch.randn(256))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=max_steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path / "root"),
        callbacks=[callback],
    )
    trainer.fit(Tiny(), loader)
    return trainer


def test_lightning_callback_watches_a_window_and_writes_the_report(tmp_path: Path) -> None:
    from gpusight.integrations.lightning import REPORT_NAME, GpusightCallback

    callback = GpusightCallback(steps=6, warmup=2, profile_steps=2, start_step=2, display=False)
    trainer = lightning_fit(tmp_path, callback)
    report = callback.report
    assert report is not None and report.kind == "watch"
    assert report.run is not None and report.run["steps"] == 6
    validate(report.to_dict())
    assert callback.window.written == tmp_path / "root" / REPORT_NAME
    assert trainer.global_step == 14
    assert_released()


def test_lightning_callback_closes_when_the_step_raises(tmp_path: Path) -> None:
    from gpusight.integrations.lightning import GpusightCallback

    callback = GpusightCallback(
        steps=20, warmup=0, profile_steps=0, output=tmp_path / "r.json", display=False
    )
    with pytest.raises(RuntimeError, match="the step raised"):
        lightning_fit(tmp_path, callback, fail_at=5)
    assert callback.report is not None
    assert gpusight.load_report(tmp_path / "r.json")["kind"] == "watch"
    assert_released()
