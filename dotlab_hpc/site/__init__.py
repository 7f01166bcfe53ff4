"""Where to run: what this site gives, read on the login node and measured by a probe job
(`dotlab-hpc doctor`)."""
