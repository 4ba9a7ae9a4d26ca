"""Writes the pages ui-tests/tests/html-export.spec.ts opens (besides those `gpusight html` and
`gpusight diff --html` write): OUTDIR/before.json and after.json (a typical run and the same run
fixed, from python_pkg/tests/html_support.py), OUTDIR/outputs.html (two `Report._repr_html_`
notebook outputs on one page, as a frontend without the extension shows them), and
OUTDIR/nbconvert.html (python_pkg/tests/data/report_display.ipynb executed by nbclient and
converted by nbconvert's HTMLExporter).

    ../.venv/bin/python html_export_pages.py OUTDIR
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "python_pkg" / "tests"
sys.path.insert(0, str(TESTS))

import nbclient  # noqa: E402
import nbconvert  # noqa: E402
import nbformat  # noqa: E402
from gpusight.html_export import notebook_html  # noqa: E402
from html_support import fixed_report, typical_report  # noqa: E402


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    typical_report().save(out / "before.json")
    fixed_report().save(out / "after.json")

    (out / "outputs.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>outputs</title>'
        "</head><body>"
        f"<div class='output'>{notebook_html(typical_report())}</div>"
        f"<div class='output'>{notebook_html(fixed_report())}</div>"
        "</body></html>",
        "utf-8",
    )

    nb = nbformat.read(TESTS / "data" / "report_display.ipynb", as_version=4)
    # As nbclient runs by default (widget state stored): the report is no widget, so nbconvert
    # shows its text/html.
    nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(TESTS / "data")}},
    ).execute()
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    (out / "nbconvert.html").write_text(html, "utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
