"""Where the model and its inputs live, read at the outermost module call (torch side)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .module_devices import CpuPart, cpu_parts, tensor_devices

# Look at this many calls of each top-level module; placement rarely changes after that.
INSPECT_CALLS = 20
MAX_SHAPES = 8
MAX_PARTS = 8


@dataclass
class ModuleInfo:
    name: str
    n_params: int
    param_devices: list[str]
    dataparallel: bool
    dataparallel_devices: int | None
    has_conv: bool
    model_channels_last: bool | None
    calls: int = 0
    input_devices: set[str] = field(default_factory=set)
    batch_size: int | None = None
    input_channels_last: bool | None = None
    autocast: bool = False
    autocast_dtype: str | None = None
    grad_enabled: bool | None = None
    input_dim0s: set[int] = field(default_factory=set)
    """The leading sizes of the tensors the model was called with (positional arguments): one
    size is a batch-first call; several (a graph's ``edge_index``, a recurrent state) are not."""
    input_opaque: set[str] = field(default_factory=set)
    """Types of positional arguments that are neither tensors nor plain containers of them (a
    graph batch object): their tensors' batch dimension is not known."""
    input_shape: list[int] | None = None
    """The first input tensor's shape, at the first call."""
    input_shapes: set[tuple[int, ...]] = field(default_factory=set)
    """The first input tensor's distinct shapes over the inspected calls (at most
    ``MAX_SHAPES``): shapes that change from step to step."""
    float64_params: int = 0
    """Of ``n_params``, the elements of float64 parameters (``float64_math``)."""
    float64_parts: list[str] = field(default_factory=list)
    """The model's own attributes that hold them: its children and its direct parameters, by
    the names the user gave them (at most ``MAX_PARTS``)."""
    input_dtypes: set[str] = field(default_factory=set)
    """The floating dtypes of the tensors the model was called with (``float32``, ...)."""
    module_ids: set[int] = field(default_factory=set)
    """``id`` of the model and of each module inside it, where it holds float64 parameters:
    the ``.double()`` of an inner module or of a model later wrapped (DDP) is this model's."""
    tensor_devices: list[str] = field(default_factory=list)
    """The device types of its parameters and buffers."""
    cpu_parts: list[CpuPart] = field(default_factory=list)
    """Its largest parts whose tensors are all on the CPU (itself, where it all is)."""
    forward_ns: int = 0
    """Host time inside its calls over the measured steps that ran the module hooks: on the
    CPU, the host time of a forward is its compute."""


def _layout(t: Any) -> bool | None:
    """True for channels_last, False for NCHW-contiguous, None when the two coincide."""
    import torch

    if t.dim() != 4:
        return None
    cl = bool(t.is_contiguous(memory_format=torch.channels_last))
    nchw = bool(t.is_contiguous())
    if cl == nchw:
        return None
    return cl


def inspect_module(module: Any) -> ModuleInfo:
    import torch

    devices: set[str] = set()
    n = n64 = 0
    f64 = torch.float64
    for p in module.parameters():
        devices.add(p.device.type)
        k = p.numel()
        n += k
        if p.dtype is f64:
            n64 += k
    convs = [m for m in module.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d))]
    model_cl = _layout(convs[0].weight) if convs and convs[0].weight.dim() == 4 else None
    dp = isinstance(module, torch.nn.DataParallel)
    held = tensor_devices(module)
    return ModuleInfo(
        name=type(module).__name__,
        n_params=n,
        param_devices=sorted(devices),
        dataparallel=dp,
        dataparallel_devices=len(module.device_ids or []) if dp else None,
        has_conv=bool(convs),
        model_channels_last=model_cl,
        float64_params=n64,
        float64_parts=float64_parts(module, f64) if n64 else [],
        module_ids={id(m) for m in module.modules()} if n64 else set(),
        tensor_devices=sorted(held.get(id(module), set())),
        cpu_parts=cpu_parts(module, held),
    )


def float64_parts(module: Any, f64: Any) -> list[str]:
    """The model's attributes that hold float64 parameters, as the user named them: a child
    module (``encoder``, ``0`` in a Sequential) or a parameter of the model's own."""
    found = [name for name, p in module.named_parameters(recurse=False) if p.dtype is f64]
    for name, child in module.named_children():
        if len(found) >= MAX_PARTS:
            break
        if any(p.dtype is f64 for p in child.parameters()):
            found.append(name)
    return found[:MAX_PARTS]


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> list[Any]:
    import torch

    out: list[Any] = []
    items: list[Any] = [*args, *(kwargs or {}).values()]
    for a in items:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a[:8] if isinstance(x, torch.Tensor))
        elif isinstance(a, dict):
            out.extend(x for x in list(a.values())[:8] if isinstance(x, torch.Tensor))
    return out


_PLAIN = (int, float, bool, str, bytes, type(None))


def _structure(info: ModuleInfo, args: tuple[Any, ...], tensors: list[Any]) -> None:
    """What a batch-size change would have to grow consistently (``input_dim0s``)."""
    import torch

    for a in args:
        if isinstance(a, (torch.Tensor, list, tuple, dict, *_PLAIN)):
            continue
        info.input_opaque.add(type(a).__name__)
    info.input_dim0s.update(int(t.shape[0]) for t in tensors if t.dim() > 0)
    if info.input_shape is None and tensors:
        info.input_shape = [int(n) for n in tensors[0].shape]


def observe_call(info: ModuleInfo, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
    import torch

    info.calls += 1
    tensors = _tensors(args, kwargs)
    if info.calls <= 2:
        _structure(info, args, tensors)
    for t in tensors:
        info.input_devices.add(t.device.type)
        if t.is_floating_point():
            info.input_dtypes.add(str(t.dtype).replace("torch.", ""))
    if tensors:
        first = tensors[0]
        if len(info.input_shapes) < MAX_SHAPES:
            info.input_shapes.add(tuple(int(n) for n in first.shape))
        if first.dim() >= 1:
            info.batch_size = int(first.shape[0])
        lay = _layout(first)
        if lay is not None:
            info.input_channels_last = lay
    try:
        on = bool(torch.is_autocast_enabled("cuda"))
        dtype = torch.get_autocast_dtype("cuda") if on else None
    except (TypeError, AttributeError):  # torch < 2.4
        on = bool(torch.is_autocast_enabled())
        dtype = torch.get_autocast_gpu_dtype() if on else None
    info.autocast = info.autocast or on
    if dtype is not None:
        info.autocast_dtype = str(dtype).replace("torch.", "")
    grad = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    info.grad_enabled = grad if info.grad_enabled is None else (info.grad_enabled or grad)
