"""The built extension is what JupyterLab sees: `jupyter labextension list` shows it enabled."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gpusight
import pytest

BUILT = Path(gpusight.__file__).parent / "labextension" / "package.json"


@pytest.mark.skipif(not BUILT.exists(), reason="labextension not built (make js)")
def test_jupyter_lists_gpusight_enabled() -> None:
    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent))
    if jupyter is None:
        pytest.skip("jupyter is not installed beside this Python")
    out = subprocess.run(
        [jupyter, "labextension", "list"], capture_output=True, text=True, timeout=120
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # drop the colours
    version = json.loads(BUILT.read_text("utf-8"))["version"]
    line = next((ln for ln in text.splitlines() if ln.strip().startswith("gpusight ")), None)
    assert line is not None, text
    assert f"v{version}" in line and "enabled" in line and "OK" in line, line
