"""``python -m dotlab_hpc`` is the same program as ``dotlab-hpc``."""

import sys

from .cli import main

sys.exit(main())
