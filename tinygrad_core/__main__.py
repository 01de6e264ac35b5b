"""`python -m tinygrad_core`: the `tinygrad-core` command."""
import sys
from tinygrad_core.cli import main

sys.exit(main())
