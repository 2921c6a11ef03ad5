"""`composer -m launcher.train PARAMETERS` and `python -m launcher.train PARAMETERS`."""

import sys

from launcher.train.main import main

if __name__ == "__main__":
    sys.exit(main())
