"""``python -m wticonv.cli``: the same as ``python -m wticonv`` and the ``wticonv`` command."""

import sys

from wticonv.cli import main

sys.exit(main())
