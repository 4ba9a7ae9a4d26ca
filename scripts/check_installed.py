"""Check gpusight as a user gets it: installed from the wheel into a fresh environment.

    python -m venv /tmp/v && /tmp/v/bin/pip install dist/gpusight-*.whl jupyterlab
    /tmp/v/bin/python scripts/check_installed.py

Run with that environment's Python (Makefile target `test-wheel` does all three). Checks that
`jupyter labextension list` shows gpusight enabled and OK, that the installed labextension is
the production build within its JS budget (`check_wheel.production_problems`), and that the
package works there without torch: `gpusight check` answers with a valid report. Exits non-zero
naming what is wrong.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from check_wheel import JS_BUDGET_BYTES, production_problems


def main() -> int:
    problems: list[str] = []
    bindir = Path(sys.executable).parent
    ext = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "gpusight"

    import gpusight

    where = Path(gpusight.__file__).resolve()
    if Path(sys.prefix).resolve() not in where.parents:
        problems.append(f"gpusight imports from {where}, not from this environment ({sys.prefix})")

    jupyter = shutil.which("jupyter", path=str(bindir))
    if jupyter is None:
        problems.append(f"no jupyter in {bindir}: install jupyterlab beside the wheel")
    else:
        out = subprocess.run(
            [jupyter, "labextension", "list"], capture_output=True, text=True, timeout=300
        )
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
        line = next((ln for ln in text.splitlines() if ln.strip().startswith("gpusight ")), "")
        version = f"v{gpusight.__version__}"
        if not (version in line and "enabled" in line and "OK" in line):
            problems.append(
                f"jupyter labextension list does not show gpusight {version} "
                f"enabled and OK:\n{text}"
            )

    static = ext / "static"
    if not static.is_dir():
        problems.append(f"no labextension installed at {ext}")
        js_total = 0
    else:
        js = {p.name: p.read_bytes() for p in static.glob("*.js")}
        others = [p.name for p in static.iterdir() if not p.name.endswith(".js")]
        prod, js_total = production_problems(js, others)
        problems += prod

    cli = shutil.which("gpusight", path=str(bindir))
    if cli is None:
        problems.append(f"no gpusight command in {bindir}")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "r.json"
            run = subprocess.run(
                [cli, "check", "--json", str(report)], capture_output=True, text=True, timeout=300
            )
            if run.returncode != 0 or not report.is_file():
                problems.append(f"gpusight check failed ({run.returncode}): {run.stderr[-2000:]}")
            else:
                try:
                    data = gpusight.load_report(report)
                except gpusight.ReportValidationError as err:
                    problems.append(f"gpusight check wrote an invalid report: {err}")
                else:
                    if data["kind"] != "check":
                        problems.append(f"gpusight check wrote a {data['kind']!r} report")

    if problems:
        print("check_installed: the installed gpusight is not right:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(
        f"check_installed: OK gpusight {gpusight.__version__} in {sys.prefix}: labextension "
        f"enabled, production ({js_total / 1024:.0f} KiB of {JS_BUDGET_BYTES / 1024:.0f} KiB "
        f"JS), `gpusight check` wrote a valid report; "
        f"package.json {json.loads((ext / 'package.json').read_text())['version']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
