"""``python -m gpu_ivm``: the same command line as ``gpu-ivm``."""

import sys

from .cli import main

sys.exit(main())
