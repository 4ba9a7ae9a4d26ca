"""The warm start's refusal names the import that started the CUDA driver (run42's
pyg_gin_molecules started every re-run afresh, 13 s each, for "an import" unnamed)."""

from __future__ import annotations

import sys
from typing import Any

from gpusight.rerun import warm_server


def alone(monkeypatch: Any) -> None:
    """No thread of other tests' (tqdm's monitor) in the way: the driver is the reason."""
    monkeypatch.setattr(warm_server.threading, "active_count", lambda: 1)


def test_the_refusal_names_the_first_import_that_started_the_driver(monkeypatch: Any) -> None:
    alone(monkeypatch)
    started = {"on": False}

    def driver() -> bool:
        started["on"] = started["on"] or "colorsys" in sys.modules
        return started["on"]

    monkeypatch.setattr(warm_server, "_cuda_driver_started", driver)
    monkeypatch.setattr(warm_server, "STARTED_BY", [None])
    monkeypatch.setattr(warm_server, "STOPPED_AT", [None])
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    done = warm_server.preload(["json", "colorsys", "wave:Error"])
    assert done == ["json", "colorsys", "wave:Error"]
    assert warm_server.STARTED_BY == ["colorsys"]
    # The name as asked, which a second server stops before (``warm_start``).
    assert warm_server.STOPPED_AT == ["colorsys"]
    why = warm_server.refusal([])
    assert why == "importing colorsys started the CUDA driver, which a forked process cannot use"


def test_an_unnamed_start_still_refuses(monkeypatch: Any) -> None:
    alone(monkeypatch)
    monkeypatch.setattr(warm_server, "_cuda_driver_started", lambda: True)
    monkeypatch.setattr(warm_server, "STARTED_BY", [None])
    assert warm_server.refusal([]) == (
        "an import started the CUDA driver, which a forked process cannot use"
    )
