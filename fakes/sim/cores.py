"""The machine's cores, shared by a scheduler's serial loop and the rest of the control plane.

On a machine the control plane does not have to itself (this machine class: kube-apiserver, etcd,
KWOK, the scheduler and gangstorm's generator on 2 cores) every pod the scheduler places costs the
other components CPU too: its create, its bind, the watch events, the garbage collector. When the
loop is busy that work runs beside its cycles, and a cycle gets only the cores the others leave:

    wall = quiet wall x cycle_cores / min(cycle_cores, max(cores - others, floor))

`others` is the CPU the rest asked for over the last WINDOW_S: `idle_cores` (what the stack uses
with nothing to schedule) plus `pod_cpu_ms` for every pod placed in the window. A loop that is
never short of pods then settles where the machine is full, cores / (cycle_cores x quiet cycle +
pod_cpu_ms) pods a second, and a light load leaves every cycle at its quiet cost.

`cores` 0 (a profile for a control plane with machines of its own) turns it off. Pure: time is
passed in, nothing is read or written.
"""
from __future__ import annotations

from collections import deque

# The others' demand is what they asked for over this trailing window. The apiserver serves a bind
# within milliseconds of the cycle that sent it, so the window only needs to span several cycles
# (1-8 ms each) to average them; tests/test_shared_cores.py shows the loop's rate moves under 2%
# between 0.05 and 0.2 s.
WINDOW_S = 0.1
# a cycle is never starved outright: the kernel gives a runnable thread some time whatever the load
FLOOR_SHARE = 0.05


class SharedCores:
    def __init__(self, cores: float = 0.0, idle_cores: float = 0.0, pod_cpu_ms: float = 0.0,
                 window_s: float | None = None):
        self.cores = float(cores)
        self.idle_cores = float(idle_cores)
        self.pod_cpu_s = float(pod_cpu_ms) / 1000.0
        self.window_s = WINDOW_S if window_s is None else float(window_s)
        self._spent: deque[tuple[float, float]] = deque()     # (t, CPU seconds) of the others' work
        self._in_window = 0.0
        self.stretches = 0                                     # cycles that got fewer cores than they use

    @classmethod
    def from_config(cls, control_plane: dict) -> SharedCores:
        return cls(control_plane.get("cores") or 0.0, control_plane.get("idle_cores") or 0.0,
                   control_plane.get("pod_cpu_ms") or 0.0)

    @property
    def on(self) -> bool:
        return self.cores > 0

    def placed(self, t: float, pods: int = 1) -> None:
        """The others' CPU for `pods` pods the loop placed at t."""
        if self.on and self.pod_cpu_s > 0:
            self.spend(t, pods * self.pod_cpu_s)

    def spend(self, t: float, cpu_s: float) -> None:
        self._spent.append((t, cpu_s))
        self._in_window += cpu_s

    def others(self, t: float) -> float:
        """Cores the rest of the control plane asks for at t."""
        while self._spent and self._spent[0][0] <= t - self.window_s:
            self._in_window -= self._spent.popleft()[1]
        return self.idle_cores + max(self._in_window, 0.0) / self.window_s

    def stretch(self, t: float, cycle_cores: float) -> float:
        """How much longer than on a quiet machine a cycle that uses `cycle_cores` takes at t."""
        if not self.on or cycle_cores <= 0:
            return 1.0
        share = max(self.cores - self.others(t), FLOOR_SHARE * cycle_cores)
        if share >= cycle_cores:
            return 1.0
        self.stretches += 1
        return cycle_cores / share
