"""Fixtures the notebook-side tests share: IPython's process-wide shell with the extension
loaded (IPython allows one per process), and torch held to one thread while a test runs (the
watched loops time themselves; two cores shared with torch's own threads made them noisy)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpusight")
    return shell


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
