"""dotlab-hpc: reproduce a paper's claim on a Slurm cluster inside an Apptainer container."""

from importlib.metadata import PackageNotFoundError, version

TOOL_NAME = "dotlab-hpc"

try:
    __version__ = version(TOOL_NAME)
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["TOOL_NAME", "__version__"]
