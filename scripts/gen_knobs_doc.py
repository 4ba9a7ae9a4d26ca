"""Write docs/whatif.md, the changes the what-if measures, from the knobs' registry.

    python scripts/gen_knobs_doc.py           # write docs/whatif.md
    python scripts/gen_knobs_doc.py --check   # exit 1 if docs/whatif.md is out of date

Each knob of ``gpusight/knobs/__init__.py``'s ``REGISTRY``: its name (``gpusight run --what-if
--try``), what its module says it changes, the keys a re-run takes (``--inject``), the rows the
kernel's what-if measures (``gpusight.diagnose(experiments=...)``, ``%gpusight diagnose
--only``), its row in ``gpusight.diagnose_inference`` and the findings it is evidence of.
Importing the registry imports no torch.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "whatif.md"
sys.path.insert(0, str(ROOT / "python_pkg"))

from gpusight.knobs import REGISTRY, Situation  # noqa: E402
from gpusight.knobs.base import Knob  # noqa: E402

# How the kernel times each row (``LocalRow.procedure``).
HOW = {
    "cached": "timed on batches cached from your loader",
    "loader": "timed against a clone of your DataLoader, on the sweep's workers if it won: the "
    "most within the noise of its best",
    "sweep": "worker counts tried in turn, to the knee",
    "epoch_start": "a new epoch's start-up, spread over its batches",
    "batch_sweep": "the batch doubled to the knee, then checked with your loader",
}
# Rows the kernel measures that are no single knob's: several knobs' winners in one run.
TOGETHER = {"loader_combined": "the DataLoader settings that won, together in one DataLoader"}

HEAD = """# The what-if's changes

Generated from the knobs' registry (`python_pkg/gpusight/knobs/`) by
`python scripts/gen_knobs_doc.py`: do not edit by hand.

Each change is a *knob*, defined once and measured by two drivers:

- **re-run**: `gpusight run --what-if train.py` (and `%%gpusight --what-if` on a cell) runs your
  unmodified script once per change, the change injected; `--try NAME,...` picks knobs by name.
- **in the kernel**: `gpusight.diagnose(model, loader, ...)` (and `%gpusight diagnose`) times each
  change on copies of your model and DataLoader; `experiments=[KEY, ...]` (`--only KEY,...`) picks
  rows by key.

A measured gain is the whole step's, against the unchanged run measured alongside it, by one
rule (the gain must clear both runs' noise band); a change that cannot be measured says why.
Before the winners run together, the unchanged script runs again and each winner is judged
again against its runs: a change that won only against one slow run of it is left out (and,
where it stacks on the batch, tried on top of the winning batch instead).
"""


def _about(knob: Knob) -> str:
    """The first paragraph of the knob's own docstring, else its module's, on one line."""
    own = vars(type(knob)).get("__doc__")
    doc = inspect.cleandoc(own) if own else inspect.getdoc(sys.modules[type(knob).__module__])
    return " ".join((doc or "").split("\n\n")[0].split())


def _findings(knob: Knob) -> list[str]:
    return sorted({*knob.findings, *(r.finding_id for r in knob.local_rows())})


def _code(items: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f"`{x}`" for x in items) or "—"


def generate() -> str:
    lines = [HEAD, "| `--try` name | re-run keys (`--inject`) | kernel rows (`experiments=`) |"]
    lines.append("|---|---|---|")
    for knob in REGISTRY:
        rerun = _code(knob.keys) if knob.rerun else "not re-run"
        rows = _code([r.key for r in knob.local_rows()])
        lines.append(f"| `{knob.name}` | {rerun} | {rows} |")
    for key, what in TOGETHER.items():
        lines.append(f"| — | — | `{key}` ({what}) |")
    lines.append("")
    for knob in REGISTRY:
        lines += [f"## `{knob.name}`", "", _about(knob), ""]
        if not knob.rerun:
            lines += [f"Not re-run: {knob.not_planned(Situation.of({}))}.", ""]
        for r in knob.local_rows():
            lines.append(f"- In the kernel, `{r.key}`: {r.label} ({HOW[r.procedure]}).")
        if knob.infer_label:
            lines.append(
                f"- On a forward alone, `gpusight.diagnose_inference`: {knob.infer_label} "
                "(around each call of your model, interleaved with the call as you make it)."
            )
        if knob.local_rows() or knob.infer_label:
            lines.append("")
        lines += [f"Findings: {_code(_findings(knob))}.", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the doc is out of date")
    args = p.parse_args(argv)
    text = generate()
    if args.check:
        if DOC.read_text("utf-8") != text:
            print("docs/whatif.md is out of date: run python scripts/gen_knobs_doc.py")
            return 1
        return 0
    DOC.write_text(text, "utf-8")
    print(f"gen_knobs_doc: wrote {DOC.relative_to(ROOT)} ({len(REGISTRY)} knobs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
