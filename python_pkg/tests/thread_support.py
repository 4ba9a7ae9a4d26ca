"""One intra-op torch thread for a test module's tests: this machine has two shared cores, and
torch's thread pool adds wake-up jitter to a tiny step. Import ``one_thread`` into a module to
apply it (an autouse fixture applies wherever it is imported); the count is restored after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
