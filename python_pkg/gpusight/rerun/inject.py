"""Changes applied to an unmodified script from outside, in the process that runs it.

``gpusight run --what-if`` re-runs the user's script once per candidate change; each re-run is
a fresh ``gpusight run --inject CHANGES`` process in which :func:`install` lets each knob of the
registry (``knobs/``) that the changes name take effect before the script starts: the
DataLoader's arguments, torch flags, and the model (the first top-level module with parameters
that the script calls; from its second call on, through hooks of its own that see keyword inputs
too, as ``model(**batch)``). Around each of the model's outermost calls the knobs change its
inputs in registry order and its outputs back in the reverse order, so that the script sees the
shapes and devices it expects.

Everything is undone by :func:`Injected.undo` (the process ends anyway; tests run it in-process).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..hook_copies import WatchHook
from ..knobs import KNOWN_KEYS, LOADER_KEYS, REGISTRY, Knob
from ..knobs.base import SCRIPTED_MODEL

__all__ = ["KNOWN_KEYS", "LOADER_KEYS", "InjectError", "Injected", "check", "install"]


class InjectError(ValueError):
    """A change that cannot be applied as given."""


def check(changes: dict[str, Any]) -> dict[str, Any]:
    """The changes, validated: known keys and sane values (a one-line error otherwise)."""
    unknown = sorted(set(changes) - KNOWN_KEYS)
    if unknown:
        raise InjectError(f"unknown change(s): {', '.join(unknown)}")
    for knob in REGISTRY:
        problem = knob.validate(changes)
        if problem:
            raise InjectError(problem)
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

    def on_undo(self, fn: Callable[[], None]) -> None:
        self._undo.append(fn)

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
    knobs = [k for k in REGISTRY if k.owns(changes)]
    hooks = _ModelHooks(torch, changes, inj, knobs)
    for knob in knobs:
        knob.install(hooks)
    if any(k.needs_model(changes) for k in knobs):
        hooks.install()
    return inj


class _ModelHooks:
    """Global forward hooks find the model (the first top-level module with parameters called)
    and come off once that call returns: on every module of every step they would take torch's
    slow call path, which a launch-bound step pays in the changed runs only (a gain measured
    short). Hooks on the model itself apply the knobs around each of its outermost calls."""

    def __init__(
        self, torch: Any, changes: dict[str, Any], inj: Injected, knobs: list[Knob] | None = None
    ) -> None:
        from ..knobs.tensors import batch_len, map_tensors, tensors_of

        self.torch = torch
        # The batch helpers diagnose uses, held here: the model's hooks run every step.
        self.map_tensors = map_tensors
        self.batch_len = batch_len
        self.tensors_of = tensors_of
        self.changes = changes
        self.inj = inj
        self.knobs = sorted(
            knobs if knobs is not None else [k for k in REGISTRY if k.owns(changes)],
            key=lambda k: k.order,
        )
        self.depth = 0
        """Module calls in flight while the global hooks look for the model."""
        self.model_depth = 0
        """The model's own calls in flight (its hooks count them once the global hooks are off)."""
        self.global_handles: list[Any] = []
        self.model_id: int | None = None
        self.prepared = False
        self.calls: list[list[Callable[[Any], Any]]] = []
        """Per model call in flight: what each knob does to its output, in the order to do it."""
        self.device: Any = None
        """Where the model was moved to (``to_device``), if it moved."""
        self.relaid = False
        """The model's weights changed layout (``channels_last``) after the script built its
        optimizer."""
        self.optimizers_moved: set[int] = set()
        """Optimizers whose state was looked at after the model moved (see
        ``_optimizer_follows``)."""
        self.batch: int | None = None
        """The script's own batch, seen at the model's first changed call (inputs repeated)."""
        self.capturing = False  # a re-run's calls run eagerly

    def install(self) -> None:
        from torch.nn.modules import module as nn_module

        pre = nn_module.register_module_forward_pre_hook(self.pre)
        post = nn_module.register_module_forward_hook(self.post, always_call=True)
        self.global_handles = [pre, post]
        self.inj.on_undo(pre.remove)
        self.inj.on_undo(post.remove)
        if any(k.moves_parameters for k in self.knobs):
            from torch.optim import optimizer as optim_mod

            handle = optim_mod.register_optimizer_step_pre_hook(self._optimizer_follows)
            self.inj.on_undo(handle.remove)

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
        if isinstance(module, self.torch.jit.ScriptModule):
            self.inj.notes.append(SCRIPTED_MODEL)  # its knobs' rows say it (took_effect)
            return
        pre = module.register_forward_pre_hook(WatchHook(self.model_pre), with_kwargs=True)
        post = module.register_forward_hook(
            WatchHook(self.model_post), with_kwargs=True, always_call=True
        )
        self.inj.on_undo(pre.remove)
        self.inj.on_undo(post.remove)

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
        if not self.prepared:
            self.prepared = True
            for knob in self.knobs:
                knob.prepare(self, module)
        call: Any = (args, kwargs)
        afters: list[Callable[[Any], Any]] = []
        for knob in self.knobs:
            call, after = knob.before(self, module, call)
            if after is not None:
                afters.append(after)
        afters.reverse()
        self.calls.append(afters)
        if call[0] is args and call[1] is kwargs:
            return None
        return tuple(call[0]), dict(call[1])

    def model_post(self, module: Any, args: Any, kwargs: Any, output: Any) -> Any:
        # The model's very first call had no pre-hook of ours yet: nothing to count or undo.
        if self.model_depth == 0:
            return None
        self.model_depth -= 1
        if self.model_depth != 0 or not self.calls:
            return None
        afters = self.calls.pop()
        if not afters:
            return None
        for after in afters:
            output = after(output)
        return output
