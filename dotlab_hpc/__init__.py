"""dotlab-hpc: reproduce a paper's claim on a Slurm cluster inside an Apptainer container."""

# The one place the version lives (pyproject reads it: [tool.hatch.version]); a literal, so
# that starting `dotlab-hpc hash` does not pay for importlib.metadata.
__version__ = "0.1.0"
TOOL_NAME = "dotlab-hpc"

__all__ = ["TOOL_NAME", "__version__"]
