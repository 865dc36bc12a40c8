"""What the tests share, so that no test module imports another: the repository's paths, the
helpers that start and stop real processes (Chromium, Locust, in-process CLI runs, Ray clusters and
fleets, the Kubernetes and Slurm drivers), the simulated-fleet runner and the event-keeping Recorder.

tests/ has no __init__.py, so pytest's default `prepend` import mode puts tests/ first on sys.path
when it imports tests/conftest.py, before any test module (`pytest` from the repository root and
`pytest tests/test_x.py` alike): a test writes `from support.paths import ROOT`. conftest.py
registers this package for pytest's assertion rewriting, as a test module's asserts are.
"""
