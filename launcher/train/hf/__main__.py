import sys

from launcher.train.hf.main import main

sys.exit(main())
