"""Stage 4, submit: plan the run directories, write them all or none, and sbatch exactly once."""
