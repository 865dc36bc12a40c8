"""Where the tests find the repository and the traces: the slices in tests/data/traces (always
there) and the full traces beside the repository (optional: tests that need them skip without)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACE_SLICES = ROOT / "tests" / "data" / "traces"
OPENB_SLICE = TRACE_SLICES / "openb_pod_list_default-first1000.csv"
TRACES = ROOT.parent / "shared" / "traces"
