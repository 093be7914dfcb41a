"""``python -m jigs.cli``: the ``jigs`` command."""

import sys

from jigs.cli import main

sys.exit(main())
