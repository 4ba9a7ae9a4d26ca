"""scripts/check_wheel.py tells a development labextension from the production one users get."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_wheel", SCRIPTS / "check_wheel.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


cw = _load()

# What webpack writes: a production chunk is minified with no map; a development chunk of lit
# carries its dev-mode warning and points at its source map. css-loader's runtime (in both)
# merely contains the word sourceMappingURL.
PROD = b'var a=1;t+="\\n/*# sourceMappingURL=data:application/json;base64,".concat(x)'
DEV = b'issueWarning("dev-mode","Lit is in dev mode. Not recommended for production!");\n'
DEV_MAP = b"var a = 1;\n//# sourceMappingURL=lib_index_js.acc9.js.map\n"


def test_production_chunks_pass_within_the_budget() -> None:
    problems, total = cw.production_problems({"1.ab.js": PROD, "remoteEntry.cd.js": PROD}, [])
    assert problems == [] and total == 2 * len(PROD)


def test_lit_dev_mode_is_named() -> None:
    problems, _ = cw.production_problems({"1.ab.js": PROD, "vendors-lit.js": DEV}, [])
    assert len(problems) == 1 and "lit's dev mode in vendors-lit.js" in problems[0]


def test_source_maps_are_named() -> None:
    problems, _ = cw.production_problems({"lib_index_js.js": DEV_MAP}, [])
    assert len(problems) == 1 and "source maps (lib_index_js.js)" in problems[0]
    problems, _ = cw.production_problems({"1.ab.js": PROD}, ["1.ab.js.map", "LICENSE.txt"])
    assert len(problems) == 1 and "1.ab.js.map" in problems[0]


def test_the_js_budget_holds() -> None:
    big = {"1.js": b"x" * cw.JS_BUDGET_BYTES, "2.js": b"y"}
    problems, total = cw.production_problems(big, [])
    assert total == cw.JS_BUDGET_BYTES + 1
    assert len(problems) == 1 and "over the budget" in problems[0]
    assert cw.production_problems({"1.js": b"x" * cw.JS_BUDGET_BYTES}, [])[0] == []
