"""What a notebook cell can change, taken before it runs and put back after each re-run.

``%%gpusight --what-if`` runs the same cell several times. Each run must start where the first
one did, and the user must find their kernel as they left it: every model and optimizer in the
namespace (weights, gradients, optimizer state: ``whatif.restore.Snapshot``), RNG and torch
flags, the names the cell binds, and the contents of the lists, dicts and sets it reads (a
``losses.append(...)`` in the loop). What cannot be put back (files written, shell commands,
a remote logger) makes the cell one that is not re-run: :func:`refusal` says why.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any

from ..fixes.patch import called_name

# Calls whose effects outlive the cell. Matched on the called name's last part.
_LASTING = {
    "open": "opens a file",
    "save": "saves to disk",
    "savefig": "saves a figure",
    "to_csv": "writes a file",
    "write": "writes a file",
    "write_text": "writes a file",
    "remove": "removes a file",
    "unlink": "removes a file",
    "rmtree": "removes files",
    "system": "runs a shell command",
    "getoutput": "runs a shell command",
    "run_line_magic": "runs a magic",
    "run_cell_magic": "runs a magic",
    "log": "logs to an experiment tracker",
    "add_scalar": "writes TensorBoard events",
}


def refusal(tree: ast.AST) -> str | None:
    """Why the cell cannot be re-run safely, or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = called_name(node)
            if name == "log" and isinstance(node.func, ast.Attribute):
                base = node.func.value
                # math.log, torch.log, np.log are arithmetic; wandb.log / mlflow.log are not.
                if not (isinstance(base, ast.Name) and base.id in ("wandb", "mlflow", "run")):
                    continue
            if name in _LASTING:
                line = getattr(node, "lineno", None)
                at = f" (line {line})" if line else ""
                return (
                    f"the cell {_LASTING[name]}{at}, which a re-run would repeat and gpusight "
                    "cannot undo"
                )
    return None


def bound_names(tree: ast.AST) -> set[str]:
    """Names the cell's top level binds (assignments, loop targets, imports, definitions)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out.add((a.asname or a.name).split(".")[0])
    return out


def read_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


_MISSING = object()


@dataclass
class CellState:
    ns: dict[str, Any]
    bindings: dict[str, Any] = field(default_factory=dict)
    containers: list[tuple[Any, Any]] = field(default_factory=list)
    snapshots: list[Any] = field(default_factory=list)
    loaders: dict[str, Any] = field(default_factory=dict)
    """Names in the namespace bound to DataLoaders before the cell ran."""

    @classmethod
    def capture(cls, ns: dict[str, Any], tree: ast.AST) -> CellState:
        import torch

        from ..whatif.loaders import is_dataloader
        from ..whatif.restore import Snapshot

        st = cls(ns)
        bound = bound_names(tree)
        st.bindings = {name: ns.get(name, _MISSING) for name in bound}
        for name in read_names(tree) - bound:
            v = ns.get(name)
            if isinstance(v, (list, dict, set, bytearray)):
                st.containers.append((v, copy.copy(v)))
        modules: dict[int, Any] = {}
        optimizers: list[Any] = []
        for name, v in list(ns.items()):
            if name.startswith("_"):
                continue
            if isinstance(v, torch.nn.Module):
                modules.setdefault(id(v), v)
            elif isinstance(v, torch.optim.Optimizer):
                optimizers.append(v)
            elif is_dataloader(v):
                st.loaders[name] = v
        loader = next(iter(st.loaders.values()), None)
        paired: set[int] = set()
        for opt in optimizers:
            params = {id(p) for g in opt.param_groups for p in g["params"]}
            owner = next(
                (m for m in modules.values() if any(id(p) in params for p in m.parameters())),
                None,
            )
            if owner is not None:
                paired.add(id(owner))
                st.snapshots.append(Snapshot.capture(owner, opt, loader=loader))
            else:
                st.snapshots.append(Snapshot.capture(torch.nn.Module(), opt, loader=loader))
        for m in modules.values():
            if id(m) not in paired:
                st.snapshots.append(Snapshot.capture(m, None, loader=loader))
        if not st.snapshots:
            st.snapshots.append(Snapshot.capture(torch.nn.Module(), None, loader=loader))
        return st

    def restore(self) -> list[str]:
        """Everything back as captured; what had changed."""
        changed: list[str] = []
        for snap in self.snapshots:
            changed += snap.restore()
        for live, saved in self.containers:
            if isinstance(live, list):
                live[:] = saved
            elif isinstance(live, (dict, set)):
                live.clear()
                live.update(saved)
            elif isinstance(live, bytearray):
                live[:] = saved
        for name, v in self.bindings.items():
            if v is _MISSING:
                self.ns.pop(name, None)
            else:
                self.ns[name] = v
        for name, v in self.loaders.items():
            self.ns[name] = v
        return changed
