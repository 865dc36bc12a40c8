"""RealRay's parts, split by concern (fakes/ray/target.py composes them)."""
