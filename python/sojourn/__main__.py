import sys

from .cli import main

# `python -m sojourn …`; importing this module (tests import every module on its own) runs nothing.
if __name__ == "__main__":
    sys.exit(main())
