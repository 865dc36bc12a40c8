"""gangstorm client side: scenarios, workloads, runners, targets, metrics, CLI."""
