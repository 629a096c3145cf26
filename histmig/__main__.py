"""``python -m histmig`` and the ``histmig`` command: the command line (:mod:`histmig.cli`),
imported under a SIGINT handler of its own, as the import takes a few tenths of a second:
Ctrl-C then, with nothing begun, is said in the one line of any interrupt, exit 130, and
no traceback."""

import os
import signal

from histmig.interrupt import EXIT_INTERRUPTED, SAID


def main() -> None:
    """Import the command line and run it (:func:`histmig.cli.main`)."""
    signal.signal(signal.SIGINT, _interrupted)
    from histmig.cli import main as command_line

    command_line()


def _interrupted(signum: int, frame: object) -> None:
    os.write(2, f"{SAID}\n".encode())
    os._exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
