"""``python -m compat ...`` is the ``memshift`` command."""

import sys

from compat.cli import main

sys.exit(main())
