"""``python -m certkit`` runs the command line."""

import sys

from certkit.cli import main

sys.exit(main())
