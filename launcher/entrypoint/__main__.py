import sys

from launcher.entrypoint.main import main

if __name__ == "__main__":
    sys.exit(main())
