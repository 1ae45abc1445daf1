"""`python -m kerasbert ...` = the `kerasbert` command."""

import sys

from kerasbert.cli import main

sys.exit(main())
