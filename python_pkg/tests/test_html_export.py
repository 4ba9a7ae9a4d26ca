"""HTML export: escaping, the self-contained page, its size, `gpusight html` / `gpusight diff`,
and a notebook converted by nbconvert showing the report through ``Report._repr_html_``.

The page's behaviour in a browser (charts drawn, no request, no CSP violation, hostile strings
as text) is tested in ui-tests/tests/html-export.spec.ts with Chromium.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpusight import ReportValidationError
from gpusight.compare import compare_reports, render_comparison
from gpusight.html_export import (
    BUNDLE_GLOBAL,
    HtmlExportError,
    compare_page,
    embed_json,
    escape_html_text,
    escape_json_for_html,
    fill_template,
    load_assets,
    notebook_html,
    notebook_loader,
    report_page,
    script_hash,
)
from gpusight.shared_copy import shared
from html_support import fixed_report, typical_report

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
GPUSIGHT = [sys.executable, "-m", "gpusight"]

HOSTILE = [
    "</script><img src=x onerror=window.__pwned=1>",
    "</SCRIPT >",
    "<!-- <script>",
    "a & b > c < d",
    "line\u2028sep\u2029para",
    "@@GPUSIGHT_SCRIPT@@",
    "\"quotes\" 'single' \\ backslash",
    "ünïcødé ✓ 🚀",
]

try:
    load_assets()
    BUILT = True
except HtmlExportError:
    BUILT = False
needs_bundle = pytest.mark.skipif(
    not BUILT, reason="the standalone bundle is not built (npm run build:standalone)"
)


def hostile(data: Any, evil: str) -> Any:
    """Every string in ``data`` replaced by ``evil`` (keys and enum-valued fields kept)."""
    keep = {"schema_version", "kind", "severity", "status", "basis", "bottleneck", "id"}
    keep |= {"language", "created_at", "gpusight_version", "finding_id"}
    if isinstance(data, dict):
        return {k: (v if k in keep else hostile(v, evil)) for k, v in data.items()}
    if isinstance(data, list):
        return [hostile(v, evil) for v in data]
    return evil if isinstance(data, str) else data


def json_payload(page: str) -> Any:
    m = re.search(
        r'<script type="application/json" id="gpusight-report" data-gpusight="(\w+)">'
        r"([^<]*)</script>",
        page,
    )
    assert m, "no inert JSON element in the page"
    return m.group(1), json.loads(m.group(2))


# --- escaping -----------------------------------------------------------------------------------


@pytest.mark.parametrize("evil", HOSTILE)
def test_embedded_json_has_no_markup_and_means_the_same(evil: str) -> None:
    value = {"s": evil, "nested": [evil, {"k": evil}]}
    text = embed_json(value)
    assert not re.search("[<>&\u2028\u2029]", text)
    assert json.loads(text) == value


def test_json_escapes_are_unicode_escapes() -> None:
    assert escape_json_for_html('"</script>&\u2028\u2029"') == (
        '"\\u003c/script\\u003e\\u0026\\u2028\\u2029"'
    )


def test_html_text_escape() -> None:
    assert escape_html_text("<b a=\"1\" c='2'>&</b>") == (
        "&lt;b a=&quot;1&quot; c=&#39;2&#39;&gt;&amp;&lt;/b&gt;"
    )


def test_template_is_filled_in_one_pass() -> None:
    values = {"A": "@@GPUSIGHT_B@@", "B": "b"}
    assert fill_template("@@GPUSIGHT_A@@|@@GPUSIGHT_B@@", values) == "@@GPUSIGHT_B@@|b"
    with pytest.raises(HtmlExportError, match="unknown slot"):
        fill_template("@@GPUSIGHT_C@@", values)
    with pytest.raises(HtmlExportError, match="no slot"):
        fill_template("@@GPUSIGHT_A@@", values)


# --- the page -----------------------------------------------------------------------------------


@needs_bundle
def test_page_holds_the_bundle_verbatim_under_its_csp_hash() -> None:
    assets = load_assets()
    page = report_page(typical_report())
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert scripts == [assets.bundle]
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp
    policy = dict(d.strip().split(" ", 1) for d in csp.group(1).split(";"))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == f"'{script_hash(scripts[0])}'"
    assert "unsafe-eval" not in csp.group(1)
    assert policy["img-src"] == "data:"
    kind, data = json_payload(page)
    assert kind == "report"
    assert data == shared(json.loads(typical_report().to_json()))


@needs_bundle
@pytest.mark.parametrize("evil", HOSTILE[:3])
def test_hostile_strings_cannot_break_out(evil: str) -> None:
    data = hostile(typical_report().to_dict(), evil)
    page = report_page(data, private=True)  # every string as it is, the host name included
    # Only the template's own elements: the JSON element, the bundle, and nothing else.
    assert len(re.findall(r"</script", page, re.I)) == 2
    assert len(re.findall(r"<script", page, re.I)) == 2
    assert "<img" not in page and "<!--" not in page
    assert json_payload(page)[1] == data
    title = re.search(r"<title>(.*)</title>", page)
    assert title and "<" not in title.group(1)


@needs_bundle
def test_no_network_references_outside_the_report_data() -> None:
    """The page fetches nothing: every http(s) string is a namespace or schema identifier of
    the bundled code, or text in the report's data."""
    report = typical_report()
    report.notes.append("see https://example.com/issue and <a href='http://x'>")
    page = report_page(report)
    outside = re.sub(r'(data-gpusight="report">)[^<]*(</script>)', r"\1\2", page)
    assert "example.com" not in outside
    urls = set(re.findall(r"https?://[^\s\"'`)<>]+", outside))
    identifiers = {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xhtml",
        "http://www.w3.org/1999/xlink",
        "http://www.w3.org/XML/1998/namespace",
        "http://www.w3.org/2000/xmlns/",
        "http://json-schema.org/draft-07/schema#",
        "https://gpusight.invalid/schema/report/1.json",
    }
    assert urls <= identifiers, urls - identifiers
    for pattern in (r"\bsrc\s*=\s*[\"']?https?:", r"\bhref\s*=\s*[\"']?https?:", r"@import"):
        assert not re.search(pattern, outside, re.I), pattern
    assert not re.search(r"url\(\s*[\"']?https?:", outside, re.I)


@needs_bundle
def test_typical_report_file_is_under_500_kb(tmp_path: Path) -> None:
    """benchmarks/html_size.py records these sizes in benchmarks/results/html-size.json."""
    path = typical_report().save_html(tmp_path / "report.html")
    size = path.stat().st_size
    assert size < 500_000, size
    assert load_assets().bundle.encode() in path.read_bytes()


@needs_bundle
def test_save_html_validates_first(tmp_path: Path) -> None:
    report = typical_report()
    report.verdict.bottleneck = "gremlins"
    with pytest.raises(ReportValidationError, match=r"verdict\.bottleneck"):
        report.save_html(tmp_path / "bad.html")
    assert not (tmp_path / "bad.html").exists()


@needs_bundle
def test_lone_surrogates_are_written_as_json_escapes(tmp_path: Path) -> None:
    report = typical_report()
    report.notes = ["file \udcff.py"]  # a path decoded with surrogateescape
    path = report.save_html(tmp_path / "r.html")
    _, data = json_payload(path.read_text("utf-8"))
    assert data["notes"] == ["file \udcff.py"]


# --- the notebook fallback ----------------------------------------------------------------------


@needs_bundle
def test_repr_html_carries_the_compressed_bundle_and_the_data() -> None:
    report = typical_report()
    fragment = report._repr_html_()
    assert fragment == notebook_html(report)
    data = re.search(r'data-gpusight="report">([^<]*)</script>', fragment)
    assert data and json.loads(data.group(1)) == json.loads(report.to_json())
    # The loader unpacks exactly the bundle the exported file inlines.
    packed = re.search(r'atob\("([A-Za-z0-9+/=]+)"\)', notebook_loader())
    assert packed
    assert gzip.decompress(base64.b64decode(packed.group(1))).decode() == load_assets().bundle
    assert BUNDLE_GLOBAL in fragment
    # Where scripts do not run, the title and verdict stay readable as text.
    assert "resnet50 training step, batch 64" in fragment
    assert len(re.findall(r"</script", fragment, re.I)) == 2


@needs_bundle
def test_repr_html_escapes_hostile_strings() -> None:
    evil = HOSTILE[0]
    report = typical_report()
    report.title = evil
    report.verdict.summary = evil
    fragment = notebook_html(report)
    assert "<img" not in fragment
    assert len(re.findall(r"</script", fragment, re.I)) == 2


def test_repr_html_is_none_without_the_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpusight.html_export as html_export

    def missing() -> None:
        raise HtmlExportError("not built")

    monkeypatch.setattr(html_export, "notebook_html", lambda report: missing())
    assert typical_report()._repr_html_() is None


# --- CLI ----------------------------------------------------------------------------------------


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPUSIGHT, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


@needs_bundle
def test_cli_html(tmp_path: Path) -> None:
    src = typical_report().save(tmp_path / "run.json")
    done = run_cli("html", src)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "run.html"
    assert f"report written to {out}" in done.stderr
    assert json_payload(out.read_text("utf-8"))[1] == shared(json.loads(src.read_text()))

    done = run_cli("html", src, "-o", tmp_path / "named.html")
    assert done.returncode == 0 and (tmp_path / "named.html").is_file()


def test_cli_html_names_the_bad_field(tmp_path: Path) -> None:
    data = typical_report().to_dict()
    data["findings"][0]["severity"] = "fatal"
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(data))
    done = run_cli("html", src, "-o", tmp_path / "bad.html")
    assert done.returncode == 2
    assert "findings[0].severity" in done.stderr
    assert not (tmp_path / "bad.html").exists()
    done = run_cli("html", tmp_path / "missing.json")
    assert done.returncode == 2 and "cannot read report" in done.stderr


def test_compare_reports_matches_the_runs() -> None:
    c = compare_reports(typical_report().to_dict(), fixed_report().to_dict())
    assert c.speedup == pytest.approx(84.2 / 42.1)
    assert [(f.status, f.key) for f in c.findings] == [
        ("resolved", "code.pageable_copy@0"),
        ("new", "load.amp_unused"),
        # In the after report's order: largest recoverable share first (to_dict sorts).
        ("still", "load.input_bound"),
        ("still", "cfg.tf32_disabled"),
    ]
    copy = next(r for r in c.breakdown if r.key == "copy")
    assert (copy.before_ms, copy.after_ms) == (26.4, 0.4)
    assert copy.delta_ms == pytest.approx(-26.0)


def test_cli_diff_text(tmp_path: Path) -> None:
    before = typical_report().save(tmp_path / "before.json")
    after = fixed_report().save(tmp_path / "after.json")
    done = run_cli("diff", before, after)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out == render_comparison(
        compare_reports(json.loads(before.read_text()), json.loads(after.read_text())),
        str(before),
        str(after),
    )
    lines = out.splitlines()
    step = next(line for line in lines if line.strip().startswith("step time"))
    assert re.search(r"84\.2 ms\s+42\.1 ms\s+2\.00x faster", step), step
    busy = next(line for line in lines if line.strip().startswith("GPU busy"))
    assert re.search(r"37\.8%\s+81\.5%\s+\+43\.7 points", busy), busy
    copies = next(line for line in lines if "Host-device copies" in line)
    assert re.search(r"26\.4 ms\s+0\.40 ms\s+-26\.0 ms", copies), copies
    assert re.search(r"^\s+resolved\s+code\.pageable_copy@0\s+critical\s", out, re.M)
    assert re.search(r"^\s+new\s+load\.amp_unused\s+warn\s", out, re.M)
    assert re.search(r"^\s+still there\s+cfg\.tf32_disabled\s+warn\s", out, re.M)
    assert "findings: 1 resolved, 1 new, 2 still there" in out
    out.encode("ascii")  # any terminal prints it


@needs_bundle
def test_cli_diff_html(tmp_path: Path) -> None:
    before = typical_report().save(tmp_path / "before.json")
    after = fixed_report().save(tmp_path / "after.json")
    page = tmp_path / "diff.html"
    done = run_cli("diff", before, after, "--html", page)
    assert done.returncode == 0, done.stderr
    text = page.read_text("utf-8")
    kind, data = json_payload(text)
    assert kind == "compare"
    assert data == {
        "before": shared(json.loads(before.read_text())),
        "after": shared(json.loads(after.read_text())),
    }
    assert "<title>gpusight: before and after</title>" in text
    assert text == compare_page(before, after)


def test_cli_diff_refuses_a_bad_report(tmp_path: Path) -> None:
    before = typical_report().save(tmp_path / "before.json")
    bad = tmp_path / "after.json"
    bad.write_text('{"schema_version": "9.0"}')
    done = run_cli("diff", before, bad)
    assert done.returncode == 2
    assert "newer than this gpusight reads" in done.stderr


# --- nbconvert ----------------------------------------------------------------------------------


def execute_and_convert(store_widget_state: bool) -> tuple[dict[str, Any], str]:
    import nbclient
    import nbconvert
    import nbformat

    nb = nbformat.read(HERE / "data" / "report_display.ipynb", as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(HERE / "data")}},
        store_widget_state=store_widget_state,
    ).execute()
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    output: dict[str, Any] = nb.cells[-1].outputs[0]
    return output, html


def assert_report_in(html: str) -> None:
    # nbconvert re-serialises its page with BeautifulSoup: attributes come out sorted.
    data = re.search(r'<script[^>]*data-gpusight="report"[^>]*>([^<]*)</script>', html)
    assert data, "the report's data is not in the converted page"
    assert json.loads(data.group(1))["title"] == "resnet50 training step, batch 64"
    assert notebook_loader() in html
    assert "data-gpusight-fallback" in html


@needs_bundle
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_nbconvert_shows_the_report_without_widget_state() -> None:
    output, html = execute_and_convert(store_widget_state=False)
    assert {"text/html", "text/plain"} <= set(output["data"])
    assert_report_in(html)


@needs_bundle
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_nbconvert_shows_the_report_after_a_default_nbclient_run() -> None:
    # nbclient stores widget state by default; the report is no widget, so nbconvert, which does
    # not know application/vnd.gpusight.report+json, falls to the text/html beside it.
    output, html = execute_and_convert(store_widget_state=True)
    assert "application/vnd.jupyter.widget-view+json" not in output["data"]
    assert_report_in(html)


# A file name and a source line of the user's, as a patch carries them into every renderer.
EVIL_NAME = "</script><img src=x onerror=window.__pwned=1>\x1b]8;;http://evil\x07\u202e.py"
EVIL_LINE = "x = '</script><!--<script>alert(1)</script>'  # \x1b[2J\x1b[31m\rfake \u202egnp.exe"


def with_hostile_patch() -> Any:
    from gpusight.report import PatchFile

    report = typical_report()
    fix = report.findings[0].fix
    fix.patch = (
        f"--- a/{EVIL_NAME}\n+++ b/{EVIL_NAME}\n@@ -1,2 +1,2 @@\n {EVIL_LINE}\n"
        f"-{EVIL_LINE}\n+{EVIL_LINE}  # changed\n"
    )
    fix.patch_files = [PatchFile(EVIL_NAME, "0" * 64)]
    return report


@needs_bundle
def test_hostile_file_names_and_lines_in_a_patch_stay_text_in_html() -> None:
    report = with_hostile_patch()
    data = json.loads(report.to_json())
    for page in (report_page(data), notebook_html(report)):
        assert len(re.findall(r"<script", page, re.I)) == 2
        assert len(re.findall(r"</script", page, re.I)) == 2
        assert "<img" not in page and "<!--" not in page
        assert "\x1b" not in page  # the JSON escapes it
    assert json_payload(report_page(data, private=True))[1] == data


def test_hostile_file_names_and_lines_in_a_patch_stay_text_in_the_terminal() -> None:
    from gpusight.text_report import render

    report = with_hostile_patch()
    for color in (False, True):
        text = render(report, color=color, width=100)
        # Only the renderer's own colour codes reach the terminal: no other escape, no carriage
        # return, no bidirectional override.
        assert not re.sub(r"\x1b\[[0-9;]*m", "", text).count("\x1b")
        assert "\r" not in text and "\u202e" not in text and "\x07" not in text
        assert (
            "+++ b/</script><img src=x onerror=window.__pwned=1>\\x1b]8;;http://evil\\x07" in text
        )
        assert "\\x1b[2J\\x1b[31m\\rfake \\u202egnp.exe" in text


def test_a_shared_page_leaves_out_the_host_and_private_paths() -> None:
    import sys

    data = typical_report().to_dict()
    home = os.path.expanduser("~")
    data["notes"].append(f"torch from {sys.prefix}/lib/python3/site-packages; data in {home}/ds")
    page = report_page(data)
    shown = json_payload(page)[1]
    assert "hostname" not in shown["machine"] and "gpu-node-07" not in page
    assert sys.prefix not in page and f"{home}/ds" not in page
    assert "<python env>/lib/python3/site-packages" in shown["notes"][-1]
    assert "~/ds" in shown["notes"][-1]
    kept = json_payload(report_page(data, private=True))[1]
    assert kept["machine"]["hostname"] == "gpu-node-07" and kept["notes"] == data["notes"]
