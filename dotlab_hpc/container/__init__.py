"""SEAM: the container platform. Apptainer command builders, the SIF reader, the only spython user.

Submodules are imported by name (``from dotlab_hpc.container import sif``); nothing is imported
here, so reading a SIF never pays for importing spython.
"""
