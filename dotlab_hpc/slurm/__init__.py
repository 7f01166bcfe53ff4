"""SEAM: all Slurm syntax. Pure argv builders, #SBATCH directives, time and size notations, job
ids, pure parsers of recorded outputs, and a client over one injected Runner."""
