"""``python -m flows.cli``: the ``linkedqa`` command line."""

import sys

from flows.cli import main

if __name__ == "__main__":  # worker processes re-import the parent's __main__ under another name: no command there
    sys.exit(main())
