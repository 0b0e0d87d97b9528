"""What a block asks of a scheduler, and the SLURM executor's job names and states."""
