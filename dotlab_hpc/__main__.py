"""``python -m dotlab_hpc`` is the same program as ``dotlab-hpc``."""

from .cli import entry

entry()
