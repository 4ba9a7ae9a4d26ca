"""JupyterLab server for the UI tests: galata's helpers, no token, a throw-away root dir.

Never use this configuration outside tests: it turns off the server's protections.
"""

import os
from pathlib import Path

from jupyterlab.galata import configure_jupyter_server

c = get_config()  # type: ignore[name-defined]  # noqa: F821
configure_jupyter_server(c)

# Nothing outside the machine is reachable in CI: no news, no update checks, no PyPI search.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabApp.extension_manager = "readonly"
# CI containers run as root; the server refuses that unless told.
c.ServerApp.allow_root = True

# sidebar.spec.ts needs a kernel without gpusight: setup-nogs-kernel.sh puts its spec in
# .nogs/kernels. KernelSpecManager.kernel_dirs is not configurable; JUPYTER_PATH is read when
# the server looks for kernels, after this file.
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    p for p in (str(Path(__file__).resolve().parent / ".nogs"), os.environ.get("JUPYTER_PATH")) if p
)
