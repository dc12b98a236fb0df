import sys

from kraftd.cli import main

sys.exit(main())
