"""Read-only probes of /proc: which processes a run left, what they listen on, how much memory.

Tests use them to prove a backend cleaned up and stayed on loopback; benchmarks to report memory.
"""
from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path


def processes(names: Iterable[str], under: Path | str | None = None) -> list[tuple[int, str]]:
    """(pid, command line) of live processes whose executable's basename is one of `names`,
    optionally only those whose command line mentions `under` (a run directory, a marker)."""
    names = set(names)
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        if not argv or not argv[0] or stat.rsplit(") ", 1)[1][0] == "Z":
            continue
        cmd = b" ".join(argv).decode(errors="replace").strip()
        if os.path.basename(argv[0].decode(errors="replace")) in names and (under is None or str(under) in cmd):
            found.append((int(d), cmd))
    return found


def leftover_processes(names: Iterable[str], under: Path | str | None = None) -> list[str]:
    """"pid cmdline" of processes() : what tests assert is empty after a backend stopped."""
    return [f"{pid} {cmd[:160]}" for pid, cmd in processes(names, under)]


def listeners(pids: list[int]) -> list[tuple[str, int, int]]:
    """(address, port, pid) of every listening TCP socket owned by `pids` (like `ss -ltnp`)."""
    return [(la, lp, pid) for proto, state, la, lp, _, _, pid in sockets(pids)
            if proto == "tcp" and state == "0A"]


def peers(pids: list[int]) -> list[tuple[str, str, int, int]]:
    """(proto, remote address, remote port, pid) of every connected TCP/UDP socket of `pids`."""
    return [(proto, ra, rp, pid) for proto, state, _, _, ra, rp, pid in sockets(pids)
            if not (proto == "tcp" and state == "0A") and rp != 0]


def sockets(pids: list[int]) -> list[tuple[str, str, str, int, str, int, int]]:
    """(proto, state, local addr, local port, remote addr, remote port, pid) for the inet sockets
    owned by `pids`, read from /proc/net/{tcp,tcp6,udp,udp6}."""
    inode_pid: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inode_pid[link[8:-1]] = pid
        except OSError:
            continue
    out = []
    for proto, v6 in (("tcp", False), ("tcp6", True), ("udp", False), ("udp6", True)):
        try:
            lines = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[9] not in inode_pid:
                continue
            la, lp = cols[1].split(":")
            ra, rp = cols[2].split(":")
            out.append((proto.rstrip("6"), cols[3], _decode_addr(la, v6), int(lp, 16),
                        _decode_addr(ra, v6), int(rp, 16), inode_pid[cols[9]]))
    return out


def _decode_addr(hexaddr: str, v6: bool) -> str:
    raw = bytes.fromhex(hexaddr)
    if not v6:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    ip = ipaddress.IPv6Address(words)
    return str(ip.ipv4_mapped) if ip.ipv4_mapped else str(ip)


def memory_kib(pids: Iterable[int]) -> dict[str, int]:
    """Summed RSS and PSS (KiB) of `pids`; PSS splits shared pages fairly between processes."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return {"rss_kib": rss, "pss_kib": pss}


def mem_available_mib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) process `pid` has used so far, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
