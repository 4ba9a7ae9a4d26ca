"""``python -m gpusight`` is the ``gpusight`` command."""

import sys

from .cli import main

sys.exit(main())
