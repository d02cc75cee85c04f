import sys

from fake_gpus.plugin import main

sys.exit(main())
