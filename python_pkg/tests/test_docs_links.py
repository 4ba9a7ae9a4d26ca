"""The repository carries its own docs: nothing points outside it, and the docs' links resolve."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Built by parts so that this file does not match itself.
OUTSIDE = ("../" + "shared", "/work/" + "shared")
DOCS = [
    "README.md",
    "CONTRIBUTING.md",
    "benchmarks/README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_file_points_outside_the_repository() -> None:
    hits = []
    for path in tracked_files():
        if not path.is_file() or path.suffix in (".png", ".whl", ".gz"):
            continue
        try:
            text = path.read_text("utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if any(o in line for o in OUTSIDE):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("doc", DOCS)
def test_the_docs_links_resolve(doc: str) -> None:
    path = ROOT / doc
    links = LINK.findall(path.read_text("utf-8"))
    local = [link for link in links if not re.match(r"^[a-z]+:", link)]
    missing = [link for link in local if not (path.parent / link).exists()]
    assert not missing, f"{doc} links to missing files: {missing}"


def test_the_docs_exist_and_link_each_other() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    for doc in ("docs/architecture.md", "docs/findings.md", "docs/report.md", "CONTRIBUTING.md"):
        assert (ROOT / doc).is_file() and f"]({doc})" in readme
