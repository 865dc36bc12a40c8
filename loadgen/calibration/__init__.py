"""Calibration: fit the simulated schedulers to the real ones and say how far they still are.

cases.py    the matrix of real runs (scenarios x scales, fitting and held-out), repeated
twin.py     one real run on its backend, and its simulated twin on the same wall-clock plan
measure.py  sim parameters read directly off the real components' own metrics
fit.py      the rest searched so the twins' admission tails match the real runs
fidelity.py real/sim ratios on held-out cases next to the real run-to-run spread
"""
