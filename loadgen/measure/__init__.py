"""Measure: the recorder of per-job events and the statistics, placement and saturation figures
computed from it."""
