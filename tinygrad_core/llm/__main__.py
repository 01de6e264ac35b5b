import sys
from tinygrad_core.llm.cli import main

sys.exit(main())
