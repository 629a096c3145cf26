"""``python -m histmig``: the same command line as ``histmig``."""

from histmig.cli import main

main()
