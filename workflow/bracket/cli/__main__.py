"""`python -m bracket.cli`: the `bracket` command without its script on PATH."""

import sys

from bracket.cli import main

sys.exit(main())
