"""Where the tests find the repository and the shared traces."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"
