"""A larger batch, through the knob the user would turn.

In order: the script's own batch-size argument (``batch_args.py``), the DataLoader's
``batch_size`` where a loader feeds the steps (its subclasses too: a graph loader's batch is
then graphs), and only as the last resort every input of the model repeated along dim 0. That
last one is the model's compute on the same inputs, not the user's loop at a larger batch: it
runs only where every input of the call has the same leading size (a graph's ``edge_index``, a
recurrent state or an object of the user's own would make it another computation), and its row
says "compute only".
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..script_command import command_fix, command_text, with_value
from .base import After, Arm, Group, Knob, Local, LocalRow, Situation, Target

if TYPE_CHECKING:
    from ..report import Fix

# Factor per point, points at most, items per step at most.
BATCH_FACTOR = 4
BATCH_POINTS = 3
MAX_ITEMS = 8192
# Memory the batch sweep leaves free (a bigger batch needs about proportionally more).
MEMORY_SHARE = 0.8
# In the kernel, on copies, points are cheap: doubling (x4 while a doubling gains at least
# BIG_GAIN), up to MAX_FACTOR times the batch (a launch-bound step keeps gaining far beyond 16x;
# running out of memory or of gain stops it sooner).
FIRST_FACTOR = 2
BIG_GAIN = 1.5
MAX_FACTOR = 128
SMALL_IDS = frozenset({"load.small_batch", "load.launch_bound", "infer.unbatched"})
TINY_BATCH = 16
"""Items per step at or under which a larger batch is always worth measuring: each step's
fixed costs (the optimizer over every parameter, Python, launches) are then paid for a handful
of items, on a GPU or a CPU (batch 4 at 1 ms steps on a CPU: 2.9x at 16, 7.7x at 64)."""
HOST_SHARE_PCT = 30.0
REPEAT_REFUSED = "replicate_refused"


def batch_factors(facts: dict[str, Any]) -> list[int]:
    """Batch multipliers to try: x4, x16, x64 while items and memory allow."""
    items = int(facts.get("items_per_step") or 0)
    if items <= 0:
        return []
    peak = facts.get("peak_memory_bytes") or 0
    cap = facts.get("memory_capacity_bytes") or 0
    out = []
    k = BATCH_FACTOR
    for _ in range(BATCH_POINTS):
        if items * k > MAX_ITEMS:
            break
        if peak and cap and peak * k > MEMORY_SHARE * cap:
            break
        out.append(k)
        k *= BATCH_FACTOR
    return out


def next_factor(factor: int, per_doubling: float) -> int:
    """The in-process sweep's next batch multiplier after ``factor``, which gained
    ``per_doubling`` per doubling of the batch (``factor`` itself when it is the last)."""
    ratio = 4 if per_doubling >= BIG_GAIN else 2
    return min(factor * ratio, MAX_FACTOR)


def _finding(s: Situation) -> str:
    if s.mode == "forward":
        return "infer.unbatched"
    if "load.launch_bound" in s.ids and "load.small_batch" not in s.ids:
        return "load.launch_bound"
    return "load.small_batch"


def argument_matches(arg: dict[str, Any] | None, facts: dict[str, Any], value: int) -> bool:
    """Whether the script's batch argument at ``value`` is the batch the steps ran: the loader's
    batch size, or a size of the model's first input."""
    if not arg:
        return False
    loader = facts.get("loader") or {}
    shape = (facts.get("model") or {}).get("input_shape") or []
    return loader.get("batch_size") == value or value in shape


def repeat_blocker(model: dict[str, Any] | None) -> str | None:
    """Why repeating the model's inputs would time another computation (None: it would not)."""
    if not model:
        return "no model call was seen"
    opaque = model.get("input_opaque") or []
    if opaque:
        return (
            f"the model is called with a {opaque[0]} object, whose tensors' batch dimension is "
            "not known: repeating them could time another computation"
        )
    sizes = model.get("input_dim0s") or []
    if not sizes:
        return (
            "the model's inputs were not seen as positional tensors: repeating them could time "
            "another computation"
        )
    if len(sizes) > 1:
        shown = ", ".join(str(n) for n in sizes[:4])
        return (
            f"the model's inputs disagree on dim 0 ({shown}): repeating them along it would "
            "time another computation"
        )
    return None


def _through_argument(s: Situation, items: int, k: int, finding: str) -> Arm:
    arg = s.facts["batch_arg"]
    new = int(arg["value"]) * k
    return Arm("batch", f"{arg['option']} {new} (the script's batch argument)",
               {"script_arg": {**arg, "value": new, "was": int(arg["value"])}}, finding,
               slowdown=float(k),
               items_factor=float(k))  # fmt: skip


def _through_loader(s: Situation, k: int, finding: str) -> Arm:
    new = int((s.loader or {})["batch_size"]) * k
    return Arm("batch", f"DataLoader batch_size={new}", {"batch_size": new}, finding,
               slowdown=float(k), items_factor=float(k))  # fmt: skip


def _repeated(items: int, k: int, finding: str) -> Arm:
    return Arm("batch", f"{items * k} items per forward (the same inputs repeated x{k}; compute "
               "only)", {"replicate": k}, finding, slowdown=float(k), items_factor=float(k),
               scope="compute_only")  # fmt: skip


def route_arm(s: Situation, k: int, finding: str) -> Arm | None:
    """The batch ``k`` times larger the way the user would grow it here: the script's batch
    argument, else the DataLoader's ``batch_size`` (None: neither)."""
    arg = s.facts.get("batch_arg")
    if arg and argument_matches(arg, s.facts, int(arg["value"])):
        return _through_argument(s, int(s.facts.get("items_per_step") or 0), k, finding)
    return _through_loader(s, k, finding) if _loader_feeds(s) else None


def _loader_feeds(s: Situation) -> bool:
    ld = s.loader or {}
    return bool(ld.get("batch_size")) and ld.get("batches_per_step") is not None


class Batch(Knob):
    name = "batch"
    findings = tuple(sorted(SMALL_IDS))
    keys = ("batch_size", "replicate", "script_arg")
    model_facts = (("batch_size", "batch_size"),)  # the first input's leading dimension
    unapplied = "the model's inputs have no batch dimension to grow"
    order = 30
    grows_batch = True

    def groups(self, s: Situation) -> list[Group]:
        items = int(s.facts.get("items_per_step") or 0)
        small = bool(s.ids & SMALL_IDS) or 0 < items <= TINY_BATCH
        if s.mode is None or not (
            small or s.host_share >= HOST_SHARE_PCT or (s.cuda and s.compute_share < 50.0)
        ):
            return []
        finding = _finding(s)
        # A loader-bound step gains nothing from a bigger batch (the wait grows with it): its
        # priority is the host-bound share, so it runs after the loader's changes.
        g = Group("batch", max(s.host_share, 50.0 if small else 0.0), sweep=True)
        factors = batch_factors(s.facts)
        arg = s.facts.get("batch_arg")
        blocker = None
        if arg and argument_matches(arg, s.facts, int(arg["value"])):
            g.arms = [_through_argument(s, items, k, finding) for k in factors]
        elif _loader_feeds(s):
            g.arms = [_through_loader(s, k, finding) for k in factors]
        elif (blocker := repeat_blocker(s.model)) is None:
            g.arms = [_repeated(items, k, finding) for k in factors]
        if blocker is not None:
            why = blocker + (
                "; pass a larger batch through the script's DataLoader or its batch-size argument"
            )
            g.arms = [Arm("batch", "a larger batch", {}, finding, skipped=why)]
        elif not factors:
            why = "the batch size is unknown, or memory leaves no room"
            g.arms = [Arm("batch", "a larger batch", {}, finding, skipped=why)]
        return [g]

    def not_planned(self, s: Situation) -> str:
        if s.mode is None:
            return "no training or inference step was seen"
        items = int(s.facts.get("items_per_step") or 0)
        batch = f"its batch of {items} items" if items else "its batch (size unknown)"
        return (
            f"the step is held up neither by the host ({s.host_share:.0f}% of it, under "
            f"{HOST_SHARE_PCT:.0f}%) nor by launches, and {batch} is over {TINY_BATCH}: a "
            "larger batch would take about as much longer per step"
        )

    def validate(self, changes: dict[str, Any]) -> str | None:
        for key in ("batch_size", "replicate"):
            v = changes.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                return f"{key} must be an integer of at least 1, got {v!r}"
        arg = changes.get("script_arg")
        if arg is not None:
            value = arg.get("value") if isinstance(arg, dict) else None
            if not isinstance(value, int) or value < 1 or not isinstance(arg.get("option"), str):
                return "script_arg must be {'option': '--batch-size', 'value': N}"
        return None

    def applied_name(self, key: str) -> str:
        return {"batch_size": "loader", "script_arg": "script_arg"}.get(key, key)

    def took_effect(self, facts: dict[str, Any] | None, changes: dict[str, Any]) -> str | None:
        arg = changes.get("script_arg")
        if arg is None:
            refused = [n for n in (facts or {}).get("inject_notes") or [] if "not repeated" in n]
            applied = (facts or {}).get("injected") or {}
            if changes.get("replicate") and refused and not applied.get("replicate"):
                return str(refused[0])
            return super().took_effect(facts, changes)
        facts = facts or {}
        seen = facts.get("batch_arg") or {}
        if seen.get("value") != arg["value"] or not argument_matches(seen, facts, arg["value"]):
            return f"{arg['option']} {arg['value']} did not reach the step's batch"
        return None

    def items(self, changes: dict[str, Any], counted: int | None, base: int | None) -> int | None:
        arg = changes.get("script_arg")
        if arg and base:
            # The watch's count can be a size of the model's input that the argument does not
            # set ([bptt, batch]): the user's items grow with their argument.
            old = int(arg.get("was") or 0)
            return round(base * int(arg["value"]) / old) if old else counted
        k = int(changes.get("replicate") or 1)
        # The watch sees each call as the script made it, before its inputs were repeated.
        return counted * k if counted and k > 1 else counted

    def row_params(self, changes: dict[str, Any]) -> dict[str, Any]:
        arg = changes.get("script_arg")
        if not isinstance(arg, dict):
            return {}
        return {"set_script_arg": f"{arg.get('option')} {arg.get('value')}"}

    def script_args(self, args: list[str], changes: dict[str, Any]) -> list[str]:
        arg = changes.get("script_arg")
        return with_value(args, arg, int(arg["value"])) if arg else args

    # -- in the kernel: the batch grown on cached batches ------------------------------------
    SWEEP = LocalRow("batch_size", "batch size doubling", "load.small_batch", "batch_sweep")

    def local_snippet(self, key: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # The batch alone: the loader's other winners have rows of their own.
        return f"whatif.{key}", {"loader_changes": {"batch_size": params["batch_size"]}}

    def local_rows(self) -> tuple[LocalRow, ...]:
        return (self.SWEEP,)

    def local_arm_of(self, row: LocalRow, ctx: Local) -> Arm | str:
        from .tensors import batch_len

        bs = batch_len(ctx.batches[0]) if ctx.batches else None
        if bs is None:
            return "cannot tell the batch dimension of the loader's batches"
        return local_factor_arm(bs, FIRST_FACTOR)

    def local_outcome(self, row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        f = int(row.get("factor") or FIRST_FACTOR)
        return {}, [
            f"A batch {f}x larger changes the optimisation, not only the speed: scale the "
            f"learning rate with it (linear scaling rule, lr x {f}, with warm-up) and check that "
            "the loss curve still matches."
        ]

    # -- in the re-run: inputs repeated ------------------------------------------------------
    def needs_model(self, changes: dict[str, Any]) -> bool:
        return bool(changes.get("replicate"))

    def install(self, hooks: Target) -> None:
        if int(hooks.changes.get("replicate") or 1) > 1:
            _patch_copies(hooks)

    def before(self, hooks: Target, module: Any, call: Any) -> tuple[Any, After | None]:
        k = int(hooks.changes.get("replicate") or 1)
        if k <= 1:
            return call, None
        b = hooks.batch_len(call)
        if not b:
            return call, None
        reason = _call_blocker(hooks, call, b)
        if reason is not None:
            if reason not in hooks.inj.notes:
                hooks.inj.notes.append(reason)
            hooks.inj.hit(REPEAT_REFUSED)
            return call, None
        if hooks.batch is None:
            hooks.batch = b
        hooks.inj.hit("replicate")
        new = hooks.map_tensors(call, lambda t: t.repeat(k, *([1] * (t.dim() - 1))))

        def cut(output: Any) -> Any:
            return hooks.map_tensors(
                output, lambda t: t[:b] if t.dim() > 0 and t.shape[0] == b * k else t
            )

        return new, cut

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..fixes import fix
        from ..fixes.workload_patches import knob_batch_fix
        from .user_lines import (
            forward_source,
            patched_batch_source,
            patched_loader,
            patched_setup,
        )

        ch = arm.changes
        arg = ch.get("script_arg")
        new = int(
            (arg or {}).get("value")
            or ch.get("batch_size")
            or (items or 1) * int(ch.get("replicate") or 1)
        )
        if arm.finding_id == "infer.unbatched" and not arg:
            f = fix(f"Group {new} requests per forward.", "infer.batch_requests", batch=new)
        elif arg:
            text = command_text(str(arg["option"]), new, arm.finding_id != "infer.unbatched")
            return _command_fix(text, arg, new, facts) or fix(
                text, "batch.larger", batch_size=int(items or 1), suggested=new
            )
        else:
            text = _grow_text(new, ch, facts)
            f = fix(text, "batch.larger", batch_size=int(items or 1), suggested=new)
        if ch.get("replicate") and not ch.get("batch_size"):
            # The what-if repeated the model's input: the knob that sizes a batch the script
            # cuts itself, else the DataLoader's batch_size where a framework's loop feeds the
            # model from the user's DataLoader (Lightning's training_step).
            f = knob_batch_fix(f, forward_source(facts), new)
            if f.patch is not None:
                return f
            arm = replace(arm, changes={**ch, "batch_size": new})
        if ch.get("batch_size"):
            f = patched_batch_source(f, facts, new)
        if f.patch is None:
            f = patched_loader(f, arm, facts)
        if f.patch is None and f.cell is None and facts.get("framework") == "transformers":
            # The Trainer makes its DataLoader: its batch is the TrainingArguments' own.
            f = patched_setup(f, facts, {"per_device_train_batch_size": new})
        return f


def _grow_text(new: int, changes: dict[str, Any], facts: dict[str, Any]) -> str:
    """The fix's words for a larger batch; where the script takes several DataLoader batches
    per optimizer step (gradient accumulation, timm_accum's 8 micro-batches), what a larger
    one does to the update, which the row measured with the accumulation kept."""
    loader = facts.get("loader") or {}
    k, old = int(loader.get("batches_per_step") or 1), int(loader.get("batch_size") or 0)
    if not changes.get("batch_size") or k <= 1 or old <= 0:
        return f"Grow the batch to {new} (and scale the learning rate)."
    return (
        f"Grow the DataLoader's batch to {new}. The script takes {k} of its batches per "
        f"optimizer step (gradient accumulation), so an update then holds {new * k} items "
        f"where it held {old * k}: accumulate over fewer batches to keep its size and the "
        "learning rate (the what-if kept the accumulation), or scale the learning rate."
    )


def _command_fix(text: str, arg: dict[str, Any], new: int, facts: dict[str, Any]) -> Fix | None:
    """The batch as the script's own option: the command that runs it so, the script's other
    arguments as the run had them (no DataLoader edit: the script sizes it from the option)."""
    cmd = facts.get("command") or {}
    if not cmd.get("script"):
        return None
    return command_fix(text, arg, new, str(cmd["script"]), list(cmd.get("args") or []))


def local_factor_arm(bs: int, factor: int) -> Arm:
    """The in-process arm of a batch ``factor`` times the user's ``bs`` (cached batches
    concatenated, the loader's batch_size where it runs with the loader)."""
    return Arm("batch", f"batch_size={bs * factor}", {"batch_factor": factor}, "load.small_batch",
               slowdown=float(factor), items_factor=float(factor))  # fmt: skip


def _call_blocker(hooks: Any, call: Any, b: int) -> str | None:
    """Why this call's inputs cannot all be repeated along dim 0 (None: they can)."""
    sizes = sorted({int(t.shape[0]) for t in hooks.tensors_of(call) if t.dim() > 0})
    if sizes != [b]:
        shown = ", ".join(str(n) for n in sizes[:4])
        return f"not repeated: the model's inputs disagree on dim 0 ({shown})"
    return None


def _patch_copies(hooks: Any) -> None:
    """A batch copied from the host costs what a batch ``k`` times larger would. The script's
    own copy is made as before (its shapes stay the script's), then a host tensor ``k`` times
    larger is built and copied too, and dropped: gathering and copying a larger batch is then
    in the measured step, not only its compute."""
    torch = hooks.torch
    k = int(hooks.changes["replicate"])
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
        hooks.inj.on_undo(functools.partial(setattr, torch.Tensor, name, orig))
