"""Changes applied to an unmodified script from outside, in the process that runs it.

``gpusight run --what-if`` re-runs the user's script once per candidate change; each re-run is
a fresh ``gpusight run --inject CHANGES`` process in which :func:`install` patches what the
change touches before the script starts:

* DataLoader settings (``num_workers``, ``pin_memory``, ``persistent_workers``,
  ``prefetch_factor``, ``batch_size``): the arguments of every DataLoader the script builds;
* the model (the first top-level module with parameters that the script calls; from its
  second call on, through hooks of its own that see keyword inputs too, as ``model(**batch)``):
  bf16 autocast around its forward, ``channels_last``, a move to the GPU (inputs moved in,
  outputs moved back where the inputs came from, so the script's own loss and targets still
  match), or its batch grown by repeating each input along the batch dimension (outputs cut
  back to the script's batch: the work per step grows, the script sees the shapes it expects);
* torch flags (TF32, ``cudnn.benchmark``), set at the model's first call, after the script's
  own settings.

Everything is undone by :func:`Injected.undo` (the process ends anyway; tests run it in-process).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LOADER_KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "batch_size")
MODEL_KEYS = ("autocast", "channels_last", "to_device", "replicate", "tf32", "cudnn_benchmark")
KNOWN_KEYS = frozenset(LOADER_KEYS + MODEL_KEYS)


class InjectError(ValueError):
    """A change that cannot be applied as given."""


def check(changes: dict[str, Any]) -> dict[str, Any]:
    """The changes, validated: known keys and sane values (a one-line error otherwise)."""
    unknown = sorted(set(changes) - KNOWN_KEYS)
    if unknown:
        raise InjectError(f"unknown change(s): {', '.join(unknown)}")
    for key in ("num_workers", "prefetch_factor", "batch_size", "replicate"):
        v = changes.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise InjectError(f"{key} must be a non-negative integer, got {v!r}")
    for key in ("batch_size", "replicate", "prefetch_factor"):
        if changes.get(key) == 0:
            raise InjectError(f"{key} must be at least 1")
    if changes.get("autocast") not in (None, "bfloat16", "float16"):
        raise InjectError("autocast must be 'bfloat16' or 'float16'")
    return changes


@dataclass
class Injected:
    changes: dict[str, Any]
    applied: dict[str, int] = field(default_factory=dict)
    """How often each change took effect (loaders changed, model calls wrapped, ...)."""
    notes: list[str] = field(default_factory=list)
    _undo: list[Callable[[], None]] = field(default_factory=list)

    def hit(self, what: str) -> None:
        self.applied[what] = self.applied.get(what, 0) + 1

    def undo(self) -> None:
        while self._undo:
            try:
                self._undo.pop()()
            except Exception:  # one failure must leave nothing else in place
                pass


def install(changes: dict[str, Any]) -> Injected:
    """Patch what ``changes`` touches; the returned object says what took effect."""
    import torch

    inj = Injected(dict(check(changes)))
    loader = {k: changes[k] for k in LOADER_KEYS if changes.get(k) is not None}
    if loader:
        _patch_loader(torch, loader, inj)
    if any(changes.get(k) for k in MODEL_KEYS):
        _ModelHooks(torch, changes, inj).install()
    return inj


# -- DataLoader ------------------------------------------------------------------------------
def _patch_loader(torch: Any, loader: dict[str, Any], inj: Injected) -> None:
    cls = torch.utils.data.DataLoader
    orig = cls.__init__
    sig = inspect.signature(orig)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError:
            orig(self, *args, **kwargs)
            return
        a = bound.arguments
        changed = False
        for key, value in loader.items():
            if key == "batch_size" and (a.get("batch_sampler") is not None or a.get(key) is None):
                continue  # a batch sampler (or batch_size=None) fixes the batch itself
            if key == "pin_memory" and not torch.cuda.is_available():
                continue
            a[key] = value
            changed = True
        if a.get("num_workers", 0) == 0:
            # These need workers; torch refuses them without.
            a.pop("persistent_workers", None)
            a.pop("prefetch_factor", None)
        if changed:
            inj.hit("loader")
        orig(*bound.args, **bound.kwargs)

    __init__.__wrapped__ = orig  # type: ignore[attr-defined]
    cls.__init__ = __init__
    inj._undo.append(lambda: setattr(cls, "__init__", orig))


# -- the model -------------------------------------------------------------------------------
def _pinned_copy(t: Any, device: Any) -> Any:
    """``t`` on ``device``, pinned first: a CUDA copy from pageable memory waits for the GPU's
    queue, a host sync a step that the fix's pinned batches do not pay (on the H200, cpu_model's
    moved model measured 3.6x with pageable inputs, 4.7x pinned; its fix 6.2-7.9x)."""
    if device.type == "cuda" and t.device.type == "cpu" and not t.is_pinned():
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


class _ModelHooks:
    """Global forward hooks find the model (the first top-level module with parameters called)
    and come off once that call returns: on every module of every step they would take torch's
    slow call path, which a launch-bound step pays in the changed runs only (a gain measured
    short). Hooks on the model itself apply the changes around each of its outermost calls."""

    def __init__(self, torch: Any, changes: dict[str, Any], inj: Injected) -> None:
        from ..whatif.loaders import batch_len, map_tensors

        self.torch = torch
        # The batch helpers diagnose uses, held here: the model's hooks run every step.
        self.map_tensors = map_tensors
        self.batch_len = batch_len
        self.changes = changes
        self.inj = inj
        self.depth = 0
        """Module calls in flight while the global hooks look for the model."""
        self.model_depth = 0
        """The model's own calls in flight (its hooks count them once the global hooks are off)."""
        self.global_handles: list[Any] = []
        self.model_id: int | None = None
        self.prepared = False
        self.calls: list[tuple[Any, Any, int | None]] = []
        """Per model call in flight: its autocast context, where its outputs go back to, and
        the script's batch its outputs are cut back to."""
        self.device: Any = None
        self.relaid = False
        """The model's weights changed layout (``channels_last``) after the script built its
        optimizer."""
        self.optimizers_moved: set[int] = set()
        """Optimizers whose state was looked at after the model moved (see
        ``_optimizer_follows``)."""
        self.batch: int | None = None
        """The script's own batch, seen at the model's first call (with ``replicate``)."""

    def install(self) -> None:
        from torch.nn.modules import module as nn_module

        pre = nn_module.register_module_forward_pre_hook(self.pre)
        post = nn_module.register_module_forward_hook(self.post, always_call=True)
        self.global_handles = [pre, post]
        self.inj._undo.append(pre.remove)
        self.inj._undo.append(post.remove)
        if int(self.changes.get("replicate") or 1) > 1:
            self._patch_copies()
        if self.changes.get("to_device") or self.changes.get("channels_last"):
            from torch.optim import optimizer as optim_mod

            handle = optim_mod.register_optimizer_step_pre_hook(self._optimizer_follows)
            self.inj._undo.append(handle.remove)

    def _optimizer_follows(self, opt: Any, args: Any, kwargs: Any) -> None:
        """After the model moved or changed layout: an optimizer that stepped before (the
        warm-up call) keeps its state where and as the parameters were. Its next step would mix
        devices; with mixed layouts it runs, but its fused per-parameter kernels fall back to
        strided ones (on the H200 conv_nchw_amp's channels_last what-if read 1.40x against its
        fix's 1.88x, which builds the optimizer after the change). The state goes where the
        parameters are now, by torch's own rule (``load_state_dict`` keeps Adam's ``step`` on
        the host), and takes each parameter's layout."""
        if (self.device is None and not self.relaid) or id(opt) in self.optimizers_moved:
            return
        self.optimizers_moved.add(id(opt))
        params = {id(p): p for g in opt.param_groups for p in g["params"]}
        torch = self.torch
        stale = [
            (state, name, p)
            for key, state in opt.state.items()
            if (p := params.get(id(key))) is not None
            for name, v in state.items()
            if isinstance(v, torch.Tensor)
            and v.dim() > 0
            and (v.device != p.device or (v.shape == p.shape and v.stride() != p.stride()))
        ]
        if not stale:
            return
        if any(state[name].device != p.device for state, name, p in stale):
            opt.load_state_dict(opt.state_dict())
            self.inj.hit("optimizer_state_moved")
        self._relayout_state(opt, params)

    def _relayout_state(self, opt: Any, params: dict[int, Any]) -> None:
        """Each state tensor shaped as its parameter, copied into the parameter's layout."""
        torch = self.torch
        for key, state in opt.state.items():
            p = params.get(id(key))
            if p is None:
                continue
            for name, v in list(state.items()):
                if (
                    isinstance(v, torch.Tensor)
                    and v.shape == p.shape
                    and v.dim() > 0
                    and v.stride() != p.stride()
                ):
                    state[name] = torch.empty_like(p, dtype=v.dtype).copy_(v)
                    self.inj.hit("optimizer_state_relaid")

    def _patch_copies(self) -> None:
        """With ``replicate``: a batch copied from the host costs what a batch ``k`` times
        larger would. The script's own copy is made as before (its shapes stay the script's),
        then a host tensor ``k`` times larger is built and copied too, and dropped: gathering
        and copying a larger batch is then in the measured step, not only its compute."""
        torch = self.torch
        k = int(self.changes["replicate"])
        hooks = self
        for name in ("to", "cuda"):
            orig = getattr(torch.Tensor, name)

            def copy(t: Any, *args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
                out = _orig(t, *args, **kwargs)
                b = hooks.batch
                if (
                    b
                    and out is not t
                    and isinstance(out, torch.Tensor)
                    and t.device.type == "cpu"
                    and out.device.type != "cpu"
                    and t.dim() > 0
                    and t.shape[0] == b
                ):
                    _orig(t.repeat(k, *([1] * (t.dim() - 1))), *args, **kwargs)
                    hooks.inj.hit("replicate_copy")
                return out

            setattr(torch.Tensor, name, copy)
            self.inj._undo.append(functools.partial(setattr, torch.Tensor, name, orig))

    def _prepare(self, module: Any) -> None:
        """Once, before the model's first changed call: flags, layout and device."""
        torch, ch = self.torch, self.changes
        self.prepared = True
        if ch.get("tf32"):
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            torch.set_float32_matmul_precision("high")
            self.inj.hit("tf32")
        if ch.get("cudnn_benchmark"):
            torch.backends.cudnn.benchmark = True
            self.inj.hit("cudnn_benchmark")
        if ch.get("to_device"):
            dev = torch.device(ch["to_device"])
            if next(module.parameters()).device != dev:
                # In place: the optimizer keeps the same Parameter objects.
                module.to(dev)
                self.device = dev
                self.inj.hit("to_device")
            else:
                self.inj.notes.append(f"the model was already on {dev}")
        if ch.get("channels_last"):
            module.to(memory_format=torch.channels_last)
            self.relaid = True
            self.inj.hit("channels_last")

    def pre(self, module: Any, args: Any) -> None:
        """Global: track the call depth, and find the model at its first top-level call. The
        changes go on hooks of the model's own (they see keyword arguments, as in
        ``model(**batch)``), from its second call on: the first call is warm-up."""
        depth = self.depth
        self.depth = depth + 1
        if depth != 0 or self.model_id is not None:
            return
        try:
            next(module.parameters())
        except StopIteration:
            return
        self.model_id = id(module)
        pre = module.register_forward_pre_hook(self.model_pre, with_kwargs=True)
        post = module.register_forward_hook(self.model_post, with_kwargs=True, always_call=True)
        self.inj._undo.append(pre.remove)
        self.inj._undo.append(post.remove)

    def post(self, module: Any, args: Any, output: Any) -> None:
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and self.model_id is not None:
            # The model's first call (warm-up) is over: its own hooks take it from here.
            for h in self.global_handles:
                h.remove()
            self.global_handles = []

    def model_pre(self, module: Any, args: Any, kwargs: Any) -> Any:
        # The changes go around the model's outermost call only (a model that calls itself
        # inside runs its inner calls unchanged), from its second call on: the first, still
        # in flight while the global hooks are on, is warm-up.
        if self.global_handles:
            return None
        depth = self.model_depth
        self.model_depth = depth + 1
        if depth != 0:
            return None
        torch, ch, map_tensors = self.torch, self.changes, self.map_tensors
        if not self.prepared:
            self._prepare(module)
        new: Any = (args, kwargs)
        back: Any = None
        if self.device is not None:
            devs: list[Any] = []

            def move(t: Any) -> Any:
                if t.device != self.device:
                    devs.append(t.device)
                    return _pinned_copy(t, self.device)
                return t

            new = map_tensors(new, move)
            back = devs[0] if devs else None
        if ch.get("channels_last"):
            new = map_tensors(
                new,
                lambda t: t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t,
            )
        cut: int | None = None
        k = int(ch.get("replicate") or 1)
        if k > 1:
            b = self.batch_len(new)
            if b and self.batch is None:
                self.batch = b
            if b:
                new = map_tensors(
                    new,
                    lambda t: (
                        t.repeat(k, *([1] * (t.dim() - 1)))
                        if t.dim() > 0 and t.shape[0] == b
                        else t
                    ),
                )
                cut = b
                self.inj.hit("replicate")
        ctx = None
        if ch.get("autocast"):
            dtype = getattr(torch, ch["autocast"])
            dev_type = next(module.parameters()).device.type
            ctx = torch.autocast(dev_type, dtype=dtype)
            ctx.__enter__()
            self.inj.hit("autocast")
        self.calls.append((ctx, back, cut))
        if new[0] is args and new[1] is kwargs:
            return None
        return tuple(new[0]), dict(new[1])

    def model_post(self, module: Any, args: Any, kwargs: Any, output: Any) -> Any:
        # The model's very first call had no pre-hook of ours yet: nothing to count or undo.
        if self.model_depth == 0:
            return None
        self.model_depth -= 1
        if self.model_depth != 0 or not self.calls:
            return None
        map_tensors = self.map_tensors
        ctx, back, cut = self.calls.pop()
        if ctx is not None:
            ctx.__exit__(None, None, None)
        if cut is not None:
            k = int(self.changes["replicate"])
            output = map_tensors(
                output,
                lambda t: t[:cut] if t.dim() > 0 and t.shape[0] == cut * k else t,
            )
        if back is not None:
            output = map_tensors(output, lambda t: t.to(back))
            self.inj.hit("outputs_back")
        return output if (cut is not None or back is not None) else None
