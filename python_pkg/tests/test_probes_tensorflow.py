"""TensorFlow probe: never imports it when absent; asks a child process when present."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpusight.probes import tensorflow_info


@pytest.mark.skipif(tensorflow_info.installed(), reason="TensorFlow is installed here")
def test_absent_tensorflow_is_not_imported() -> None:
    facts = tensorflow_info.probe()
    assert facts.installed is False and facts.why == "TensorFlow is not installed"
    assert "tensorflow" not in sys.modules


def test_present_tensorflow_is_asked_in_a_child(tmp_path: Path) -> None:
    """A stand-in package named tensorflow (TensorFlow itself is not installed here); its import
    leaves a marker file, which shows the import happened in the child, not in this process."""
    pkg = tmp_path / "tensorflow"
    (pkg / "config").mkdir(parents=True)
    marker = tmp_path / "imported-by"
    (pkg / "__init__.py").write_text(
        "import os\n"
        f"open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "__version__ = '2.99.0'\n"
        "from . import config\n"
    )
    (pkg / "config" / "__init__.py").write_text(
        "class _D:\n"
        "    def __init__(self, n): self.name = n\n"
        "def list_physical_devices(kind):\n"
        "    return [_D('/physical_device:GPU:0')] if kind == 'GPU' else []\n"
    )
    code = (
        "import os, sys, json\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from gpusight.probes import tensorflow_info\n"
        "f = tensorflow_info.probe()\n"
        "print(json.dumps([f.installed, f.version, f.gpus, 'tensorflow' in sys.modules, "
        "os.getpid()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    installed, version, gpus, imported_here, pid = __import__("json").loads(out.stdout)
    assert installed is True and version == "2.99.0"
    assert gpus == ["/physical_device:GPU:0"]
    assert imported_here is False
    assert int(marker.read_text()) != pid
    assert os.path.exists(marker)


def test_broken_tensorflow_is_not_checked(tmp_path: Path) -> None:
    pkg = tmp_path / "tensorflow"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('libcudart.so.11.0: cannot open')\n")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from gpusight.probes import tensorflow_info\n"
        "print(tensorflow_info.probe().why)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "importing tensorflow failed" in out.stdout and "libcudart.so.11.0" in out.stdout
