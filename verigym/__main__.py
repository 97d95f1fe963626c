import sys

from verigym.cli import main

sys.exit(main())
