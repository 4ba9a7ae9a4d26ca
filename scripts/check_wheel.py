"""Check that a built wheel carries what a user's JupyterLab and kernel need.

    python scripts/check_wheel.py dist/gpusight-*.whl

A wheel without the prebuilt labextension installs fine and then shows nothing in JupyterLab, so
this is checked after every build (Makefile target `test-wheel`). Exits non-zero naming what is
missing.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

EXT = "share/jupyter/labextensions/gpusight"
# The JS static files are content-hashed; these are the names that do not change.
STATIC_REQUIRED = ("remoteEntry.", "style.js")


def check(wheel: Path) -> tuple[list[str], str]:
    """Return (problems, summary) for one wheel."""
    problems: list[str] = []
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            # The JSON members are small; keep them to look inside after closing the wheel.
            json_members = {n: zf.read(n) for n in names if n.endswith(".json")}
            bad = zf.testzip()
            if bad is not None:
                problems.append(f"corrupt member in the wheel: {bad}")
    except (OSError, zipfile.BadZipFile) as err:
        return [f"cannot read {wheel} as a wheel: {err}"], ""

    data_dirs = {n.split("/", 1)[0] for n in names if re.match(r"gpusight-[^/]+\.data/", n)}
    if len(data_dirs) != 1:
        problems.append(
            f"expected one gpusight-*.data/ directory, found {sorted(data_dirs) or 'none'}: "
            "the labextension is not shipped as shared data (pyproject.toml "
            "[tool.hatch.build.targets.wheel.shared-data])"
        )
        return problems, ""
    ext = f"{data_dirs.pop()}/data/{EXT}"

    package_json = f"{ext}/package.json"
    if package_json not in names:
        problems.append(f"missing {package_json}: build the labextension first (npm run build)")
    else:
        meta = json.loads(json_members[package_json])
        if meta.get("name") != "gpusight":
            problems.append(f"{package_json} names {meta.get('name')!r}, not 'gpusight'")
        load = meta.get("jupyterlab", {}).get("_build", {}).get("load")
        if not load:
            problems.append(f"{package_json} has no jupyterlab._build.load: not a built extension")
        elif f"{ext}/{load}" not in names:
            problems.append(f"{package_json} loads {load}, which the wheel does not hold")

    static = [n for n in names if n.startswith(f"{ext}/static/") and n.endswith(".js")]
    if not static:
        problems.append(f"no JavaScript under {ext}/static/")
    for prefix in STATIC_REQUIRED:
        if not any(Path(n).name.startswith(prefix) for n in static):
            problems.append(f"no {prefix}* under {ext}/static/")

    install = f"{ext}/install.json"
    if install not in names:
        problems.append(f"missing {install}")
    elif json.loads(json_members[install]).get("packageName") != "gpusight":
        problems.append(f"{install} does not name the package gpusight")

    schema = "gpusight/schema/report.schema.json"
    if schema not in names:
        wrong = [n for n in names if n.endswith("/schema/report.schema.json")]
        where = f" (found at {wrong[0]}: the package is not mapped to gpusight/)" if wrong else ""
        problems.append(f"missing {schema}{where}")
    else:
        try:
            json.loads(json_members[schema])
        except ValueError as err:
            problems.append(f"{schema} is not valid JSON: {err}")
    if any(n.startswith("gpusight/labextension/") for n in names):
        problems.append(
            "the labextension is also inside the package (gpusight/labextension/): "
            "ship it once, as shared data (drop it from the wheel's artifacts)"
        )
    # The standalone report bundle (exported HTML, Report._repr_html_), inside the package.
    for asset in (
        "gpusight/static/gpusight-report.js",
        "gpusight/static/gpusight-report.template.html",
    ):
        if asset not in names:
            problems.append(f"missing {asset}: build it first (npm run build:standalone)")
    for module in ("gpusight/__init__.py", "gpusight/report_schema.py"):
        if module not in names:
            problems.append(f"missing {module}")

    schemas_dir = f"{ext}/schemas/gpusight/"
    settings = [n for n in names if n.startswith(schemas_dir) and n.endswith(".json")]
    if not settings:
        problems.append(f"no settings schema under {schemas_dir}")

    summary = (
        f"{wheel.name}: labextension ({len(static)} JS files, {len(settings)} settings schema), "
        f"install.json, report schema, {sum(n.endswith('.py') for n in names)} Python modules"
    )
    return problems, summary


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check_wheel.py WHEEL", file=sys.stderr)
        return 2
    wheel = Path(argv[0])
    if not wheel.is_file():
        print(f"check_wheel: no such wheel: {wheel}", file=sys.stderr)
        return 1
    problems, summary = check(wheel)
    if problems:
        print(f"check_wheel: {wheel.name} is incomplete:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(f"check_wheel: OK {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
