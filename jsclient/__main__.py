"""``python -m jsclient``: the jsclient command."""

import sys

from .cli import main

sys.exit(main())
