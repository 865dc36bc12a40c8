"""Live: gangstorm's own metrics in Prometheus format, served during wall-clock runs, and a real
Prometheus beside a run."""
