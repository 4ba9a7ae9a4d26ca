"""The scratch folder a re-run works in: a copy of the user's folder, so that what the script
writes there (metrics, checkpoints, logs) lands in the copy and the user's files stay as they
were.

Files are cloned where the file system can (copy-on-write: instant, no space), else copied while
they fit the limits; what does not fit, and folders that are tooling rather than the script's
(``.git``, virtual environments), are symbolic links to the user's own. A re-run's writes through
such a link are caught by its guard (``write_guard``): a file opened to be replaced is first made
a file of the copy's own; anything else that would change the user's files is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

COPY_MAX_FILE = 64 << 20
"""A file larger than this is linked, not copied (a dataset, as a rule), unless it is one a
training script writes over (``WRITTEN_SUFFIXES``)."""
COPY_MAX_TOTAL = 1 << 30
WRITTEN_SUFFIXES = frozenset(".pt .pth .ckpt .safetensors .bin .h5 .keras .onnx .log .csv".split())
COPY_MAX_FILES = 20_000
COPY_MAX_ENTRIES = 100_000
"""Past the copy's limits its folders are still made (so that a run can add files to them) and
their files linked, up to this many entries; then whole folders are linked."""
LINKED_DIRS = frozenset(
    ".git .hg .svn .venv venv .tox .nox node_modules .mypy_cache .ruff_cache .pytest_cache".split()
)
SKIPPED = frozenset({"__pycache__", ".ipynb_checkpoints"})
_FICLONE = 0x40049409  # Linux ioctl: the destination shares the source's blocks until written


@dataclass
class Sandbox:
    root: str
    """The user's folder the copy stands for."""
    path: str
    holder: str = ""
    """The temporary folder the copy lies in, under the folder's own name: a script that writes
    beside its folder (``os.chdir("../logs")``) writes into it, and it goes with the copy."""
    linked: list[str] = field(default_factory=list)
    """Entries (relative) linked to the user's own instead of copied."""
    copied_bytes: int = 0

    def remove(self) -> None:
        shutil.rmtree(self.holder or self.path, ignore_errors=True)

    def data_links(self) -> list[str]:
        """What the copy links because it is too large or too many to copy (tooling aside)."""
        return [r for r in self.linked if r.split("/", 1)[0] not in LINKED_DIRS]

    def inside(self, rel: str) -> str:
        return os.path.join(self.path, rel)

    def original(self, path: str) -> str:
        """The user's file that ``path`` in the copy stands for; a path outside it as it is."""
        rel = os.path.relpath(os.path.abspath(path), self.path)
        return path if rel.startswith("..") else os.path.join(self.root, rel)

    def files_back(self, data: Any) -> Any:
        """``data`` (a run's facts) with every ``file`` in the copy named as the user's own:
        the fixes read and patch the user's lines after the copy is gone."""
        if isinstance(data, dict):
            return {
                k: self.original(v) if k == "file" and isinstance(v, str) else self.files_back(v)
                for k, v in data.items()
            }
        if isinstance(data, list):
            return [self.files_back(v) for v in data]
        return data


def make(root: str, files: Mapping[str, str] | None = None, prefix: str = "gpusight-") -> Sandbox:
    """A copy of ``root`` in a new temporary folder; ``files`` (relative path -> text) are
    written into it instead of their originals. The caller removes it (``Sandbox.remove``)."""
    root = os.path.abspath(root)
    holder = tempfile.mkdtemp(prefix=prefix)
    box = Sandbox(root, os.path.join(holder, os.path.basename(root) or "folder"), holder)
    budget = _Budget(skip=os.path.realpath(holder))
    try:
        os.mkdir(box.path)
        _fill(box, box.root, box.path, "", dict(files or {}), budget)
        for rel, text in (files or {}).items():
            target = box.inside(rel)
            if not os.path.lexists(target):  # a new file the patch adds
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w", encoding="utf-8") as f:
                    f.write(text)
    except BaseException:
        box.remove()
        raise
    box.copied_bytes = budget.bytes
    return box


@dataclass
class _Budget:
    skip: str = ""
    """The copy itself, where the temporary folder lies below the one copied."""
    bytes: int = 0
    files: int = 0
    entries: int = 0

    @property
    def spent(self) -> bool:
        return self.entries >= COPY_MAX_ENTRIES


def _fill(box: Sandbox, src: str, dst: str, rel: str, files: dict[str, str], b: _Budget) -> None:
    with os.scandir(src) as it:
        entries = sorted(it, key=lambda e: e.name)  # the same copy every time
    for e in entries:
        b.entries += 1
        r = f"{rel}/{e.name}" if rel else e.name
        target = os.path.join(dst, e.name)
        if e.name in SKIPPED or os.path.realpath(e.path) == b.skip:
            continue  # bytecode of patched files must not come from the user's cache
        if r in files:
            with open(target, "w", encoding="utf-8") as f:
                f.write(files.pop(r))
        elif (
            e.is_dir(follow_symlinks=False)
            and e.name not in LINKED_DIRS
            and not (b.spent and not _holds(r, files, b.skip, e.path))
        ):
            os.mkdir(target)
            _fill(box, e.path, target, r, files, b)
        elif e.is_file(follow_symlinks=False) and _copied(e, target, b):
            pass
        elif e.is_symlink():
            os.symlink(_link_target(box, e.path), target)
        else:
            os.symlink(os.path.abspath(e.path), target)
            box.linked.append(r)


def _holds(rel: str, files: dict[str, str], skip: str, path: str) -> bool:
    """Whether a folder must be walked though the copy's limits are reached: a patched file
    lies below it, or the copy itself does (its link would loop)."""
    prefix = rel + "/"
    real = os.path.realpath(path)
    return any(f.startswith(prefix) for f in files) or skip.startswith(real + os.sep)


def _link_target(box: Sandbox, path: str) -> str:
    """A link of the user's own: relative where it stays inside the folder (it then names the
    copy's file), else to where it points."""
    to = os.readlink(path)
    real = os.path.realpath(path)
    if not os.path.isabs(to) and (real + os.sep).startswith(os.path.realpath(box.root) + os.sep):
        return to
    return real


def _copied(e: os.DirEntry[str], target: str, b: _Budget) -> bool:
    size = e.stat(follow_symlinks=False).st_size
    if _clone(e.path, target):
        b.files += 1
        return True
    big = size > COPY_MAX_FILE and os.path.splitext(e.name)[1].lower() not in WRITTEN_SUFFIXES
    if big or b.bytes + size > COPY_MAX_TOTAL or b.files >= COPY_MAX_FILES:
        return False
    shutil.copy2(e.path, target)
    b.bytes += size
    b.files += 1
    return True


def _clone(src: str, dst: str) -> bool:
    """A copy-on-write clone (btrfs, XFS, ...); False where the file system has none."""
    try:
        with open(src, "rb") as s, open(dst, "xb") as d:
            try:
                fcntl.ioctl(d.fileno(), _FICLONE, s.fileno())
            except OSError:
                ok = False
            else:
                ok = True
    except OSError:
        return False
    if not ok:
        with contextlib.suppress(OSError):
            os.unlink(dst)
        return False
    shutil.copystat(src, dst)
    return True
