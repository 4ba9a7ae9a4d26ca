"""Leave the user's world as found: snapshot and restore everything a diagnosis could touch.

What-ifs run on copies, so the user's model and optimizer are never trained. The snapshot is the
second line of defence (a ``step_fn`` that trains a global model instead of its argument, an
experiment that flips a global flag and then raises) and it is what makes the promise testable:

- torch flags: TF32 (the legacy switches *and* the per-backend ``fp32_precision`` table of torch
  >= 2.9, restored entry by entry), cudnn benchmark/deterministic/enabled, deterministic
  algorithms, grad mode, default dtype and device, anomaly detection, threads, sync-debug mode;
- RNG: Python ``random``, numpy's global state (when numpy is imported), torch CPU and CUDA, and
  the ``torch.Generator`` objects of the user's DataLoader and samplers;
- model and loss module: training mode of every submodule, ``requires_grad``, parameters, buffers
  and gradients (a CPU copy of their values, written back only if a version counter moved);
- optimizer: hyperparameters of each param group and every state tensor.

Values are compared through tensor version counters (``Tensor._version``), which every in-place
op bumps, and, where a copy was kept, by value: a write through ``.data`` (``p.data.add_(...)``)
or a C++ kernel that updates in place without autograd (BatchNorm's running stats) moves no
counter. An untouched tensor is never written to.
"""

from __future__ import annotations

import copy
import random
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..knobs.tf32 import TF32
from .loaders import loader_generators


def _cuda_initialized() -> bool:
    return bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]


# --- torch flags --------------------------------------------------------------------------------

_FP32_PAIRS = (
    ("generic", "all"),
    ("cuda", "all"),
    ("cuda", "matmul"),
    ("cuda", "conv"),
    ("cuda", "rnn"),
    ("mkldnn", "all"),
    ("mkldnn", "matmul"),
    ("mkldnn", "conv"),
    ("mkldnn", "rnn"),
)


def _fp32_getter() -> Any:
    return getattr(torch._C, "_get_fp32_precision_getter", None)


def _read_cudnn_allow_tf32() -> bool:
    # torch >= 2.9 raises when the legacy switch and the new table disagree; the legacy value is
    # then the opposite of what the table says.
    try:
        return bool(torch._C._get_cudnn_allow_tf32())
    except RuntimeError:
        get = _fp32_getter()
        return not (get is not None and get("cuda", "conv") == TF32)


def _read_matmul_precision() -> str:
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        # torch >= 2.9 raises when the new per-backend table contradicts the legacy switch: the
        # way to get there is to set the table (e.g. cuda.matmul.fp32_precision = "tf32") and
        # never the legacy switch, which then still holds its default.
        return "highest"


def read_flags() -> dict[str, Any]:
    """Every global torch setting a diagnosis might change, as plain values."""
    flags: dict[str, Any] = {
        "float32_matmul_precision": _read_matmul_precision(),
        "cudnn.allow_tf32": _read_cudnn_allow_tf32(),
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "cudnn.benchmark_limit": getattr(torch.backends.cudnn, "benchmark_limit", None),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "grad_enabled": torch.is_grad_enabled(),
        "default_dtype": torch.get_default_dtype(),
        "anomaly_enabled": torch.is_anomaly_enabled(),
        "anomaly_check_nan": torch.is_anomaly_check_nan_enabled(),
        "num_threads": torch.get_num_threads(),
    }
    get = _fp32_getter()
    if get is not None:
        for backend, op in _FP32_PAIRS:
            try:
                flags[f"fp32_precision.{backend}.{op}"] = get(backend, op)
            except RuntimeError:  # a pair this torch does not have
                pass
    if hasattr(torch, "get_default_device"):
        flags["default_device"] = str(torch.get_default_device())
    for name in ("fp16", "bf16"):
        getter = getattr(torch._C, f"_get_cublas_allow_{name}_reduced_precision_reduction", None)
        if getter is not None:
            flags[f"cuda.matmul.allow_{name}_reduced_precision_reduction"] = getter()
    if torch.cuda.is_available() and _cuda_initialized():
        flags["cuda.sync_debug_mode"] = torch.cuda.get_sync_debug_mode()
    return flags


def _restore_tf32(want: dict[str, Any], have: dict[str, Any]) -> None:
    keys = [k for k in want if k.startswith("fp32_precision.")]
    keys += ["float32_matmul_precision", "cudnn.allow_tf32"]
    if all(want.get(k) == have.get(k) for k in keys):
        return
    # The legacy setters write several table entries; set them first, then the table exactly.
    torch.set_float32_matmul_precision(want["float32_matmul_precision"])
    torch._C._set_cudnn_allow_tf32(want["cudnn.allow_tf32"])
    setter = getattr(torch._C, "_set_fp32_precision_setter", None)
    if setter is not None:
        for backend, op in _FP32_PAIRS:
            key = f"fp32_precision.{backend}.{op}"
            if key in want:
                setter(backend, op, want[key])


def write_flags(want: dict[str, Any]) -> list[str]:
    """Set the flags back to ``want``; returns the names of those that had changed."""
    have = read_flags()
    changed = [k for k in want if have.get(k) != want[k]]
    if not changed:
        return []
    _restore_tf32(want, have)
    cudnn = torch.backends.cudnn
    if have["cudnn.benchmark"] != want["cudnn.benchmark"]:
        cudnn.benchmark = want["cudnn.benchmark"]
    if have["cudnn.deterministic"] != want["cudnn.deterministic"]:
        cudnn.deterministic = want["cudnn.deterministic"]
    if have["cudnn.enabled"] != want["cudnn.enabled"]:
        cudnn.enabled = want["cudnn.enabled"]
    if have["cudnn.benchmark_limit"] != want["cudnn.benchmark_limit"]:
        cudnn.benchmark_limit = want["cudnn.benchmark_limit"]
    if (have["deterministic_algorithms"], have["deterministic_warn_only"]) != (
        want["deterministic_algorithms"],
        want["deterministic_warn_only"],
    ):
        torch.use_deterministic_algorithms(
            want["deterministic_algorithms"], warn_only=want["deterministic_warn_only"]
        )
    torch.set_grad_enabled(want["grad_enabled"])
    if have["default_dtype"] != want["default_dtype"]:
        torch.set_default_dtype(want["default_dtype"])
    if (have["anomaly_enabled"], have["anomaly_check_nan"]) != (
        want["anomaly_enabled"],
        want["anomaly_check_nan"],
    ):
        torch.set_anomaly_enabled(want["anomaly_enabled"], want["anomaly_check_nan"])
    if have["num_threads"] != want["num_threads"]:
        torch.set_num_threads(want["num_threads"])
    if "default_device" in want and have.get("default_device") != want["default_device"]:
        # Setting "cpu" explicitly would install a device mode the user never had.
        dev = want["default_device"]
        torch.set_default_device(None if dev == "cpu" else dev)
    for name in ("fp16", "bf16"):
        key = f"cuda.matmul.allow_{name}_reduced_precision_reduction"
        if key in want and have.get(key) != want[key]:
            setattr(torch.backends.cuda.matmul, key.rsplit(".", 1)[1], want[key])
    if (
        "cuda.sync_debug_mode" in want
        and have.get("cuda.sync_debug_mode") != want["cuda.sync_debug_mode"]
    ):
        torch.cuda.set_sync_debug_mode(want["cuda.sync_debug_mode"])
    return changed


# --- RNG ----------------------------------------------------------------------------------------


@dataclass
class RngState:
    python: Any
    numpy: Any
    torch_cpu: torch.Tensor
    cuda: list[torch.Tensor] | None
    generators: list[tuple[torch.Generator, torch.Tensor]]

    @classmethod
    def capture(cls, generators: Iterable[torch.Generator] = ()) -> RngState:
        np = sys.modules.get("numpy")
        cuda = None
        if torch.cuda.is_available() and _cuda_initialized():
            cuda = [s.clone() for s in torch.cuda.get_rng_state_all()]
        return cls(
            python=random.getstate(),
            numpy=np.random.get_state() if np is not None else None,
            torch_cpu=torch.get_rng_state().clone(),
            cuda=cuda,
            generators=[(g, g.get_state().clone()) for g in generators],
        )

    def restore(self) -> None:
        random.setstate(self.python)
        np = sys.modules.get("numpy")
        if self.numpy is not None and np is not None:
            np.random.set_state(self.numpy)
        torch.set_rng_state(self.torch_cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        for g, state in self.generators:
            g.set_state(state)


# --- model, loss module and optimizer -----------------------------------------------------------


def _version(t: torch.Tensor) -> int:
    return int(getattr(t, "_version", 0))


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", copy=True)


@dataclass
class _TensorRecord:
    tensor: torch.Tensor
    version: int
    value: torch.Tensor | None  # host copy, None when the snapshot was too large to take
    device: torch.device | None = None


@dataclass
class _ParamRecord:
    param: torch.Tensor
    requires_grad: bool
    data: _TensorRecord
    grad: torch.Tensor | None
    grad_record: _TensorRecord | None


def _record(t: torch.Tensor, keep_values: bool) -> _TensorRecord:
    return _TensorRecord(t, _version(t), _host_copy(t) if keep_values else None, t.device)


def _changed(rec: _TensorRecord) -> bool:
    """Its version counter moved, or (where a copy was kept) its bits differ: ``p.data.add_()``
    and ``p.data = other`` write without bumping the parameter's counter."""
    if _version(rec.tensor) != rec.version:
        return True
    return rec.value is not None and not _same_bits(rec.value, rec.tensor)


def _put_back(rec: _TensorRecord) -> None:
    assert rec.value is not None
    with torch.no_grad():
        t = rec.tensor
        if t.shape != rec.value.shape or t.dtype != rec.value.dtype or t.device != rec.device:
            t.data = rec.value.to(rec.device, copy=True)  # ``p.data = other`` replaced it
        else:
            t.copy_(rec.value)
    rec.version = _version(rec.tensor)


def _write_back(rec: _TensorRecord) -> bool:
    """Copy the saved value back if the tensor changed; True if it had changed."""
    if not _changed(rec):
        return False
    if rec.value is None:
        raise RuntimeError("tensor changed and no copy of its value was kept")
    _put_back(rec)
    return True


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN equals NaN, -0.0 differs from 0.0): what restoring must reproduce."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(
        a.detach().reshape(-1).contiguous().view(torch.uint8),
        b.detach().to(a.device).reshape(-1).contiguous().view(torch.uint8),
    )


def _buffer_changed(rec: _TensorRecord) -> bool:
    """A buffer's version counter is not enough: BatchNorm updates running_mean/var (and
    num_batches_tracked) in place from C++ without bumping it (see ``_changed``)."""
    return _changed(rec)


def _write_back_buffer(rec: _TensorRecord) -> bool:
    """Put a buffer's saved value back if it differs (by value, not by version counter)."""
    return _write_back(rec)


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@dataclass
class ModuleState:
    modes: list[tuple[torch.nn.Module, bool]]
    params: list[_ParamRecord]
    buffers: list[_TensorRecord]

    @classmethod
    def capture(
        cls, module: torch.nn.Module, keep_values: bool, keep_buffers: bool | None = None
    ) -> ModuleState:
        params = []
        for p in module.parameters():
            g = p.grad
            params.append(
                _ParamRecord(
                    param=p,
                    requires_grad=p.requires_grad,
                    data=_record(p, keep_values),
                    grad=g,
                    grad_record=_record(g, keep_values) if g is not None else None,
                )
            )
        keep_b = keep_values if keep_buffers is None else keep_buffers
        buffers = [_record(b, keep_b) for b in module.buffers()]
        return cls([(m, m.training) for m in module.modules()], params, buffers)

    def restore(self) -> list[str]:
        changed: list[str] = []
        for m, training in self.modes:
            if m.training != training:
                m.train(training)
                changed.append("training mode")
        for rec in self.params:
            p = rec.param
            if p.requires_grad != rec.requires_grad:
                p.requires_grad_(rec.requires_grad)
                changed.append("requires_grad")
            if _write_back(rec.data):
                changed.append("weights")
            if p.grad is not rec.grad:
                p.grad = rec.grad
                changed.append("gradients")
            if rec.grad_record is not None and _write_back(rec.grad_record):
                changed.append("gradients")
        for b in self.buffers:
            if _write_back_buffer(b):
                changed.append("buffers")
        return sorted(set(changed))


@dataclass
class OptimizerState:
    optimizer: torch.optim.Optimizer
    hyper: list[dict[str, Any]]
    state_keys: list[tuple[int, list[str]]]
    tensors: list[tuple[dict[str, Any], str, _TensorRecord]]
    scalars: list[tuple[dict[str, Any], str, Any]]

    @classmethod
    def capture(cls, opt: torch.optim.Optimizer, keep_values: bool) -> OptimizerState:
        hyper = [
            copy.deepcopy({k: v for k, v in g.items() if k != "params"}) for g in opt.param_groups
        ]
        tensors: list[tuple[dict[str, Any], str, _TensorRecord]] = []
        scalars: list[tuple[dict[str, Any], str, Any]] = []
        keys: list[tuple[int, list[str]]] = []
        for p, st in opt.state.items():
            keys.append((id(p), sorted(st)))
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    tensors.append((st, k, _record(v, keep_values)))
                else:
                    scalars.append((st, k, copy.deepcopy(v)))
        return cls(opt, hyper, keys, tensors, scalars)

    def restore(self) -> list[str]:
        changed: list[str] = []
        for group, saved in zip(self.optimizer.param_groups, self.hyper, strict=True):
            now = {k: v for k, v in group.items() if k != "params"}
            if now != saved:
                for k in list(group):
                    if k != "params" and k not in saved:
                        del group[k]
                group.update(copy.deepcopy(saved))
                changed.append("hyperparameters")
        keys_now = [(id(p), sorted(st)) for p, st in self.optimizer.state.items()]
        if keys_now != self.state_keys:
            changed.append("state entries (could not be restored: restart from a checkpoint)")
        for st, k, rec in self.tensors:
            if st.get(k) is not rec.tensor:
                st[k] = rec.tensor
                changed.append("state")
            if _write_back(rec):
                changed.append("state")
        for st, k, value in self.scalars:
            if st.get(k) != value:
                st[k] = copy.deepcopy(value)
                changed.append("state")
        return sorted(set(changed))


@dataclass
class Snapshot:
    """Everything of the user's a diagnosis could touch, taken before it starts."""

    flags: dict[str, Any]
    rng: RngState
    modules: list[tuple[str, ModuleState]] = field(default_factory=list)
    optimizer: OptimizerState | None = None
    values_kept: bool = True

    @classmethod
    def capture(
        cls,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None = None,
        loss_fn: object = None,
        loader: object = None,
        max_copy_bytes: int | None = None,
    ) -> Snapshot:
        tensors = list(model.parameters()) + list(model.buffers())
        tensors += [p.grad for p in model.parameters() if p.grad is not None]
        if optimizer is not None:
            tensors += [
                v for st in optimizer.state.values() for v in st.values() if torch.is_tensor(v)
            ]
        keep = max_copy_bytes is None or tensor_bytes(tensors) <= max_copy_bytes
        # Buffers are compared by value (their version counters miss BatchNorm's updates), so
        # their copies are kept even when the weights are too large to copy.
        buffers = list(model.buffers())
        if isinstance(loss_fn, torch.nn.Module):
            buffers += list(loss_fn.buffers())
        keep_b = keep or max_copy_bytes is None or tensor_bytes(buffers) <= max_copy_bytes
        modules = [("model", ModuleState.capture(model, keep, keep_b))]
        if isinstance(loss_fn, torch.nn.Module) and loss_fn is not model:
            modules.append(("loss_fn", ModuleState.capture(loss_fn, keep, keep_b)))
        return cls(
            flags=read_flags(),
            rng=RngState.capture(loader_generators(loader) if loader is not None else ()),
            modules=modules,
            optimizer=OptimizerState.capture(optimizer, keep) if optimizer is not None else None,
            values_kept=keep,
        )

    def touched(self) -> list[str]:
        """What of the user's model and optimizer changed so far (version counters; buffers,
        whose in-place updates by BatchNorm do not bump them, by value)."""
        out: list[str] = []
        for name, st in self.modules:
            if any(_changed(r.data) for r in st.params) or any(
                _buffer_changed(b) for b in st.buffers
            ):
                out.append(f"{name} weights")
        if self.optimizer is not None and any(
            _changed(rec) for _, _, rec in self.optimizer.tensors
        ):
            out.append("optimizer state")
        return out

    def restore(self) -> list[str]:
        """Put everything back; returns what had changed (empty when nothing had)."""
        changed: list[str] = []
        # RNG and flags first: they cannot fail, and they matter even if a tensor copy does.
        self.rng.restore()
        changed += [f"torch flag {k}" for k in write_flags(self.flags)]
        for name, st in self.modules:
            changed += [f"{name} {what}" for what in st.restore()]
        if self.optimizer is not None:
            changed += [f"optimizer {what}" for what in self.optimizer.restore()]
        return changed
