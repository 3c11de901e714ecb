"""The frozen app's entry point: `app.__main__:main`, as the `draftlight` script runs it.

No arguments open the window; `--self-test` runs the self-test; the other subcommands
work too (`Draftlight models --list`).
"""

import sys

from app.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
