"""SEAM: the run directory: its file names, models, the bounded reader and the files it writes."""
