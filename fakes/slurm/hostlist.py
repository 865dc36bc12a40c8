"""Slurm hostlists: `gpu-[00000-00003,00007]` to node names and back."""
from __future__ import annotations


def compress(prefix: str, idx: list[int], width: int) -> str:
    """Slurm hostlist for consecutive-friendly indices: gpu-[00000-00003,00007]."""
    if not idx:
        return ""
    runs, start, prev = [], idx[0], idx[0]
    for i in idx[1:]:
        if i == prev + 1:
            prev = i
            continue
        runs.append((start, prev))
        start = prev = i
    runs.append((start, prev))
    parts = [f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs]
    if len(parts) == 1 and "-" not in parts[0]:
        return f"{prefix}{parts[0]}"
    return f"{prefix}[{','.join(parts)}]"


def expand(hostlist: str) -> list[str]:
    """Expand a Slurm hostlist (one bracket group per name, as Slurm prints ours)."""
    out: list[str] = []
    i, s = 0, hostlist.strip()
    while i < len(s):
        j, depth = i, 0
        while j < len(s) and (s[j] != "," or depth):
            depth += {"[": 1, "]": -1}.get(s[j], 0)
            j += 1
        item = s[i:j]
        i = j + 1
        if "[" not in item:
            if item and item != "(null)":
                out.append(item)
            continue
        pre, rest = item.split("[", 1)
        body, post = rest.split("]", 1)
        for part in body.split(","):
            if "-" in part:
                a, b = part.split("-")
                w = len(a)
                out.extend(f"{pre}{k:0{w}d}{post}" for k in range(int(a), int(b) + 1))
            else:
                out.append(f"{pre}{part}{post}")
    return out
