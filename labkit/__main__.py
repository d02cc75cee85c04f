"""``labkit`` (the console script) and ``python -m labkit``.

The CLI module is imported inside :func:`entry` so that a Ctrl-C while it loads (the first second
or so) ends with exit code 130 and no traceback, like a Ctrl-C at any later moment.
"""

import sys


def entry() -> int:
    try:
        # lazy: start-up (a Ctrl-C while the CLI's modules load must exit 130, not print a traceback)
        from labkit.cli import main
    except KeyboardInterrupt:
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(entry())
