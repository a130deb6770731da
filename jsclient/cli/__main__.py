"""``python -m jsclient.cli``: the jsclient command."""

import sys

from . import main

sys.exit(main())
