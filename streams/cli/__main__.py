"""`python -m streams.cli`: the `xwait` command (how the supervisor starts its workers)."""

import sys

from streams.cli import main

sys.exit(main())
