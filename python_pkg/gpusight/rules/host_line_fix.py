"""The host's costliest line of the user's own work, and the fix chosen by what that line does
(issue #49): a ``gc.collect()`` is removed, a logger writes less often, numpy inside ``forward``
becomes the torch op on the device, a tokenizer moves into the DataLoader's workers. Lines that
are the step's own framework calls (the model's call, ``backward()``, the optimizer) or its
wait for data are the other findings' business. Pure: reads the line's text with ``ast``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .workload_impacts import site_text


@dataclass
class HostLine:
    file: str
    line: int
    code: str | None
    function: str
    ms: float
    """Host time per step, exclusive of the user's code it calls."""
    share_pct: float
    in_forward: bool = False
    waiting: bool = False
    last_line: int | None = None
    """A loop over a model's tensors taken as one line (``host_line_loops.grouped``): its
    header is ``line``, its last line this."""
    model_again: bool = False
    """The line calls the main model again, beside the step's own call (a validation batch
    every step)."""
    per_item: str | None = None
    """A loop over the batch's items taken as one line (``item_loops.grouped_items``): what it
    computes per item (``loss``, ``transform``, ``other``)."""
    on_output: bool = False
    """The line works on what the model's call returned (``output_reads.py``): a metric or a
    record of the step, not a transform of the batch."""
    batch_source: str | None = None
    """The generator function of the user's the line is in, which the loop draws its batches
    from (``batch_generators.py``)."""

    @property
    def where(self) -> str:
        at = site_text(self.file, self.line)
        return at if self.last_line is None else f"{at}-{self.last_line}"


_FRAMEWORK = ("backward", "manual_backward", "step", "zero_grad")
# The gradients' clipping and unscaling: the step's own update, outside the optimizer's call.
_CLIPPING = ("clip_grad_norm_", "clip_grad_value_", "unscale_")
# torch.nn.functional's losses whose names do not say "loss".
_LOSSES = ("cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div")
# What a loop over a model's tensors iterates (``zip(ema.parameters(), model.parameters())``,
# ``model.named_parameters()``, ``state_dict().items()``).
TENSOR_ITERS = ("parameters(", "named_parameters(", "buffers(", "named_buffers(", "state_dict(")
# torch's modes a ``with`` line enters: the step's own setting, not work of the user's (entering
# and leaving autocast clears its cast cache, a cost of the mode).
_MODES = ("autocast", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled",
          "sdpa_kernel", "record_function", "accumulate", "no_sync")  # fmt: skip
_READS = ("item", "tolist")
_LOGGING = ("print", "log", "info", "debug", "add_scalar", "add_scalars", "add_histogram",
            "add_image", "set_postfix", "set_description", "write", "warning")  # fmt: skip


def calls(code: str | None) -> list[str]:
    """The dotted names the line calls, outermost first (``gc.collect``, ``np.argpartition``)."""
    if not code:
        return []
    try:
        tree = ast.parse(code.strip().rstrip(":") if code.strip().startswith("for ") else code)
    except SyntaxError:
        try:
            tree = ast.parse(code.strip() + "\n    pass")
        except SyntaxError:
            try:
                tree = ast.parse(_closed(code.strip()))
            except SyntaxError:
                return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            out.append(_dotted(node.func))
    return [c for c in out if c]


def _closed(code: str) -> str:
    """The first line of a statement that goes on over more lines (``enc = tokenizer(``), its
    open brackets closed."""
    shut = []
    for ch in code:
        if ch in "([{":
            shut.append(")]}"["([{".index(ch)])
        elif ch in ")]}" and shut:
            shut.pop()
    return code.rstrip(", ") + "".join(reversed(shut))


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def is_framework(ln: HostLine, model_call_line: int | None) -> bool:
    """The step's own calls: the model's (its line), backward, the optimizer, the gradients'
    clipping, the loader's loop, the loss on the model's output, a ``with`` of torch's modes."""
    code = (ln.code or "").strip()
    if code.startswith(("for ", "async for ")) and not ln.in_forward:
        return True  # the loop's header: the wait for the next batch, load.input_bound's
    if model_call_line is not None and ln.line == model_call_line and not ln.in_forward:
        return True
    entered = calls(ln.code) if code.startswith(("with ", "async with ")) else []
    if entered and all(c.rsplit(".", 1)[-1] in _MODES for c in entered):
        return True  # ``with torch.autocast(...)``, ``with accelerator.accumulate(model)``
    if not ln.in_forward and _made_on_device(code):
        return True  # ``x = torch.randn(64, 3, device=dev)``: the step's input, as a loader's
    return any(c.rsplit(".", 1)[-1] in _FRAMEWORK for c in calls(ln.code)) or is_step_math(ln)


def _made_on_device(code: str) -> bool:
    """A batch made by a torch factory on the device (a synthetic input, the random labels):
    the data the step runs on, not a transform to move to the GPU or a DataLoader's workers."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return False
    v = tree.body[0].value
    return (
        isinstance(v, ast.Call)
        and _dotted(v.func).startswith("torch.")
        and _dotted(v.func).rsplit(".", 1)[-1] in (*_FACTORIES, "randint", "normal")
        and any(k.arg == "device" for k in v.keywords)
    )


def is_step_math(ln: HostLine) -> bool:
    """The step's own computation outside the model's call and the optimizer's: the loss on
    the model's output, the gradients' clipping (``clip_grad_norm_``) and unscaling. No
    DataLoader worker, GPU transform or thinning can take it over."""
    return is_loss(ln) or any(c.rsplit(".", 1)[-1] in _CLIPPING for c in calls(ln.code))


def is_loss(ln: HostLine) -> bool:
    """A line of the loss: a loss function's call (``F.binary_cross_entropy``, ``criterion``,
    ``self.loss_fn``) or a line of a function of the user's named for it (``loss_function``,
    ``compute_loss``). It computes the step's own gradients' source, so no worker or thinning
    can take it over; numpy, logging and syncs in it keep their own kinds."""
    if kind_of(ln) not in ("other", "metric"):
        return False
    func = ln.function.rsplit(".", 1)[-1].lower()
    if "loss" in func or "criterion" in func:
        return True
    last = [c.rsplit(".", 1)[-1].lower() for c in calls(ln.code)]
    return any("loss" in n or "criterion" in n or n in _LOSSES for n in last)


def _is_loop(name: str) -> bool:
    """A training framework's loop called from the user's file: ``trainer.fit(model, dm)``
    (Lightning), ``trainer.train()`` (Hugging Face). The library's per-step code runs under that
    one line, and the model's too where the model is the library's. ``model.train()`` only sets
    a mode, and a scaler's ``fit`` in the loop is host work of the user's."""
    head, _, last = name.rpartition(".")
    return last in ("fit", "train") and "trainer" in head.lower()


def kind_of(ln: HostLine) -> str:
    """What the line does, as its fix needs it: a loop over a model's tensors taken as one
    line is a ``parameter_loop`` unless what it runs has a kind of its own (a logger)."""
    if ln.per_item:
        return "item_loop"
    if ln.model_again:
        return "model_again"
    if ln.batch_source and not ln.on_output and not ln.in_forward:
        return "batch_generator"
    kind = _kind_of_code(ln)
    grouped = ln.last_line is not None and not ln.on_output  # not a run of the step's record
    if kind in ("other", "metric") and (grouped or _over_tensors(ln.code)):
        return "parameter_reads" if reads_values(ln) else "parameter_loop"
    return kind


def reads_values(ln: HostLine) -> bool:
    """The line reads a tensor's value into Python (``.item()``, ``.tolist()``)."""
    return any(c.rsplit(".", 1)[-1] in _READS for c in calls(ln.code))


def _over_tensors(code: str | None) -> bool:
    """A comprehension over a model's tensors on the line (``sum(p.grad.norm().item() ** 2
    for p in model.parameters())``)."""
    try:
        tree = ast.parse((code or "").strip())
    except SyntaxError:
        return False
    return any(
        isinstance(node, ast.comprehension)
        and any(t in ast.unparse(node.iter) for t in TENSOR_ITERS)
        for node in ast.walk(tree)
    )


# Tensors made from Python data on the host (``torch.tensor([[j > i for j in ...]])``), and
# factories whose result the line then copies to a device (``torch.ones(t, t).to(x.device)``).
_FROM_PYTHON = ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor")
_FACTORIES = ("ones", "zeros", "arange", "full", "eye", "empty", "rand", "randn", "triu", "tril",
              "linspace", "ones_like", "zeros_like")  # fmt: skip


def _host_tensor(names: list[str]) -> bool:
    """The line builds a tensor on the host to use on the device."""
    if any(n in _FROM_PYTHON for n in names):
        return True
    made = any(n.startswith("torch.") and n.rsplit(".", 1)[-1] in _FACTORIES for n in names)
    return made and any(n.rsplit(".", 1)[-1] in ("to", "cuda") for n in names)


def _kind_of_code(ln: HostLine) -> str:
    names = calls(ln.code)
    last = [n.rsplit(".", 1)[-1] for n in names]
    if "collect" in last and any(n.startswith("gc.") or n == "collect" for n in names):
        return "gc"
    if "empty_cache" in last:
        return "empty_cache"
    if "deepcopy" in last and not ln.in_forward:
        return "model_copy"
    # The function the line is in says it too: the body of a tokenizer or a logger of the
    # user's own (its own lines call str.split, np.histogram, ...).
    func = ln.function.rsplit(".", 1)[-1]
    if "token" in func.lower() or any("token" in n.lower() for n in names):
        return "metric" if ln.on_output else "tokenizer"  # a decode of the predictions
    if func in _LOGGING or func.startswith(("log_", "add_")):
        return "logging"
    # A logger's call whose value is worked out in numpy (``pl_module.log("acc",
    # float(np.trace(cm) / cm.sum()))``) is a logger's line: the call is the statement.
    if names and _logs(names[0]) and _statement_call(ln.code) and not _maths(names[0]):
        return "logging"
    if any(n.split(".", 1)[0] in ("np", "numpy") for n in names) or "numpy" in last:
        if ln.on_output:
            return "metric"
        return "numpy_in_forward" if ln.in_forward else "numpy"
    if ln.in_forward and _host_tensor(names):
        return "host_tensor_in_forward"
    if any(_is_loop(n) for n in names) and not ln.in_forward:
        return "framework_loop"
    if any(n.endswith(".generate") for n in names) and not ln.in_forward:
        return "generation_loop"
    # A logger's call, not torch.log or np.log (their heads are the maths libraries).
    if any(_logs(n) and not _maths(n) for n in names):
        return "logging"
    return "metric" if ln.on_output else "other"


def _maths(name: str) -> bool:
    return name.split(".", 1)[0] in ("torch", "np", "numpy", "math", "F", "nn")


def _statement_call(code: str | None) -> bool:
    """The line is a call alone (``print(...)``), not an assignment of what a call returns."""
    return _statement_of(code) is not None


# Experiment trackers' calls (mlflow, Lightning's loggers, wandb, comet, neptune); not a
# tensor's ``log_softmax`` or a distribution's ``log_prob``.
_TRACKER_CALLS = ("log_metric", "log_metrics", "log_dict", "log_scalar", "log_scalars",
                  "log_image", "log_text", "log_table", "log_param", "log_params")  # fmt: skip


def _logs(name: str) -> bool:
    """A logger's call: ``print``, ``writer.add_scalar``, ``mlflow.log_metric``,
    ``logger.log_metrics``, ``pbar.set_description``."""
    last = name.rsplit(".", 1)[-1]
    return last in _LOGGING or last in _TRACKER_CALLS


def _statement_of(code: str | None) -> ast.Call | None:
    """The call that is the line's whole statement (``self.log("loss", loss)``), or None."""
    try:
        body = ast.parse((code or "").strip()).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return None
    value = body[0].value
    return value if isinstance(value, ast.Call) else None


def lightning_log(ln: HostLine) -> bool:
    """A LightningModule's ``self.log(name, value)`` / ``self.log_dict(...)`` in one of its
    hooks (``training_step``, ``on_train_batch_end``); not a Hugging Face ``Trainer``
    subclass's ``self.log(logs)``, which takes one dict."""
    call = _statement_of(ln.code)
    func = ln.function.rsplit(".", 1)[-1]
    if call is None or not (func.endswith("_step") or func.startswith("on_")):
        return False
    name = _dotted(call.func)
    if name == "self.log_dict":
        return True
    first = call.args[0] if call.args else None
    return name == "self.log" and isinstance(first, (ast.Constant, ast.JoinedStr))


def _lightning_log_text(ln: HostLine, at: str) -> str:
    """Lightning keeps a logged value on its device and writes it every ``log_every_n_steps``
    (50) batches: the host's cost is its bookkeeping at every call (about 0.3 ms a call, an
    ``on_epoch=True`` one more, on a 2-core CPU against Lightning 2.6), and a ``prog_bar=True``
    value's read at each redraw of the bar."""
    call = _statement_of(ln.code)
    bar = call is not None and any(
        k.arg == "prog_bar" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )
    read = (
        " With prog_bar=True the progress bar also reads the value at each redraw, and on the "
        "GPU each read waits for it: leave it off for a per-step value, or redraw the bar "
        "every N batches (TQDMProgressBar(refresh_rate=N))."
        if bar
        else ""
    )
    return (
        f"Log per-step values every N batches at {at} (`if batch_idx % N == 0:`): Lightning "
        "keeps them on the device and writes them every log_every_n_steps (50) batches, but "
        "each self.log call costs its bookkeeping on the host at every step (on_epoch=True "
        "more: it updates a running mean)." + read
    )


def fix_text(ln: HostLine) -> str | None:
    """The fix for what the line does; None where only the generic advice fits."""
    at = f"{ln.where} (`{(ln.code or '').strip()}`)"
    kind = kind_of(ln)
    if kind in ("gc", "empty_cache"):
        return (
            f"Remove {at} from the loop: it runs every step and the step waits for it. If "
            "memory was the reason, run it between epochs, or let the allocator reuse memory "
            "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) instead of emptying its cache."
        )
    if kind == "logging":
        if lightning_log(ln):
            return _lightning_log_text(ln, at)
        return (
            f"Log less often at {at}: every N steps, from values kept on the device and read "
            "together (each read of a GPU value waits for the GPU)."
        )
    if kind == "numpy_in_forward":
        return (
            f"Do the work of {at} with the torch op on the model's device (torch.topk, "
            "torch.argsort, torch.where, ...): in numpy it copies the activation to the host "
            "and runs on one CPU core inside forward."
        )
    if kind == "numpy":
        return (
            f"Do the work of {at} in torch on the device, or in the Dataset where DataLoader "
            "workers run it beside the step."
        )
    if kind == "parameter_loop":
        return (
            f"Update the tensors of the loop at {at} in one call instead of one op per tensor "
            "from Python: torch._foreach_mul_ / _foreach_add_ over the lists of tensors "
            "(torch._foreach_lerp_(ema_params, params, 1 - decay) for a moving average, as "
            "timm's ModelEmaV3 does), or torch.optim.swa_utils.AveragedModel(model, "
            "multi_avg_fn=get_ema_multi_avg_fn(decay)). On the GPU each tensor's op is a kernel "
            "launch of its own."
        )
    if kind == "parameter_reads":
        return (
            f"Read one value for all the tensors at {at}, not one .item() per tensor: "
            "torch.nn.utils.get_total_norm(grads) for a gradient norm (or the total that "
            "clip_grad_norm_ returns), torch._foreach_norm or torch.stack for others, then "
            ".item() once, or every N steps. On the GPU each .item() waits for it."
        )
    if kind == "generation_loop":
        return (
            f"The host time at {at} is the library's generation loop (each new token's logits "
            "processing, stopping checks and cache updates), not a line of yours to move: "
            "generate for a batch of prompts at once (padded, with their attention mask), and "
            "with a static cache under torch.compile (generation_config.cache_implementation="
            '"static") its per-token steps run as one compiled graph.'
        )
    if kind == "framework_loop":
        return (
            f"The host time at {at} is the training framework's own per-step code (gpusight "
            "times your lines, not the library's), not a line of yours to move. What it runs "
            "every step is set by its options: how often it logs (logging_steps, "
            "log_every_n_steps), its progress bar's refresh rate, your callbacks; and its "
            "DataLoader's num_workers where it waits for data."
        )
    if kind == "batch_generator":
        return (
            f"{at} is in `{ln.batch_source}()`, a generator your loop draws its batches "
            "from: its time is the input pipeline's, and the step waits for it. Make it a "
            "torch.utils.data.IterableDataset (its __iter__ the generator's body) and load it "
            "with DataLoader(dataset, batch_size=None, num_workers=N, persistent_workers=True) "
            "so that workers make the next batches while the step runs (each worker runs its "
            "own copy: split the items by torch.utils.data.get_worker_info()), or build the "
            "batch with torch ops on the GPU."
        )
    if kind == "model_again":
        return (
            f"The model runs again at {at}, every step, beside the step's own forward (a "
            "validation or monitoring batch): run it every N steps, or read what you need "
            "from the outputs the step computed already. Each call costs a forward, and a "
            "value read from it (.item()) waits for the GPU."
        )
    if kind == "model_copy":
        return (
            "Copy the model once, before the loop, and refresh that copy in place each step "
            f"instead of copying it anew at {at}: torch._foreach_copy_(list(copy.parameters()), "
            "list(model.parameters())) (torch._foreach_lerp_ for a moving-average teacher, "
            "buffers alike). A deep copy rebuilds every module and allocates every tensor again "
            "at every step."
        )
    if kind == "host_tensor_in_forward":
        return (
            f"Build the tensor at {at} once, not in every forward: in __init__ as a buffer "
            '(self.register_buffer("mask", ..., persistent=False), which model.to() moves with '
            "the parameters), or with torch ops on the input's device (torch.triu(torch.ones("
            "t, t, dtype=torch.bool, device=x.device), diagonal=1) for a causal mask). Made "
            "on the host, it is built and copied to the GPU at every call while the GPU waits."
        )
    if kind == "item_loop":
        how = {
            "loss": "the loss function once on all of the batch's outputs and targets (its "
            "reduction='mean' averages over the items)",
            "transform": "a random flip or noise for all items at once (torch.where with a "
            "mask of one draw per item, torchvision.transforms.v2 on the batch tensor)",
        }.get(ln.per_item or "", "torch.vmap over a function written for one item, or the op "
                                 "on the batch's leading dimension")  # fmt: skip
        return (
            f"Do the work of the loop at {at} in one call over the whole batch instead of "
            f"one op per item from Python: {how}. On the GPU each item's op is a kernel "
            "launch of its own."
        )
    if kind == "metric":
        names = calls(ln.code)
        host = any(n.split(".", 1)[0] in ("np", "numpy") or n.endswith("numpy") for n in names)
        how = " in torch on the device instead of numpy on a copy to the host," if host else ""
        return (
            f"Compute what {at} makes from the model's output{how} every N steps, or keep "
            "its running total on the device (a tensor, or torchmetrics) and read it once per "
            "epoch: it runs after every step's forward, and each read of a GPU value waits for "
            "the GPU."
        )
    if kind == "tokenizer":
        return (
            f"Tokenize once before the loop, or in the Dataset's __getitem__ (or a collate_fn) "
            f"with DataLoader workers, instead of in the loop at {at}."
        )
    return None
