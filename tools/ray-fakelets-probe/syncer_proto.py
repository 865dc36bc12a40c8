"""The probe's name for the ray.rpc.syncer messages, which now live in fakes/ray/fakelets/wire.py
(built there field by field from the descriptor in Ray 2.60.0's binaries)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fakes.ray.fakelets.wire import (  # noqa: E402,F401
    COMMANDS,
    RESOURCE_VIEW,
    START_SYNC,
    RaySyncMessage,
    RaySyncMessageBatch,
    ResourceViewSyncMessage,
)
from fakes.ray.fakelets.wire import matches_binary as check_against_binary

if __name__ == "__main__":
    print(check_against_binary(sys.argv[1]))
