"""SEAM: all Apptainer syntax: command builders, apptainer.conf, the SIF format and reader, the
.def grammar, the probe's report, and the only spython user.

Submodules are imported by name (``from dotlab_hpc.container import sif``); nothing is imported
here, so reading a SIF never pays for importing spython.
"""
