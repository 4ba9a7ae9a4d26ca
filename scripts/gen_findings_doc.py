"""Write docs/findings.md, the finding catalogue, from the schema and the code.

    python scripts/gen_findings_doc.py           # write docs/findings.md
    python scripts/gen_findings_doc.py --check   # exit 1 if docs/findings.md is out of date

The ids come from the report schema (``FindingId``), what each means from
``gpusight/finding_catalogue.py``, and the rest from the code that raises them, read with
``ast``: the modules, severities, evidence labels and fix snippets of every ``Finding(...)``
with a literal id, and the ids of dict tables keyed by finding id (the what-ifs). An id in the
schema without an entry, an entry without an id, or an id the code raises that the schema lacks
stops the script (and python_pkg/tests/test_findings_doc.py).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "python_pkg" / "gpusight"
SCHEMA = PKG / "schema" / "report.schema.json"
DOC = ROOT / "docs" / "findings.md"
SEVERITIES = ("critical", "warn", "info")
# Snippet ids share the finding ids' shape (env.visible_devices is both): the snippet table is
# not a place findings are raised; nor is the catalogue of their meanings.
SKIP = {PKG / "fixes" / "catalogue.py", PKG / "finding_catalogue.py"}


@dataclass
class Raised:
    """What the code says about one finding id."""

    modules: set[str] = field(default_factory=set)
    severities: set[str] = field(default_factory=set)
    evidence: list[str] = field(default_factory=list)
    snippets: set[str] = field(default_factory=set)
    fixes: list[str] = field(default_factory=list)


def schema_ids() -> list[str]:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    return list(schema["definitions"]["FindingId"]["enum"])


def _text(node: ast.expr) -> str | None:
    """A literal string, or an f-string with its fields shown as ``…``, or the first branch of a
    conditional one; None otherwise."""
    raw = _raw(node)
    return None if raw is None else raw.strip()


def _raw(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    if isinstance(node, ast.IfExp):  # ``"a" if ... else "b"``: the first, the usual case
        return _raw(node.body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _raw(node.left), _raw(node.right)
        if left is not None or right is not None:
            return f"{left or '…'}{right or '…'}"
    return None


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _kw(node: ast.Call, name: str, pos: int) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg == name:
            return kw.value
    return node.args[pos] if len(node.args) > pos else None


def _add(items: list[str], value: str | None) -> None:
    if value and value.strip("… ") and value not in items:
        items.append(value)


def _choices(node: ast.expr) -> set[str]:
    """A snippet id, or each of ``"a" if ... else "b"`` (a fix chosen by what the script has)."""
    if isinstance(node, ast.IfExp):
        return _choices(node.body) | _choices(node.orelse)
    sid = _text(node)
    return {sid} if sid else set()


FINDING_NAMES = ("FINDING", "finding", "finding_id")


def _chosen_findings(node: ast.AST, ids: set[str]) -> set[str]:
    """The finding ids a knob or an experiment picks for its rows: ``FINDING = "..."``,
    ``finding = "a" if ... else "b"``, ``finding_id = "..."``, or what a function named for a
    finding returns. The measured what-ifs raise them with the change's row."""
    if isinstance(node, ast.Assign):
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if any(n.endswith(FINDING_NAMES) for n in names):
            return _choices(node.value) & ids
    if isinstance(node, ast.FunctionDef) and "finding" in node.name:
        returns = (r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value)
        return {fid for r in returns for fid in _choices(r)} & ids
    return set()


def scan(ids: set[str], pkg: Path = PKG) -> dict[str, Raised]:
    """For each finding id the code raises: where, how severe, with what evidence and fix."""
    found: dict[str, Raised] = {}
    for path in sorted(pkg.rglob("*.py")):
        if path in SKIP:
            continue
        module = "gpusight." + ".".join(path.relative_to(pkg).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Dict) and node.keys:
                keys = [_text(k) if k is not None else None for k in node.keys]
                if all(k in ids for k in keys):
                    for k in keys:
                        assert k is not None
                        found.setdefault(k, Raised()).modules.add(module)
            for fid in _chosen_findings(node, ids):
                found.setdefault(fid, Raised()).modules.add(module)
            if not (isinstance(node, ast.Call) and _call_name(node) == "Finding"):
                continue
            id_node = _kw(node, "id", 0)
            fid = _text(id_node) if id_node is not None else None
            if fid is None or "…" in fid:
                continue  # an id computed at run time (merged rank reports, what-if tables)
            raised = found.setdefault(fid, Raised())
            raised.modules.add(module)
            sev = _kw(node, "severity", 1)
            if sev is not None:
                raised.severities |= {
                    c.value
                    for c in ast.walk(sev)
                    if isinstance(c, ast.Constant) and c.value in SEVERITIES
                }
            for inner in ast.walk(node):
                if not isinstance(inner, ast.Call):
                    continue
                name = _call_name(inner)
                if name in ("Evidence", "_ev") and inner.args:
                    _add(raised.evidence, _text(inner.args[0]))
                elif name == "fix" and inner.args:
                    _add(raised.fixes, _text(inner.args[0]))
                    if len(inner.args) > 1:
                        raised.snippets |= _choices(inner.args[1])
                elif name == "Fix":
                    _add(raised.fixes, _text(t) if (t := _kw(inner, "text", 0)) else None)
                    if (s := _kw(inner, "snippet_id", 1)) is not None and (sid := _text(s)):
                        raised.snippets.add(sid)
    return found


def problems(ids: list[str], catalogue: set[str], raised: set[str]) -> list[str]:
    out = [f"{i}: in the schema, not in finding_catalogue.py" for i in ids if i not in catalogue]
    out += [f"{i}: in finding_catalogue.py, not in the schema" for i in catalogue - set(ids)]
    out += [f"{i}: raised by the code, not in the schema" for i in raised - set(ids)]
    return sorted(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(ids: list[str], raised: dict[str, Raised]) -> str:
    sys.path.insert(0, str(PKG.parent))
    from gpusight.finding_catalogue import CATALOGUE, LAYERS

    lines = [
        "# Finding catalogue",
        "",
        "<!-- Generated by scripts/gen_findings_doc.py from the report schema, "
        "python_pkg/gpusight/finding_catalogue.py and the code that raises each finding. "
        "Do not edit: run `python scripts/gen_findings_doc.py`. -->",
        "",
        "Every finding in a report carries one of these ids (`finding.id`). Ids are API: new "
        "ones are added, none is renamed or removed. Each lists what it means, how gpusight "
        "measures it, the evidence a report shows with it, the fix it hands over (the snippet "
        "ids are in `python_pkg/gpusight/fixes/`), and the modules that raise it. A finding's "
        "`impact.basis` says whether its speedup was **measured** (a what-if ran the fix) or "
        "is an **estimate**.",
        "",
    ]
    by_layer: dict[str, list[str]] = {}
    for fid in ids:
        by_layer.setdefault(fid.split(".", 1)[0], []).append(fid)
    for prefix, title in LAYERS.items():
        layer_ids = by_layer.get(prefix, [])
        if not layer_ids:
            continue
        lines += [f"- [{title}](#{prefix}): " + ", ".join(f"`{i}`" for i in layer_ids)]
    for prefix, title in LAYERS.items():
        layer_ids = by_layer.get(prefix, [])
        if not layer_ids:
            continue
        lines += ["", f'<a id="{prefix}"></a>', "", f"## {title}", ""]
        for fid in layer_ids:
            entry = CATALOGUE[fid]
            r = raised.get(fid, Raised())
            lines += [f"### `{fid}`", "", entry.meaning, ""]
            rows = [("Measured by", entry.measured_by)]
            if r.severities:
                rows.append(("Severity", ", ".join(s for s in SEVERITIES if s in r.severities)))
            if r.evidence:
                rows.append(("Evidence", "; ".join(f"`{e}`" for e in r.evidence)))
            if r.fixes:
                rows.append(("Fix", " / ".join(r.fixes)))
            if r.snippets:
                rows.append(("Fix snippets", ", ".join(f"`{s}`" for s in sorted(r.snippets))))
            rows.append(
                (
                    "Raised in",
                    ", ".join(f"`{m}`" for m in sorted(r.modules)) or "not raised by this version",
                )
            )
            lines += ["| | |", "|---|---|"]
            lines += [f"| {k} | {_cell(v)} |" for k, v in rows]
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def generate() -> str:
    """docs/findings.md as it should read; raises ValueError naming what is out of step."""
    sys.path.insert(0, str(PKG.parent))
    from gpusight.finding_catalogue import CATALOGUE

    ids = schema_ids()
    raised = scan(set(ids) | set(CATALOGUE))
    wrong = problems(ids, set(CATALOGUE), set(raised))
    if wrong:
        raise ValueError("finding catalogue out of step:\n  " + "\n  ".join(wrong))
    return render(ids, raised)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail if the doc is out of date")
    args = parser.parse_args(argv)
    try:
        text = generate()
    except ValueError as err:
        print(f"gen_findings_doc: {err}", file=sys.stderr)
        return 1
    if args.check:
        if not DOC.is_file() or DOC.read_text("utf-8") != text:
            print(
                f"gen_findings_doc: {DOC.relative_to(ROOT)} is out of date: "
                "run python scripts/gen_findings_doc.py",
                file=sys.stderr,
            )
            return 1
        return 0
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text, "utf-8")
    print(f"gen_findings_doc: wrote {DOC.relative_to(ROOT)} ({len(schema_ids())} ids)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
