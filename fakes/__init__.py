"""gangstorm server side: the fleet model, simulated schedulers and real fake-fleet launchers."""
