"""Output: summary.json and the files beside it, the results index, run comparison, summary.md and
report.html."""
