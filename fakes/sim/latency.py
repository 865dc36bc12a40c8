"""Request latencies that vary as the real ones do: lognormal with a measured mean and shape.

The apiserver answers most POST pods in a few milliseconds and one in a hundred in 5-7x its median
(control_plane.create_sigma / write_sigma, fitted to apiserver_request_duration_seconds' buckets by
loadgen/model/lognormal.py). A gang is admitted when its slowest pod is, so a constant mean
shortens every gang's tail. With sigma 0 every request takes the mean and nothing is drawn.

Draws come from a stream of their own (the run's seed and a fixed tag), so the twin's other random
choices (ties in Score, eviction victims) stay what they were; normals are drawn in blocks because
one numpy call per request would cost more than the simulation step it serves.
"""
from __future__ import annotations

import numpy as np

STREAM_TAG = 0x1A7E      # the latency stream's second seed word: any fixed value apart from the others
BLOCK = 4096


class Latency:
    def __init__(self, mean_s: float, sigma: float, rng: np.random.Generator):
        self.mean_s = mean_s
        self.sigma = sigma
        self.rng = rng
        self._block: list[float] = []

    def draw(self) -> float:
        """One request's latency in seconds."""
        if self.sigma <= 0.0:
            return self.mean_s
        if not self._block:
            z = self.rng.standard_normal(BLOCK)
            self._block = (self.mean_s * np.exp(self.sigma * z - self.sigma * self.sigma / 2.0)).tolist()
            self._block.reverse()
        return self._block.pop()

    def slowest(self, n: int) -> float:
        """The slowest of n requests sent together."""
        if self.sigma <= 0.0 or n <= 1:
            return self.draw() if n >= 1 else 0.0
        return max(self.draw() for _ in range(n))


def stream(seed: int, tag: int = STREAM_TAG) -> np.random.Generator:
    """The latency draws' generator for a run's seed (another tag: another independent stream)."""
    return np.random.default_rng([seed, tag])
