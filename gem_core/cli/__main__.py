"""``python -m gem_core.cli`` runs the ``gem`` command (what the console script does)."""

import sys

from gem_core.cli import main

sys.exit(main())
