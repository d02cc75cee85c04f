import sys

from fake_gpus.cli import main

sys.exit(main())
