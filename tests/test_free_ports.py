"""fakes/real/procs.py hands out ports for servers that bind them a moment later: never the same
port twice while it may still be about to be bound."""
import pytest

from fakes.real import procs


def test_ports_handed_out_in_a_row_are_all_different():
    # 400 draws from 20,000 ports collide with probability 98% if nothing remembers them
    ports = [procs.free_port() for _ in range(400)]
    assert len(set(ports)) == 400
    assert all(12000 <= p < 32000 for p in ports)


def test_a_block_overlaps_no_port_handed_out_before(monkeypatch):
    monkeypatch.setattr(procs, "_HANDED", {})
    assert procs.free_port_block(5, lo=12000, hi=12006) == 12000        # the only base in the range
    with pytest.raises(RuntimeError, match="no block of 5 free ports"):
        procs.free_port_block(5, lo=12000, hi=12006)                    # its ports were handed out


def test_a_port_is_handed_out_again_once_its_time_is_over(monkeypatch):
    monkeypatch.setattr(procs, "_HANDED", {})
    monkeypatch.setattr(procs, "HANDED_FOR_S", -1.0)
    assert procs.free_port_block(1, lo=12345, hi=12347) == 12345     # the only base
    assert procs.free_port_block(1, lo=12345, hi=12347) == 12345
