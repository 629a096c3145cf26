"""``python -m histmig`` and the ``histmig`` command: the command line (:mod:`histmig.cli`),
imported and built under a SIGINT handler of its own (:func:`histmig.interrupt.before_run`),
as that takes a few tenths of a second: Ctrl-C then, with nothing begun, is said in the one
line of any interrupt, exit 130, and no traceback."""

import signal

from histmig.interrupt import before_run


def main() -> None:
    """Import the command line and run it (:func:`histmig.cli.main`)."""
    signal.signal(signal.SIGINT, before_run)
    from histmig.cli import main as command_line

    command_line()


if __name__ == "__main__":
    main()
