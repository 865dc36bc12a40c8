"""Drive: the loop that feeds a plan to one Target, the comparative run over schedulers, the ceiling
search, wall-clock scaling and the dry run."""
