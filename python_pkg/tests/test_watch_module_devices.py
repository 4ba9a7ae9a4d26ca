"""Where each part of a module the step calls holds its tensors (watch/module_devices.py): the
largest parts left on the CPU beside others on an accelerator, read from real torch modules.
"meta" stands in for the GPU: a real device type, holding real parameters."""

from __future__ import annotations

from collections import OrderedDict

import torch
from gpusight.watch.module_devices import CpuPart, cpu_parts
from gpusight.watch.placement import inspect_module
from torch import nn


def n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_the_parts_on_the_cpu_are_the_largest_whole_subtrees() -> None:
    head = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.Linear(32, 4))
    backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU()).to("meta")
    model = nn.Sequential(OrderedDict(backbone=backbone, head=head))
    assert cpu_parts(model) == [CpuPart("head", "Sequential", n_params(head))]
    # A part that holds only a buffer on the CPU is one too (0 parameters).
    norm = nn.Module()
    norm.register_buffer("mean", torch.zeros(16))
    model2 = nn.Sequential(OrderedDict(norm=norm, body=nn.Linear(16, 4).to("meta")))
    assert cpu_parts(model2) == [CpuPart("norm", "Module", 0)]
    # All on one device: nothing split; all on the CPU: the module itself.
    assert cpu_parts(backbone) == []
    assert cpu_parts(head) == [CpuPart("", "Sequential", n_params(head))]
    info = inspect_module(model)
    assert info.tensor_devices == ["cpu", "meta"] and info.cpu_parts == cpu_parts(model)
