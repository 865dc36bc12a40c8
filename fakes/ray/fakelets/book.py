"""One fake node's resources and placement-group bundles: what a raylet's resource manager keeps.

Pure and clock-free (no grpc, no asyncio). The GCS reserves a bundle in two phases: Prepare
(all bundles of the request fit, or none is taken), then Commit, which turns the reservation into
the group's formatted resources as a raylet does (BundleSpecification): `<r>_group_<i>_<pg>` per
bundle and the wildcard `<r>_group_<pg>` summed over the group's bundles on the node, for every
resource r of the bundle plus `bundle` (1000 per bundle). Remove gives a bundle back whichever
phase it is in; ReleaseUnused (after a GCS restart) gives back every bundle not listed.

`version` grows by one per change: it is the RESOURCE_VIEW version the syncer reports, which the
GCS drops unless it is greater than the last it saw from the node.
"""
from __future__ import annotations

from collections.abc import Iterable

Key = tuple[bytes, int]                  # (placement group id, bundle index)
BUNDLE = "bundle"
BUNDLE_UNITS = 1000.0
EPS = 1e-9


class Book:
    def __init__(self, total: dict[str, float]):
        self.base = dict(total)
        self.total = dict(total)
        self.available = dict(total)
        self.prepared: dict[Key, dict[str, float]] = {}
        self.committed: dict[Key, dict[str, float]] = {}
        self.version = 1

    def fits(self, need: dict[str, float]) -> bool:
        return all(self.available.get(r, 0.0) + EPS >= v for r, v in need.items())

    def prepare(self, bundles: Iterable[tuple[Key, dict[str, float]]]) -> bool:
        """Reserve every bundle, or none (False) when they do not all fit."""
        bundles = [(key, dict(unit)) for key, unit in bundles if key not in self.prepared and key not in self.committed]
        need: dict[str, float] = {}
        for _, unit in bundles:
            for r, v in unit.items():
                need[r] = need.get(r, 0.0) + v
        if not self.fits(need):
            return False
        for key, unit in bundles:
            self.prepared[key] = unit
            self._take(unit, -1)
        if bundles:
            self.version += 1
        return True

    def commit(self, keys: Iterable[Key]) -> int:
        done = 0
        for key in keys:
            unit = self.prepared.pop(key, None)
            if unit is None:
                continue
            self.committed[key] = unit
            self._format(key, unit, +1)
            done += 1
        if done:
            self.version += 1
        return done

    def remove(self, keys: Iterable[Key]) -> int:
        done = sum(self._release(key) for key in list(keys))
        if done:
            self.version += 1
        return done

    def release_unused(self, in_use: Iterable[Key]) -> int:
        keep = set(in_use)
        return self.remove([k for k in [*self.prepared, *self.committed] if k not in keep])

    @property
    def bundles(self) -> int:
        return len(self.prepared) + len(self.committed)

    def _release(self, key: Key) -> bool:
        if key in self.prepared:
            unit = self.prepared.pop(key)
        elif key in self.committed:
            unit = self.committed.pop(key)
            self._format(key, unit, -1)
        else:
            return False
        self._take(unit, +1)
        return True

    def _take(self, unit: dict[str, float], sign: int) -> None:
        for r, v in unit.items():
            self.available[r] = self.available.get(r, 0.0) + sign * v

    def _format(self, key: Key, unit: dict[str, float], sign: int) -> None:
        pg, index = key[0].hex(), key[1]
        for r, v in [*unit.items(), (BUNDLE, BUNDLE_UNITS)]:
            one = f"{r}_group_{index}_{pg}"
            if sign > 0:
                self.total[one] = self.available[one] = v
            else:
                self.total.pop(one, None)
                self.available.pop(one, None)
            every = f"{r}_group_{pg}"
            self.total[every] = self.total.get(every, 0.0) + sign * v
            self.available[every] = self.available.get(every, 0.0) + sign * v
            if self.total[every] <= EPS:
                del self.total[every], self.available[every]
