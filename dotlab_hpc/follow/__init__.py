"""Stage 5, follow: the state of many runs with one Slurm query, the follower that waits without
hammering the scheduler, and the one home of lost and orphaned jobs."""
