"""GPU sharing: the GPU model catalogue, the share a job member asks for, a pool's sharing mode and
the per-GPU slice ledger. Pure and shared: loadgen and every backend (simulated or real) use it.

The contract
------------
* A share is text, one form everywhere (Job.share, scenario YAML, traces, results):
    ""              whole GPUs (the default; the member asks for `gpus_per_member` of them)
    "milli:250"     250/1000 of one GPU (fractional / time-sliced; 1..1000)
    "mig:1g.10gb"   one MIG GPU instance of that profile
    "shards:2"      two shards of one GPU (Slurm gres/shard; 1..shards_per_gpu)
  A member with a share other than "" takes one slice of exactly one GPU, so gpus_per_member == 1.
  `parse_share` reads the text into a `GpuShare`; `GpuShare.text` writes it back (the canonical
  form: "milli:1000" is read as "", a whole GPU).
* A GPU's sharing mode is set per node pool (`Sharing`): "whole" (one holder per GPU), "mig"
  (MIG instances, either a fixed `layout` made at boot or dynamic: made and destroyed on demand,
  as a MIG manager or DRA partitioning does), "fraction" (milli-GPU shares, time-sliced) or
  "shards" (`shards_per_gpu` shards per GPU). What fits where:
    whole GPU  -> a free GPU in a whole, fraction or shards pool (all of it must be free);
                  never a MIG-mode GPU (it hands out only MIG instances);
    milli:N    -> a fraction-mode GPU with N milli free;
    mig:P      -> a MIG-mode GPU whose model offers P, where an instance of P is free (fixed
                  layout) or can be made under the placement rules (dynamic);
    shards:K   -> a shards-mode GPU with K shards free.
* MIG placement rules (NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles", r590
  docs, and `nvidia-smi mig -lgipp` on A100/H100): a GPU has 7 compute slices and 8 memory
  slices; each profile takes `memory` consecutive memory slices starting at one of its `starts`
  and `compute` compute slices; two instances may not overlap in memory slices (NVML refuses to
  create an overlapping GPU instance), and a profile has at most `max_count` instances (the `+me`
  media-extension profiles: one). The compute slices never exceed 7 under these rules.
* Sizes of a slice, used by the metrics and the price: `compute_share` and `memory_share` of a
  `GpuShare` on a GPU (a MIG slice: compute/7 and memory/8; milli: N/1000 of both; shards:
  K/shards_per_gpu of both; whole: 1). A slice is priced by what it takes from the GPU:
  `charged_share` = (1 - w) * compute_share + w * memory_share, w = `memory_weight` in [0, 1].
* Errors in user input raise UserError with one line naming `where` and what was expected.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from loadgen.model.errors import UserError

COMPUTE_SLICES = 7
MEMORY_SLICES = 8
MILLI = 1000
SHARE_KINDS = ("whole", "milli", "mig", "shards")
SHARING_MODES = ("whole", "mig", "fraction", "shards")


# --- the catalogue --------------------------------------------------------------------------------
@dataclass(frozen=True)
class MigProfile:
    """One MIG GPU instance profile: `compute` of 7 compute slices, `memory` of 8 memory slices,
    placed at one of `starts` (memory-slice index), at most `max_count` per GPU."""
    name: str
    compute: int
    memory: int
    starts: tuple[int, ...]
    max_count: int

    def mask(self, start: int) -> int:
        """The memory slices an instance placed at `start` occupies, as a bit mask."""
        return ((1 << self.memory) - 1) << start


@dataclass(frozen=True)
class GpuModel:
    """A GPU model: its name (lower case, as scenarios write it), memory, and its MIG profiles
    (empty: the model has no MIG and can be shared only by fraction or shards)."""
    name: str
    memory_gib: float
    mig: tuple[MigProfile, ...] = ()
    aliases: tuple[str, ...] = ()

    def mig_profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.mig if p.name == name), None)

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig)


def _mig_table(gb: int) -> tuple[MigProfile, ...]:
    """The A100/H100 profile table, memory sizes named by `gb` per memory slice.

    Placements as `nvidia-smi mig -lgipp` prints them on A100 and H100:
    1g: {0,1,2,3,4,5,6}:1; 1g (2 slices): {0,2,4,6}:2; 2g: {0,2,4}:2; 3g: {0,4}:4; 4g: {0}:4; 7g: {0}:8.
    """
    return (
        MigProfile(f"1g.{gb}gb", 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
        MigProfile(f"1g.{gb}gb+me", 1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
        MigProfile(f"1g.{2 * gb}gb", 1, 2, (0, 2, 4, 6), 4),
        MigProfile(f"2g.{2 * gb}gb", 2, 2, (0, 2, 4), 3),
        MigProfile(f"3g.{4 * gb}gb", 3, 4, (0, 4), 2),
        MigProfile(f"4g.{4 * gb}gb", 4, 4, (0,), 1),
        MigProfile(f"7g.{8 * gb}gb", 7, 8, (0,), 1),
    )


# MIG models per the MIG User Guide's H100 and A100 tables; the openb models (Alibaba's trace,
# anonymised G2/G3 included) have no MIG: fractional or shards only. Memory of G2/G3 is not
# published (0 = unknown; their memory share is then the compute share).
CATALOGUE: dict[str, GpuModel] = {m.name: m for m in (
    GpuModel("h100-80gb", 80, _mig_table(10), aliases=("h100",)),
    GpuModel("a100-80gb", 80, _mig_table(10), aliases=("a100",)),
    GpuModel("a100-40gb", 40, _mig_table(5)),
    GpuModel("p100", 16), GpuModel("t4", 16), GpuModel("v100m16", 16), GpuModel("v100m32", 32),
    GpuModel("a10", 24), GpuModel("g2", 0), GpuModel("g3", 0),
)}
_ALIAS = {a: m.name for m in CATALOGUE.values() for a in m.aliases}


def gpu_model(name: str, where: str = "gpu model") -> GpuModel:
    """The catalogue entry for `name` (case-insensitive, aliases such as "h100" accepted)."""
    key = str(name).strip().lower()
    key = _ALIAS.get(key, key)
    if key not in CATALOGUE:
        raise UserError(f"{where}: unknown GPU model {name!r}; expected one of {', '.join(sorted(CATALOGUE))}")
    return CATALOGUE[key]


def known_model(name: str) -> bool:
    key = str(name).strip().lower()
    return _ALIAS.get(key, key) in CATALOGUE


# --- the share a member asks for -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GpuShare:
    """What one member takes: a whole GPU, `amount` milli of one, MIG profile `profile`, or
    `amount` shards. Build it with `parse_share` (or `GpuShare.whole()` etc.)."""
    kind: str = "whole"
    amount: int = 0
    profile: str = ""

    @property
    def text(self) -> str:
        if self.kind == "whole":
            return ""
        if self.kind == "mig":
            return f"mig:{self.profile}"
        return f"{self.kind}:{self.amount}"

    def __str__(self) -> str:
        return self.text or "whole"

    @property
    def is_whole(self) -> bool:
        return self.kind == "whole"

    def check(self, model: GpuModel, sharing: Sharing, where: str = "share") -> None:
        """UserError unless a GPU of `model` under `sharing` can ever hold this share."""
        if not fits_mode(self, sharing):
            raise UserError(f"{where}: a {self} share cannot be placed on a {sharing.mode}-mode GPU")
        if self.kind == "mig" and model.mig_profile(self.profile) is None:
            raise UserError(f"{where}: MIG profile {self.profile!r} is not offered by {model.name}; expected one of "
                            f"{', '.join(p.name for p in model.mig) or '(none: the model has no MIG)'}")
        if self.kind == "mig" and sharing.layout and self.profile not in [p for p, _ in sharing.instances(model)]:
            raise UserError(f"{where}: MIG profile {self.profile!r} is not in the pool's layout")
        if self.kind == "shards" and self.amount > sharing.shards_per_gpu:
            raise UserError(f"{where}: shards:{self.amount} exceeds shards_per_gpu {sharing.shards_per_gpu}")

    def compute_share(self, model: GpuModel, sharing: Sharing | None = None) -> float:
        """The fraction of the GPU's compute this share takes."""
        if self.kind == "milli":
            return self.amount / MILLI
        if self.kind == "mig":
            return _profile(model, self.profile).compute / COMPUTE_SLICES
        if self.kind == "shards":
            return self.amount / (sharing.shards_per_gpu if sharing else self.amount)
        return 1.0

    def memory_share(self, model: GpuModel, sharing: Sharing | None = None) -> float:
        """The fraction of the GPU's memory this share takes."""
        if self.kind == "mig":
            return _profile(model, self.profile).memory / MEMORY_SLICES
        return self.compute_share(model, sharing)

    def charged_share(self, model: GpuModel, sharing: Sharing | None = None, memory_weight: float = 0.0) -> float:
        """What the share is priced at, in GPUs: (1 - w) * compute share + w * memory share."""
        w = float(memory_weight)
        return (1.0 - w) * self.compute_share(model, sharing) + w * self.memory_share(model, sharing)


WHOLE = GpuShare()


def _profile(model: GpuModel, name: str) -> MigProfile:
    p = model.mig_profile(name)
    if p is None:
        raise UserError(f"share: MIG profile {name!r} is not offered by {model.name}")
    return p


def _known_profiles() -> set[str]:
    return {p.name for m in CATALOGUE.values() for p in m.mig}


def parse_share(text: object, where: str = "share") -> GpuShare:
    """`text` ("" | "milli:N" | "mig:PROFILE" | "shards:K") as a GpuShare, or a one-line UserError.

    A MIG profile must exist in some catalogue model here; whether the pool's model offers it is
    `GpuShare.check`'s question.
    """
    if text is None:
        return WHOLE
    s = str(text).strip()
    if s in ("", "whole"):
        return WHOLE
    kind, sep, arg = s.partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    expected = 'expected "", "milli:N" (1..1000), "mig:PROFILE" or "shards:K"'
    if not sep or kind not in ("milli", "mig", "shards"):
        raise UserError(f"{where}: {expected}; got {s!r}")
    if kind == "mig":
        prof = arg.lower()
        if prof not in _known_profiles():
            raise UserError(f"{where}: unknown MIG profile {arg!r}; expected one of "
                            f"{', '.join(sorted(_known_profiles()))}")
        return GpuShare("mig", 0, prof)
    try:
        n = int(arg)
    except ValueError:
        raise UserError(f"{where}: {kind}:N needs a whole number N; got {s!r}") from None
    if kind == "milli":
        if not 0 < n <= MILLI:
            raise UserError(f"{where}: a fraction must be in (0, 1], milli 1..1000; got {s!r}")
        return WHOLE if n == MILLI else GpuShare("milli", n)
    if n < 1:
        raise UserError(f"{where}: shards:K needs K >= 1; got {s!r}")
    return GpuShare("shards", n)


def milli_share(fraction: float, where: str = "gpu fraction") -> GpuShare:
    """A fraction of one GPU (0 < f <= 1) as a share, rounded to the nearest milli (at least 1)."""
    f = float(fraction)
    if not (0.0 < f <= 1.0):     # also rejects NaN
        raise UserError(f"{where}: a GPU fraction must be in (0, 1]; got {fraction!r}")
    return parse_share(f"milli:{max(1, min(MILLI, round(f * MILLI)))}", where)


# --- a pool's sharing mode ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Sharing:
    """How the GPUs of one node pool are shared.

    mode "whole" | "mig" | "fraction" | "shards". For "mig", `layout` lists the instances made
    at boot on every GPU ("3g.40gb" or "3g.40gb@4" to pin the start); an empty layout is dynamic
    (instances are made on demand and destroyed when released). For "shards", `shards_per_gpu`.
    """
    mode: str = "whole"
    layout: tuple[str, ...] = ()
    shards_per_gpu: int = 0

    def check(self, model: GpuModel, where: str = "sharing", layout_field: str = "layout") -> None:
        """UserError unless this mode is valid on `model` (MIG needs a MIG model, a layout must fit)."""
        if self.mode not in SHARING_MODES:
            raise UserError(f"{where}.mode: expected one of {', '.join(SHARING_MODES)}; got {self.mode!r}")
        if self.mode == "mig":
            if not model.mig_capable:
                raise UserError(f"{where}: {model.name} has no MIG; expected a MIG model "
                                f"({', '.join(n for n, m in CATALOGUE.items() if m.mig_capable)}) or another mode")
            self.instances(model, f"{where}.{layout_field}")
        elif self.layout:
            raise UserError(f"{where}.{layout_field}: only a mig pool has a layout")
        if self.mode == "shards" and self.shards_per_gpu < 1:
            raise UserError(f"{where}.shards_per_gpu: expected a whole number >= 1; got {self.shards_per_gpu!r}")

    def instances(self, model: GpuModel, where: str = "sharing.layout") -> list[tuple[str, int]]:
        """The fixed layout as (profile, start) pairs, placed in order, or a UserError."""
        ledger = GpuLedger(model, Sharing("mig"))
        out = []
        for i, entry in enumerate(self.layout):
            name, _, at = str(entry).partition("@")
            name = name.strip().lower()
            prof = model.mig_profile(name)
            if prof is None:
                raise UserError(f"{where}[{i}]: MIG profile {name!r} is not offered by {model.name}; expected one of "
                                f"{', '.join(p.name for p in model.mig)}")
            start = None
            if at:
                try:
                    start = int(at)
                except ValueError:
                    raise UserError(f"{where}[{i}]: expected PROFILE@START with a whole START; got {entry!r}") from None
            slot = ledger.place(GpuShare("mig", 0, name), start=start)
            if slot is None:
                beside = ", ".join(self.layout[:i]) or "nothing"
                raise UserError(f"{where}[{i}]: {entry!r} does not fit beside {beside} on {model.name} "
                                "(MIG placement rules)")
            out.append((name, slot.start))
        return out

    def per_gpu(self, model: GpuModel) -> dict[str, int]:
        """What one GPU advertises, as share text -> count: whole {"": 1}, fraction {"milli:1": 1000},
        shards {"shards:1": K}, MIG with a layout {"mig:P": n, ...}, dynamic MIG {} (nothing fixed)."""
        if self.mode == "fraction":
            return {"milli:1": MILLI}
        if self.mode == "shards":
            return {"shards:1": self.shards_per_gpu}
        if self.mode == "mig":
            counts: dict[str, int] = {}
            for name, _ in self.instances(model):
                counts[f"mig:{name}"] = counts.get(f"mig:{name}", 0) + 1
            return counts
        return {"": 1}


WHOLE_GPUS = Sharing()


def fits_mode(share: GpuShare, sharing: Sharing) -> bool:
    """Whether `share` can ever be placed on a GPU in `sharing`'s mode (see the module contract)."""
    if share.kind == "whole":
        return sharing.mode in ("whole", "fraction", "shards")
    return {"milli": "fraction", "mig": "mig", "shards": "shards"}[share.kind] == sharing.mode


# --- one GPU's ledger --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Slot:
    """One placed slice on one GPU: its share and, for MIG, the memory-slice start of its instance."""
    share: GpuShare
    start: int = -1


@dataclass
class GpuLedger:
    """What is held on one GPU under its sharing mode: place and release slices, ask what fits.

    whole: `whole_taken`; fraction: `used_milli` of 1000; shards: `used_shards`; MIG: the
    instances (`profile`, `start`, held) with their memory-slice mask. A whole GPU taken in a
    fraction or shards pool sets the used amount to the full GPU.
    """
    model: GpuModel
    sharing: Sharing = WHOLE_GPUS
    whole_taken: bool = False
    used_milli: int = 0
    used_shards: int = 0
    mig: list[list] = field(default_factory=list)   # [profile name, start, held]

    def __post_init__(self):
        if self.sharing.mode == "mig" and self.sharing.layout:
            self.mig = [[p, s, False] for p, s in self.sharing.instances(self.model)]

    # --- questions ---------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """Nothing is held on this GPU."""
        return not (self.whole_taken or self.used_milli or self.used_shards or any(h for _, _, h in self.mig))

    def _mig_mask(self) -> int:
        mask = 0
        for name, start, _ in self.mig:
            mask |= self.model.mig_profile(name).mask(start)
        return mask

    def mig_starts(self, profile: str) -> list[int]:
        """Where a new instance of `profile` could be made now (dynamic MIG), in start order."""
        prof = self.model.mig_profile(profile)
        if prof is None or sum(1 for n, _, _ in self.mig if n == profile) >= prof.max_count:
            return []
        taken = self._mig_mask()
        return [s for s in prof.starts if not taken & prof.mask(s)]

    def fits(self, share: GpuShare) -> bool:
        """Whether `share` can be placed on this GPU now."""
        if not fits_mode(share, self.sharing):
            return False
        if share.kind == "whole":
            return self.idle
        if share.kind == "milli":
            return self.used_milli + share.amount <= MILLI
        if share.kind == "shards":
            return self.used_shards + share.amount <= self.sharing.shards_per_gpu
        if self.sharing.layout:
            return any(n == share.profile and not h for n, _, h in self.mig)
        return bool(self.mig_starts(share.profile))

    def free_compute(self) -> float:
        """The fraction of this GPU's compute not held (for a fixed MIG layout, free instances count)."""
        m = self.sharing.mode
        if self.whole_taken:
            return 0.0
        if m == "fraction":
            return (MILLI - self.used_milli) / MILLI
        if m == "shards":
            return (self.sharing.shards_per_gpu - self.used_shards) / self.sharing.shards_per_gpu
        if m == "mig":
            held = sum(self.model.mig_profile(n).compute for n, _, h in self.mig if h)
            return (COMPUTE_SLICES - held) / COMPUTE_SLICES
        return 1.0

    def unusable_by(self, share: GpuShare) -> float:
        """Free compute on this GPU that `share` cannot use: all of it if the share does not fit
        here, else none (the per-GPU step of the ATC'23 fragmentation measure)."""
        return 0.0 if self.fits(share) else self.free_compute()

    # --- mutation ----------------------------------------------------------------------------
    def place(self, share: GpuShare, start: int | None = None) -> Slot | None:
        """Place `share` (for dynamic MIG at `start`, or at the start that keeps most other
        placements open, lowest first on ties); the Slot to release it with, or None if it does not fit."""
        if not self.fits(share):
            return None
        if share.kind == "whole":
            self.whole_taken = True
            self.used_milli = MILLI if self.sharing.mode == "fraction" else 0
            self.used_shards = self.sharing.shards_per_gpu if self.sharing.mode == "shards" else 0
            return Slot(share)
        if share.kind == "milli":
            self.used_milli += share.amount
            return Slot(share)
        if share.kind == "shards":
            self.used_shards += share.amount
            return Slot(share)
        if self.sharing.layout:
            free = [i for i, (n, s, h) in enumerate(self.mig) if n == share.profile and not h
                    and (start is None or s == start)]
            if not free:
                return None
            self.mig[free[0]][2] = True
            return Slot(share, self.mig[free[0]][1])
        starts = self.mig_starts(share.profile)
        if start is not None:
            if start not in starts:
                return None
            best = start
        else:
            best = max(starts, key=lambda s: (self._options_after(share.profile, s), -s))
        self.mig.append([share.profile, best, True])
        return Slot(share, best)

    def _options_after(self, profile: str, start: int) -> int:
        """How many (profile, start) placements would stay open after placing `profile` at `start`."""
        taken = self._mig_mask() | self.model.mig_profile(profile).mask(start)
        return sum(1 for p in self.model.mig for s in p.starts if not taken & p.mask(s))

    def release(self, slot: Slot) -> None:
        """Give back what `slot` took (a dynamic MIG instance is destroyed)."""
        share = slot.share
        if share.kind == "whole":
            assert self.whole_taken, "release of a whole GPU that is not taken"
            self.whole_taken, self.used_milli, self.used_shards = False, 0, 0
        elif share.kind == "milli":
            assert self.used_milli >= share.amount, "release of more milli than held"
            self.used_milli -= share.amount
        elif share.kind == "shards":
            assert self.used_shards >= share.amount, "release of more shards than held"
            self.used_shards -= share.amount
        else:
            i = next((i for i, (n, s, h) in enumerate(self.mig) if n == share.profile and s == slot.start and h), None)
            assert i is not None, f"release of a MIG instance not held: {slot}"
            if self.sharing.layout:
                self.mig[i][2] = False
            else:
                del self.mig[i]
