"""``python -m wticonv`` runs the ``wticonv`` command."""

import sys

from .cli import main

sys.exit(main())
