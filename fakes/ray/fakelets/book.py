"""One fake node's resources and placement-group bundles: what a raylet's resource manager keeps.

Pure and clock-free (no grpc, no asyncio). The GCS reserves a bundle in two phases: Prepare
(all bundles of the request fit, or none is taken), then Commit, which turns the reservation into
the group's formatted resources as a raylet does (BundleSpecification): `<r>_group_<i>_<pg>` per
bundle and the wildcard `<r>_group_<pg>` summed over the group's bundles on the node, for every
resource r of the bundle plus `bundle` (1000 per bundle). Remove gives a bundle back whichever
phase it is in; ReleaseUnused (after a GCS restart) gives back every bundle not listed.

Amounts are kept as a raylet keeps them (Ray 2.60.0; sources read in ray-project/ray,
src/ray/common/scheduling/fixed_point.h and resource_instance_set.cc, and checked against the
2.60.0 raylet binary by tests/test_ray_gpushare_real.py):
* FixedPoint: an integer count of 1/10000 (kResourceUnitScaling), made from a double by
  truncation (`FixedPoint(double d) : i_ = (int64_t)(d * 10000)`), so {"GPU": 0.29} takes 2899
  units; a view reports units / 10000.
* Unit-instance resources (GPU, and RAY_custom_unit_instance_resources, whose 2.60.0 default is
  `UNIT_INSTANCE` below: the string is in the raylet binary) are one instance of 1.0 per device;
  every other resource is one instance holding its whole amount. A raylet prepares the bundles of a
  Prepare call one after another, each through NodeResourceInstanceSet::TryAllocate: a demand
  >= 1 takes whole free instances (available == 1.0), lowest index first; what is left of it
  (below 1) goes to the best-fitting instance, the one with the least left over, lowest index on
  ties. So one fractional slice always sits on exactly one GPU, and a request whose total fits the
  node's free GPU sum can still be refused when no single GPU has room for it (the GCS, which sees
  only sums, then retries the group). 2.60.0 has no refusal of fractional demands above 1 (the
  "Fractional demand >= 1 is invalid" check of later sources is not in its binary): 1.5 takes one
  whole GPU and 0.5 of another.
* `slices()` says which instance each committed or prepared bundle holds: where each slice landed.
"""
from __future__ import annotations

from collections.abc import Iterable

Key = tuple[bytes, int]                  # (placement group id, bundle index)
Allocation = dict[str, list[int]]        # resource -> units taken from each of its instances
BUNDLE = "bundle"
BUNDLE_UNITS = 1000.0
SCALE = 10_000                           # FixedPoint's kResourceUnitScaling
UNIT_INSTANCE = frozenset(("GPU", "neuron_cores", "TPU", "NPU", "HPU", "RBLN", "FURIOSA", "TTNPU", "MBLT"))


def units(value: float) -> int:
    """A double as FixedPoint holds it: truncated to 1/10000."""
    return int(value * SCALE)


def instances_of(resource: str, amount: float) -> list[int]:
    """A node's instances of `resource` at start: one of 1.0 per device for a unit-instance resource,
    else one holding it all (NodeResourceInstanceSet's constructor)."""
    if resource in UNIT_INSTANCE:
        return [SCALE] * int(amount)
    return [units(amount)]


def take(free: list[int], demand: int) -> list[int] | None:
    """What `demand` units take from each instance in `free` (which is updated), or None (and `free`
    untouched) when they do not fit: TryAllocate's rule, see the module docstring."""
    got = [0] * len(free)
    if len(free) == 1:
        if free[0] < demand:
            return None
        free[0] -= demand
        got[0] = demand
        return got
    left = list(free)
    rest = demand
    if rest >= SCALE:
        for i, avail in enumerate(left):
            if avail == SCALE:
                got[i], left[i] = SCALE, 0
                rest -= SCALE
            if rest < SCALE:
                break
    if rest >= SCALE:
        return None
    if rest > 0:
        best = -1
        for i, avail in enumerate(left):
            if avail >= rest and (best < 0 or avail - rest < left[best] - rest):
                best = i
        if best < 0:
            return None
        got[best] += rest
        left[best] -= rest
    free[:] = left
    return got


class Book:
    def __init__(self, total: dict[str, float]):
        self.base = dict(total)
        self.free: dict[str, list[int]] = {r: instances_of(r, v) for r, v in total.items()}
        self.total = {r: sum(inst) / SCALE for r, inst in self.free.items()}
        self.available = dict(self.total)
        self.prepared: dict[Key, Allocation] = {}
        self.committed: dict[Key, Allocation] = {}
        self.version = 1

    def prepare(self, bundles: Iterable[tuple[Key, dict[str, float]]]) -> bool:
        """Reserve every bundle, one after another, or none (False) when one does not fit."""
        done: list[Key] = []
        for key, unit in bundles:
            if key in self.prepared or key in self.committed or key in done:
                continue
            got = self._allocate(unit)
            if got is None:
                for k in done:
                    self._free(self.prepared.pop(k))
                return False
            self.prepared[key] = got
            done.append(key)
        if done:
            self.version += 1
        return True

    def commit(self, keys: Iterable[Key]) -> int:
        done = 0
        for key in keys:
            got = self.prepared.pop(key, None)
            if got is None:
                continue
            self.committed[key] = got
            self._format(key, got, +1)
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

    def slices(self) -> list[dict]:
        """Every held bundle's unit-instance resources: {"pg": hex, "bundle": i, "state":
        "prepared"|"committed", "resource": r, "instances": {index: amount}}, in key order."""
        out = []
        for state, held in (("prepared", self.prepared), ("committed", self.committed)):
            for (pg, index), got in held.items():
                for r, per in got.items():
                    if r in UNIT_INSTANCE:
                        out.append({"pg": pg.hex(), "bundle": index, "state": state, "resource": r,
                                    "instances": {i: u / SCALE for i, u in enumerate(per) if u}})
        return sorted(out, key=lambda s: (s["pg"], s["bundle"], s["resource"]))

    # -- inside ---------------------------------------------------------------------------------
    def _allocate(self, unit: dict[str, float]) -> Allocation | None:
        got: Allocation = {}
        for r, v in unit.items():
            if not units(v):
                continue            # a ResourceSet keeps no zero amounts
            per = take(self.free[r], units(v)) if r in self.free else None
            if per is None:
                self._free(got)
                return None
            got[r] = per
        self._view(got)
        return got

    def _free(self, got: Allocation) -> None:
        for r, per in got.items():
            free = self.free[r]
            for i, u in enumerate(per):
                free[i] += u
        self._view(got)

    def _view(self, got: Allocation) -> None:
        for r in got:
            self.available[r] = sum(self.free[r]) / SCALE

    def _release(self, key: Key) -> bool:
        if key in self.prepared:
            got = self.prepared.pop(key)
        elif key in self.committed:
            got = self.committed.pop(key)
            self._format(key, got, -1)
        else:
            return False
        self._free(got)
        return True

    def _format(self, key: Key, got: Allocation, sign: int) -> None:
        pg, index = key[0].hex(), key[1]
        for r, v in [*((r, sum(per) / SCALE) for r, per in got.items()), (BUNDLE, BUNDLE_UNITS)]:
            one = f"{r}_group_{index}_{pg}"
            if sign > 0:
                self.total[one] = self.available[one] = v
            else:
                self.total.pop(one, None)
                self.available.pop(one, None)
            every = f"{r}_group_{pg}"
            self.total[every] = round(self.total.get(every, 0.0) + sign * v, 4)
            self.available[every] = round(self.available.get(every, 0.0) + sign * v, 4)
            if self.total[every] <= 0:
                del self.total[every], self.available[every]
