#!/usr/bin/env bash
# The README's pictures are the UI tests' own snapshots: a report in a notebook at 1,400 px and
# in the sidebar at 250 px. Re-run the layout test (real JupyterLab, Chromium), refresh its
# snapshots, copy both to docs/images/.
#   bash scripts/readme-images.sh        (after `make dev`; ~1 min)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
(cd ui-tests && npx playwright test tests/layout.spec.ts --workers=1 --update-snapshots)
mkdir -p docs/images
cp ui-tests/tests/layout.spec.ts-snapshots/notebook-1400-light-linux.png docs/images/report-notebook.png
cp ui-tests/tests/layout.spec.ts-snapshots/sidebar-250-light-linux.png docs/images/report-sidebar.png
echo "docs/images/report-notebook.png and docs/images/report-sidebar.png updated: look at them"
