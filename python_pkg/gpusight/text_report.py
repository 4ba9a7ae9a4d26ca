"""A report as readable terminal text, in two views: the whole report (``render``: verdict,
machine, checklist, findings with evidence and fix) and the few lines ``gpusight run`` ends with
(``render_summary``, ``render_what_if``).

``render`` works on the report's dict form (the schema contract), so a loaded JSON file renders
the same as a fresh report. ASCII only, so any terminal encoding can print it; colour is ANSI and
only asked for when the output is a terminal (``use_color``). Every report string is escaped
(``printable``) before it reaches the terminal.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from collections.abc import Mapping
from typing import IO, Any

from .breakdown_labels import BREAKDOWN_LABELS
from .durations import format_ms
from .first_fix import changed_lines, first_finding, gain_text
from .knobs import gain_rule
from .one_gain import repeat_of, shows_gain
from .report import RENDERERS, Finding, Report, sort_findings
from .rules.raised_run import raised_before_measuring
from .speed_of_light_text import lines as speed_of_light_lines
from .speed_of_light_text import mfu_text

_RESET = "\033[0m"
_ANSI = re.compile(r"\033\[[0-9;]*m")
_STYLES = {
    "bold": "\033[1m",
    "dim": "\033[2m",
    "red": "\033[31m",
    "green": "\033[32m",
    "yellow": "\033[33m",
    "cyan": "\033[36m",
}
STATUS_TAG = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "info": "INFO", "not_checked": "SKIP"}
_STATUS_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "red",
    "info": "cyan",
    "not_checked": "dim",
}
_SEVERITY_STYLE = {"critical": "red", "warn": "yellow", "info": "cyan"}


# Characters a terminal acts on instead of printing: C0 controls (ESC starts colour, cursor and
# hyperlink sequences; CR overwrites a line) but tab and newline, DEL, C1 controls, and the
# bidirectional overrides that make a line show other code than it holds ("Trojan Source").
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on written as an escape (``\\x1b``):
    report strings (file names, source lines, diffs) are the user's, never terminal commands."""
    return _UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)


class EscapedStream:
    """A text stream whose writes go through ``printable``: for lines that carry report strings
    as they are printed."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(printable(text))

    def flush(self) -> None:
        self.out.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding: the stream's own
        return getattr(self.out, name)


def unescaped(stream: IO[str]) -> IO[str]:
    """The stream under an ``EscapedStream``: for data (a report's JSON) that must go out as it
    is, never for messages."""
    return stream.out if isinstance(stream, EscapedStream) else stream


def _printable_all(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {k: _printable_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable_all(v) for v in value]
    return value


def use_color(stream: IO[str], no_color: bool = False) -> bool:
    """Colour only on a terminal, and never when asked not to (``--no-color``, NO_COLOR, dumb)."""
    if no_color or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Out:
    def __init__(self, color: bool, width: int) -> None:
        self.color = color
        self.width = width
        self.lines: list[str] = []

    def style(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        return "".join(_STYLES[s] for s in styles) + text + _RESET

    def add(self, text: str = "") -> None:
        self.lines.append(text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def wrap(self, text: str, indent: int, first: str = "", *styles: str) -> None:
        """``first`` (may be styled) then ``text``, continued at column ``indent``."""
        lead = len(_ANSI.sub("", first))
        body = textwrap.wrap(
            text,
            max(20 + lead, self.width),
            initial_indent=" " * lead,
            subsequent_indent=" " * indent,
        ) or [" " * lead]
        self.add(first + self.style(body[0][lead:], *styles))
        for line in body[1:]:
            self.add(" " * indent + self.style(line[indent:], *styles))


def _fmt_value(value: Any, unit: str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value == "":
        return "'' (empty)"
    if unit == "bytes" and isinstance(value, (int, float)):
        gib = value / (1 << 30)
        return f"{gib:.1f} GiB" if gib >= 1 else f"{value / (1 << 20):.0f} MiB"
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}" if unit else text


def _machine(m: Mapping[str, Any], out: _Out) -> None:
    out.add(out.style("Machine", "bold"))
    parts = [f"Python {m.get('python')}", str(m.get("platform"))]
    if m.get("cpu_count") is not None:
        parts.append(f"{m['cpu_count']} CPUs")
    if m.get("memory_total_bytes") is not None:
        parts.append(f"{_fmt_value(m['memory_total_bytes'], 'bytes')} memory")
    if m.get("shm_bytes") is not None:
        parts.append(f"/dev/shm {_fmt_value(m['shm_bytes'], 'bytes')}")
    out.wrap(", ".join(parts), 2, "  ")
    t = m.get("torch")
    if t:
        build = (
            f"CUDA {t['cuda']}"
            if t.get("cuda")
            else (f"HIP {t['hip']}" if t.get("hip") else "CPU only")
        )
        torch_text = f"torch {t['version']} ({build})"
    else:
        torch_text = "torch not importable"
    driver = m.get("driver_version")
    driver_text = f"driver {driver} (CUDA {m.get('driver_cuda_version')})" if driver else "driver -"
    out.add(f"  {torch_text}, {driver_text}, nvcc {m.get('nvcc_version') or '-'}")
    for g in m.get("gpus", []):
        bits = [f"GPU {g['index']}: {g['name']}"]
        if g.get("capability"):
            bits.append(f"cc {g['capability']}")
        if g.get("memory_total_bytes") is not None:
            bits.append(_fmt_value(g["memory_total_bytes"], "bytes"))
        pcie = g.get("pcie") or {}
        if pcie.get("gen") is not None:
            link = f"PCIe Gen{pcie['gen']} x{pcie.get('width')}"
            if (pcie.get("max_gen"), pcie.get("max_width")) != (pcie.get("gen"), pcie.get("width")):
                link += f" (max Gen{pcie.get('max_gen')} x{pcie.get('max_width')})"
            bits.append(link)
        if g.get("power_limit_w") is not None:
            bits.append(f"{g['power_limit_w']:.0f} W limit")
        out.wrap(", ".join(bits), 4, "  ")


def _checks(checks: list[Mapping[str, Any]], out: _Out) -> None:
    out.add(out.style("Checklist", "bold"))
    label_w = min(28, max((len(c["label"]) for c in checks), default=0))
    for c in checks:
        tag = out.style(STATUS_TAG[c["status"]], _STATUS_STYLE[c["status"]])
        value = c["value"]
        if c.get("finding_id"):
            value += f"  [{c['finding_id']}]"
        head = f"  {tag}  {c['label']:<{label_w}}  "
        indent = 2 + 4 + 2 + label_w + 2
        if len(c["label"]) > label_w:
            out.add(f"  {tag}  {c['label']}")
            head = " " * indent
        out.wrap(value, indent, head)
        if c.get("detail") and c["status"] not in ("pass",):
            out.wrap(c["detail"], indent, " " * indent)


def _findings(findings: list[Mapping[str, Any]], out: _Out) -> None:
    out.add(out.style(f"Findings ({len(findings)})", "bold"))
    for n, f in enumerate(findings):
        if n:
            out.add()
        sev = out.style(f["severity"].upper(), _SEVERITY_STYLE[f["severity"]], "bold")
        out.add(f"  {sev}  {out.style(f['id'], 'dim')}")
        out.wrap(f["title"], 4, "    ", "bold")
        if f.get("detail"):
            out.wrap(f["detail"], 4, "    ")
        if f.get("evidence"):
            out.add("    " + out.style("Evidence", "bold"))
            for e in f["evidence"]:
                out.wrap(f"{e['label']}: {_fmt_value(e['value'], e.get('unit'))}", 8, "      ")
        impact = f.get("impact") or {}
        if impact.get("text"):
            basis = impact.get("basis", "none")
            label = {"measured": "Impact (measured)", "estimated": "Impact (estimate)"}.get(
                basis, "Impact"
            )
            out.wrap(impact["text"], 6, "    " + out.style(label, "bold") + ": ")
        fx = f.get("fix") or {}
        if fx.get("text"):
            out.wrap(fx["text"], 6, "    " + out.style("Fix", "bold") + ": ")
        if fx.get("patch"):
            # The change to the user's own lines comes first; the snippet is the general form.
            out.add("    " + out.style("Change to your code", "bold") + " (patch -p1):")
            for line in fx["patch"].rstrip("\n").splitlines():
                out.add("      " + line)
        elif fx.get("code"):
            # No line of the user's was found that this changes safely: say it is the general
            # form, to adapt.
            out.add(
                "    " + out.style("Generic snippet", "bold") + " (adapt the names to your code):"
            )
            for line in fx["code"].rstrip("\n").splitlines():
                out.add("      " + out.style("| ", "dim") + line)


def render(
    report: Report | Mapping[str, Any], color: bool = False, width: int | None = None
) -> str:
    """The report as terminal text."""
    data: Mapping[str, Any] = _printable_all(
        report.to_dict() if isinstance(report, Report) else report
    )
    if width is None:
        width = min(100, shutil.get_terminal_size((100, 24)).columns)
    out = _Out(color, width)
    title = data.get("title") or f"gpusight {data.get('kind')}"
    host = (data.get("machine") or {}).get("hostname")
    out.add(
        out.style(title, "bold") + f"  ({data.get('created_at')}" + (f", {host})" if host else ")")
    )
    verdict = data.get("verdict") or {}
    if verdict.get("summary"):
        blocked = verdict.get("bottleneck") not in (None, "none")
        out.wrap(verdict["summary"], 0, "", "red" if blocked else "green", "bold")
    out.add()
    if data.get("machine"):
        _machine(data["machine"], out)
        out.add()
    if data.get("checks"):
        _checks(data["checks"], out)
        out.add()
    sol = speed_of_light_lines((data.get("run") or {}).get("speed_of_light"))
    if sol:
        out.add(out.style("Speed of light", "bold"))
        for label, text in sol:
            out.wrap(text, 18, f"  {label:<16}")
        out.add()
    findings = data.get("findings") or []
    if findings:
        _findings(findings, out)
        out.add()
    else:
        out.add(out.style("No findings.", "green"))
        out.add()
    notes = data.get("notes") or []
    if notes:
        out.add(out.style("Notes", "bold"))
        for note in notes:
            out.wrap(note, 4, "  - ")
    return out.text().rstrip() + "\n"


CODE_LINES = 8
"""Of a fix's code without a patch, the lines the summary shows (the rest is in the report)."""


def _where(f: Finding) -> str:
    src = next((e.source for e in f.evidence if e.source is not None), None)
    return f" [{src.file}:{src.line}]" if src else ""


def _first_fix(f: Finding, out: _Out) -> None:
    gain = gain_text(f.impact)
    out.add(f"  do this first: {f.fix.text}")
    out.add(f"    for {f.id}: {f.title}{_where(f)}")
    # A finding that claims no gain says why in its impact text.
    why = f.impact.text if f.impact.basis == "none" and f.impact.text else None
    out.add(f"    gain: {gain or why or 'no figure (the report says why)'}")
    if f.fix.patch:
        for line in changed_lines(f.fix.patch):
            out.add(f"      {line}")
    elif f.fix.code and f.fix.language == "python":
        lines = f.fix.code.rstrip().splitlines()
        for line in lines[:CODE_LINES]:
            out.add(f"      {line}")
        if len(lines) > CODE_LINES:
            out.add(f"      ... ({len(lines) - CODE_LINES} more lines in the report)")
    elif f.fix.code:
        out.add(f"      {f.fix.code.strip().splitlines()[0]}")


def _host_lines(timed: dict[str, Any], most: int = 3) -> str:
    """``train.py:15 gc.collect() 148 ms (99%), ...``: the costliest lines the watch timed."""
    rows = [r for r in timed.get("lines") or [] if r.get("share_pct", 0) >= 1.0][:most]
    return ", ".join(
        f"{r['file']}:{r['line']} {(r.get('code') or '').strip()[:40]} "
        f"{format_ms(r['ms_per_step'])} ({r['share_pct']:.0f}%)"
        + (" in forward" if r.get("in_forward") else "")
        for r in rows
    )


SLOWED = 1.5
"""A traced step this many times the measured one is said beside the lines' times."""


def _traced(timed: dict[str, Any], step_ms: float) -> str:
    """`` (in steps traced line by line: 7.4 ms each, 1.37 ms measured)`` where the line clock
    slowed the steps it timed (a framework's loop of many Python calls): the lines' shares
    hold, their times are the traced steps'."""
    traced = float(timed.get("step_ms") or 0.0)
    if not step_ms or traced < SLOWED * step_ms:
        return ""
    return (
        f" (in steps traced line by line: {format_ms(traced)} each, {format_ms(step_ms)} measured)"
    )


def _part(key: str, gpu: bool) -> str:
    """A part of the step in words ("waiting for data"), not its key (``data_wait``)."""
    if key == "compute" and not gpu:
        return "compute (CPU)"
    label = BREAKDOWN_LABELS.get(key, key)
    return label[0].lower() + label[1:] if not label.startswith("GPU") else label


def render_summary(report: Report) -> str:
    """The short view: the verdict, the step's split, MFU, the change to make first with its
    gain marked measured or estimated, the other findings, the notes. Without colour, so the
    text is escaped whole."""
    out = _Out(color=False, width=100)
    run = report.run or {}
    out.add()
    head = "error" if raised_before_measuring(report) else report.verdict.bottleneck
    out.add(f"gpusight: {head}: {report.verdict.summary}")
    split = run.get("breakdown_ms") or {}
    total = run.get("step_time_ms") or 0.0
    if split and total:
        # Parts under half a percent of the step say nothing at this precision.
        gpu = bool(run.get("gpu_busy_pct")) or bool(report.machine.get("gpus"))
        parts = ", ".join(
            f"{_part(k, gpu)} {format_ms(v)}" for k, v in split.items() if v >= 0.005 * total
        )
        out.add(f"  step {format_ms(total)} over {run.get('steps')} steps: {parts}")
    timed = run.get("host_lines") or {}
    lines = _host_lines(timed)
    if lines:
        out.add(f"  host time by line{_traced(timed, total)}: {lines}")
    mfu = mfu_text(run.get("speed_of_light") or {})
    if mfu:
        out.add(f"  MFU: {mfu}")
    first = first_finding(report)
    if first is not None:
        _first_fix(first, out)
    others = [f for f in sort_findings(report.findings) if f is not first][:4]
    if others:
        out.add("  other findings:" if first is not None else "  findings:")
    for f in others:
        gain = gain_text(f.impact)
        out.add(f"    {f.severity:8} {f.id}: {f.title}{_where(f)}{f' ({gain})' if gain else ''}")
    for note in report.notes:
        out.add(f"  note: {note}")
    return printable(out.text())


def render_what_if(report: Report) -> str:
    """The what-if rows: each change's measured gain with its noise, and the change to make;
    empty without rows."""
    rows = report.what_if
    if not rows:
        return ""
    out = _Out(color=False, width=100)
    out.add("  what-if (the script re-run with one change, items per second):")
    for r in rows:
        if r.skipped:
            out.add(f"    {r.change}: not run ({r.skipped})")
        elif repeat_of(r) is not None:  # one change, one gain: its own row's (one_gain.py)
            out.add(f"    {r.change}: {repeat_of(r)} measured again (its finding compares them)")
        elif r.speedup is not None:
            noise = r.noise_pct or 0.0
            sig = (
                ""
                if gain_rule.wins(r.speedup, noise)
                else " (slower, beyond the noise)"
                if gain_rule.loses(r.speedup, noise)
                else " (within the noise)"
            )
            out.add(f"    {r.change}: {r.speedup:.2f}x ±{noise:.0f}%{sig}")
    best = max(
        (r for r in rows if shows_gain(r) and r.fix is not None),
        key=lambda r: r.speedup or 0.0,
        default=None,
    )
    if best is not None and best.fix is not None and (best.speedup or 0) > 1.0:
        out.add(f"  the best measured change: {best.change}: {best.fix.text}")
        if best.fix.patch:
            for line in changed_lines(best.fix.patch):
                out.add(f"      {line}")
    return printable(out.text())


RENDERERS.text = render
