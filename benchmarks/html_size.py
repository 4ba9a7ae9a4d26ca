"""Sizes of exported HTML: the bundle, the exported file, the compare page, the notebook output.

    npm run build:standalone && .venv/bin/python benchmarks/html_size.py

Writes benchmarks/results/html-size.json. The reports are python_pkg/tests/html_support.py's: a
typical diagnosed run (a minute of NVML samples at 10 Hz, 200 steps, 3 findings, 2 what-ifs, 4
benchmarks) and the same run after its fix. The target: a typical report's file under 500 KB
(test_html_export.py checks it too).
"""

from __future__ import annotations

import gzip
import json
import sys
from typing import Any

from harness.cli import Parser
from harness.paths import PKG, RESULTS, ROOT, on_path
from harness.record import git_commit, now

on_path(PKG / "tests")

from gpusight.html_export import (  # noqa: E402
    compare_page,
    load_assets,
    notebook_html,
    notebook_loader,
    report_page,
)
from gpusight.report import load_report  # noqa: E402
from html_support import fixed_report, typical_report  # noqa: E402

TARGET_BYTES = 500_000


def size(text: str) -> dict[str, int]:
    raw = text.encode("utf-8")
    return {"bytes": len(raw), "gzip_bytes": len(gzip.compress(raw, 9, mtime=0))}


def main(argv: list[str] | None = None) -> int:
    Parser(__doc__).parse_args(argv)
    assets = load_assets()
    typical = typical_report()
    minimal = load_report(ROOT / "src" / "report" / "fixtures" / "minimal-report.json")
    full_fixture = load_report(ROOT / "src" / "report" / "fixtures" / "full-report.json")
    typical_page = report_page(typical)
    results: dict[str, Any] = {
        "bundle_js": size(assets.bundle),
        "page_template_without_bundle": size(assets.template),
        "typical_report_json_compact": size(typical.to_json(indent=None)),
        "exported_file": {
            "typical_report": size(typical_page),
            "full_fixture": size(report_page(full_fixture)),
            "minimal_check_report": size(report_page(minimal)),
        },
        "compare_page_typical_before_after": size(compare_page(typical, fixed_report())),
        "notebook_output_text_html": {
            "loader_with_gzip_base64_bundle": size(notebook_loader()),
            "typical_report": size(notebook_html(typical)),
            "minimal_check_report": size(notebook_html(minimal)),
            "if_the_bundle_were_inlined_raw": size(assets.bundle + notebook_html(typical))["bytes"]
            - size(notebook_loader())["bytes"],
        },
    }
    typical_bytes = results["exported_file"]["typical_report"]["bytes"]
    out = {
        "what": "bytes of the standalone bundle, exported HTML files and Report._repr_html_ "
        "notebook outputs, for python_pkg/tests/html_support.py's typical report "
        "(60 s of 10 Hz NVML samples, 200 steps, 3 findings, 2 what-ifs, 4 benchmarks)",
        "command": "npm run build:standalone && .venv/bin/python benchmarks/html_size.py",
        "target_bytes": TARGET_BYTES,
        "meets_target": typical_bytes < TARGET_BYTES,
        "recorded_at": now(),
        "commit": git_commit(),
        "results": results,
    }
    path = RESULTS / "html-size.json"
    path.write_text(json.dumps(out, indent=2) + "\n", "utf-8")
    print(json.dumps(out, indent=2))
    return 0 if out["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
