"""How much of a stretch of time the machine's runnable tasks spent waiting for a CPU (Linux PSI):
loadgen/measure/hostcpu.py's CpuWait, which the fidelity tools record beside each real run."""
from loadgen.measure.hostcpu import CpuWait

__all__ = ["CpuWait"]
