"""``python -m wticonv`` runs the ``wticonv`` command."""

import sys

from wticonv.cli import main

sys.exit(main())
