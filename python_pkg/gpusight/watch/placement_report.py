"""Where the modules the step called live, as the rules read it (``Placement``): the main model's
devices and inputs, and the parts of the called modules left on the CPU beside others on an
accelerator, each with the user's line that calls it."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..rules.workload import ModuleOnCpu, Placement
from .code_sources import call_source
from .placement import ModuleInfo

if TYPE_CHECKING:
    from .watched_run import WatchedRun


def placement(w: WatchedRun) -> Placement | None:
    called = {key: m for key, m in w.collected.modules.items() if m.calls > 0}
    if not called:
        return None
    main = max(called.values(), key=lambda m: (m.n_params, m.calls))
    p = Placement(
        module=main.name,
        param_devices=list(main.param_devices),
        input_devices=sorted(main.input_devices),
        dataparallel=any(m.dataparallel for m in called.values()),
        dataparallel_devices=next(
            (m.dataparallel_devices for m in called.values() if m.dataparallel), None
        ),
        has_conv=main.has_conv,
        input_channels_last=main.input_channels_last,
        model_channels_last=main.model_channels_last,
        autocast=main.autocast,
        autocast_dtype=main.autocast_dtype,
        batch_size=main.batch_size,
        grad_enabled=main.grad_enabled,
        batch_first=len(main.input_dim0s) == 1 if main.input_dim0s else None,
    )
    _split(w, called, p)
    return p


def _split(w: WatchedRun, called: dict[int, ModuleInfo], p: Placement) -> None:
    """The parts left on the CPU, where other modules' tensors are on an accelerator (a device
    type the watch counts as one: ``Watch(device_types=...)``)."""
    kinds = set(w.device_types)
    on = Counter(d for m in called.values() for d in m.tensor_devices if d in kinds)
    if not on or not any(m.cpu_parts for m in called.values()):
        return
    # The accelerator most modules use: the device the rest of the model is on.
    p.accelerator = on.most_common(1)[0][0]
    steps = _timed_steps(w)
    for key, m in called.items():
        if p.accelerator in m.tensor_devices:
            p.accelerator_params += m.n_params - sum(part.params for part in m.cpu_parts)
            src = call_source(w, key)
            if src is not None:
                p.accelerator_calls.append(src)
        if not m.cpu_parts:
            continue
        call = call_source(w, key)
        whole = m.cpu_parts[0].path == ""
        fwd = round(m.forward_ns / steps / 1e6, 3) if whole and steps and m.forward_ns else None
        p.cpu_modules.extend(
            ModuleOnCpu(part.path, part.cls, part.params, m.name, call, fwd) for part in m.cpu_parts
        )
    p.cpu_modules.sort(key=lambda c: -c.params)


def _timed_steps(w: WatchedRun) -> int:
    """The measured steps that ran the module hooks: those ``ModuleInfo.forward_ns`` covers."""
    rec = w.recorder
    return sum(r.phase == "measure" and r.full for r in rec.records) if rec is not None else 0
