"""Reports as self-contained HTML: the exported file, and the notebook fallback.

Both draw with the standalone bundle, ``gpusight/static/gpusight-report.js``: the same lit
elements as the JupyterLab extension (src/standalone.ts), built by ``npm run build:standalone``.

- ``report_page`` / ``compare_page`` / ``save_html``: one HTML file that needs nothing else: no
  network, no fonts, no other scripts. The page template (``gpusight-report.template.html``) is
  written at build time with a Content-Security-Policy that allows only the bundle (by its
  sha256); this module and the Export button (src/export/page.ts) fill the same slots by the same
  rules.
- ``notebook_html``: ``Report._repr_html_`` and the ``text/html`` of a report's display bundle
  (``jupyter/display.py``), for frontends without the extension (nbconvert, VS Code, Colab).
  The bundle travels gzip-compressed (about a third of its size) and a small loader unpacks it
  once per page.

Report strings never become markup: the report is embedded as JSON in a
``<script type="application/json">`` element with ``<``, ``>``, ``&``, U+2028 and U+2029 written as
``\\u003c`` etc., and titles are HTML-escaped.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .report import RENDERERS
from .report_schema import validate

if TYPE_CHECKING:
    from .report import Report

BUNDLE_NAME = "gpusight-report.js"
TEMPLATE_NAME = "gpusight-report.template.html"
#: The global the bundle defines (its IIFE name): ``gpusightReport.mountAll(document)``.
BUNDLE_GLOBAL = "gpusightReport"
SLOT_PATTERN = re.compile(r"@@GPUSIGHT_([A-Z]+)@@")
COMPARE_TITLE = "gpusight: before and after"

PageView = Literal["report", "compare"]


class HtmlExportError(RuntimeError):
    """The HTML assets are missing or do not belong together; the message says what to do."""


@dataclass(frozen=True)
class PageAssets:
    template: str
    bundle: str
    #: ``sha256-…`` of the bundle, as the template's Content-Security-Policy allows it.
    script_hash: str


def script_hash(script: str) -> str:
    """The CSP source expression for an inline script: ``sha256-<base64 of its UTF-8 digest>``."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


@lru_cache(maxsize=1)
def load_assets() -> PageAssets:
    """The bundle and page template from the installed package (read once per process)."""
    static = resources.files("gpusight").joinpath("static")
    try:
        bundle = static.joinpath(BUNDLE_NAME).read_text("utf-8")
        template = static.joinpath(TEMPLATE_NAME).read_text("utf-8")
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise HtmlExportError(
            f"gpusight's HTML bundle is missing (gpusight/static/{BUNDLE_NAME}): this copy of "
            "gpusight was installed from source without building its JavaScript. Run "
            "`npm run build:standalone` (or `make js`) in the source tree, or install a wheel."
        ) from exc
    expected = script_hash(bundle)
    if f"'{expected}'" not in template:
        raise HtmlExportError(
            f"gpusight/static/{TEMPLATE_NAME} does not allow the bundle beside it (its "
            "Content-Security-Policy names another script hash): the two come from different "
            "builds. Run `npm run build:standalone` again."
        )
    return PageAssets(template=template, bundle=bundle, script_hash=expected)


# --- escaping -----------------------------------------------------------------------------------

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_UNSAFE = re.compile("[<>&\u2028\u2029]")

_TEXT_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
_TEXT_UNSAFE = re.compile("[&<>\"']")


def escape_json_for_html(text: str) -> str:
    """JSON text made safe inside ``<script type="application/json">``.

    ``<``, ``>``, ``&``, U+2028 and U+2029 only ever occur inside JSON strings, where the
    ``\\uXXXX`` escape means the same character: the JSON is unchanged, but no report string can
    end the element (``</script>``) or open a comment (``<!--``).
    """
    return _JSON_UNSAFE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text)


def embed_json(value: Any) -> str:
    """``value`` as compact JSON, escaped for embedding (same escapes as src/export/page.ts)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return escape_json_for_html(text)


def escape_html_text(text: str) -> str:
    """Text for an HTML text node or a quoted attribute value."""
    return _TEXT_UNSAFE.sub(lambda m: _TEXT_ESCAPES[m.group(0)], text)


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """Fill ``@@GPUSIGHT_<NAME>@@`` slots in one pass.

    What goes into one slot is never searched for another, so a report string that reads
    ``@@GPUSIGHT_SCRIPT@@`` stays that text. Every slot must be filled, and every value used.
    """
    seen: set[str] = set()

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise HtmlExportError(f"the page template has an unknown slot {m.group(0)}")
        seen.add(name)
        return values[name]

    out = SLOT_PATTERN.sub(fill, template)
    missing = set(values) - seen
    if missing:
        raise HtmlExportError(f"the page template has no slot for {sorted(missing)}")
    return out


# --- pages --------------------------------------------------------------------------------------


def report_data(report: Report | Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """A report as its validated dict: a Report, a dict, a path or JSON text.

    Raises ReportValidationError naming the field, as ``load_report`` does.
    """
    from .report import Report, load_report

    if isinstance(report, Report):
        data = report.to_dict()
        validate(data)
        return data
    if isinstance(report, Mapping):
        return load_report(dict(report))
    return load_report(report)


def report_title(report: Mapping[str, Any]) -> str:
    """The page title for one report (src/export/page.ts reportTitle says the same)."""
    name = report.get("title") or f"gpusight {report.get('kind', '')} report"
    return f"{name} ({report.get('created_at', '')})"


def build_page(view: PageView, data: Any, title: str, assets: PageAssets | None = None) -> str:
    assets = assets or load_assets()
    return fill_template(
        assets.template,
        {
            "TITLE": escape_html_text(title),
            "VIEW": view,
            "DATA": embed_json(data),
            "SCRIPT": assets.bundle,
        },
    )


def report_page(report: Report | Mapping[str, Any] | str | Path, private: bool = False) -> str:
    """One report as a self-contained HTML page: with ``private`` (the page stays on this
    machine) its host name and paths as they are, else as ``shared_copy`` leaves them."""
    data = _for_page(report_data(report), private)
    return build_page("report", data, report_title(data))


def _for_page(data: dict[str, Any], private: bool) -> dict[str, Any]:
    from .shared_copy import shared

    return data if private else dict(shared(data))


def compare_page(
    before: Report | Mapping[str, Any] | str | Path,
    after: Report | Mapping[str, Any] | str | Path,
    private: bool = False,
) -> str:
    """Two reports compared (``<gs-compare>``) as a self-contained HTML page."""
    data = {
        "before": _for_page(report_data(before), private),
        "after": _for_page(report_data(after), private),
    }
    return build_page("compare", data, COMPARE_TITLE)


def write_page(text: str, path: str | Path) -> Path:
    """Write a page as UTF-8. A lone surrogate (a path read with surrogateescape) is written as
    its ``\\udcXX`` escape, which the JSON reads back as the same character."""
    from .atomic_write import write_text

    return write_text(path, text, errors="backslashreplace")


def save_html(
    report: Report | Mapping[str, Any] | str | Path, path: str | Path, private: bool = False
) -> Path:
    """Write ``report`` as one self-contained HTML file; returns the path."""
    return write_page(report_page(report, private), path)


def save_compare_html(
    before: Report | Mapping[str, Any] | str | Path,
    after: Report | Mapping[str, Any] | str | Path,
    path: str | Path,
) -> Path:
    return write_page(compare_page(before, after), path)


# --- notebook fallback --------------------------------------------------------------------------

# Runs in each output; unpacks the bundle at most once per page (later outputs only mount), and
# leaves the text fallback in place where it cannot (no DecompressionStream, scripts blocked).
_LOADER = """(function(){var g=window,n="%(global)s";\
if(g[n]&&g[n].mountAll){g[n].mountAll(document);return}\
if(g[n+"Loading"])return;\
if(typeof DecompressionStream!=="function")return;\
g[n+"Loading"]=1;\
var b=atob("%(payload)s"),a=new Uint8Array(b.length);\
for(var i=0;i<b.length;i++)a[i]=b.charCodeAt(i);\
new Response(new Blob([a]).stream().pipeThrough(new DecompressionStream("gzip"))).text()\
.then(function(code){var s=document.createElement("script");s.textContent=code;\
(document.head||document.documentElement).appendChild(s)})\
.catch(function(e){g[n+"Loading"]=0;console.error("gpusight: cannot unpack the report",e)})})();"""


@lru_cache(maxsize=1)
def notebook_loader() -> str:
    """The loader script with the compressed bundle (cached: compressing takes ~20 ms)."""
    bundle = load_assets().bundle.encode("utf-8")
    # mtime=0: the same bundle always gives the same bytes, so notebooks do not churn.
    packed = base64.b64encode(gzip.compress(bundle, compresslevel=9, mtime=0)).decode("ascii")
    return _LOADER % {"global": BUNDLE_GLOBAL, "payload": packed}


def fallback_text(report: Mapping[str, Any]) -> str:
    verdict = report.get("verdict") or {}
    summary = verdict.get("summary") or ""
    return f"{report_title(report)}: {summary}".rstrip(": ")


def notebook_html(report: Report | Mapping[str, Any]) -> str:
    """The report as an HTML fragment for a notebook output (``Report._repr_html_``).

    Where scripts run, the bundle draws the full report in place of the text line; where they
    do not (a static viewer), the line stays.
    """
    from .report import Report

    data = report.to_dict() if isinstance(report, Report) else dict(report)
    return (
        '<div class="jp-GpusightOutput">'
        f'<script type="application/json" data-gpusight="report">{embed_json(data)}</script>'
        f"<p data-gpusight-fallback>{escape_html_text(fallback_text(data))}</p>"
        f"<script>{notebook_loader()}</script>"
        "</div>"
    )


def _repr_html(report: Report) -> str | None:
    """``Report._repr_html_``: None where the bundle was not built (a source checkout)."""
    try:
        return notebook_html(report)
    except HtmlExportError:
        return None


RENDERERS.save_html = save_html
RENDERERS.repr_html = _repr_html
