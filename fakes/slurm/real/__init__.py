"""RealSlurm's parts, split by concern (fakes/slurm/target.py composes them)."""
