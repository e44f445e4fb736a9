# SPDX-License-Identifier: Apache-2.0
"""Bounded formal check of SBUF (``tb/mem/formal.py``): no request dropped or duplicated, no
write outside its address, every wait within its bound, from reset (and through resets) for a
number of cycles, with yosys' SAT solver; and the check's own test: a planted fault (the model
forgetting one port's writes) is found.

Both in ``make test-full``: yosys' SAT solver needs about 40 s to find the planted fault and
about 20 minutes (2 busy cores) for the depth-4 proof (the two banks' memory bits are most of
the problem); the fast tier's random-traffic simulation (``tests/test_mem_sbuf.py``) checks the
same properties on traces."""

import pytest

from tb.mem.formal import run_bmc


@pytest.mark.full
def test_planted_fault_is_found(tmp_path):
    ok, seconds, log = run_bmc(tmp_path, depth=4, bug="drop")
    assert not ok, "the formal check did not notice a write it does not expect"
    assert "proof did fail" in log, log[-2000:]
    print(f"planted fault found in {seconds:.0f} s")


@pytest.mark.full
def test_sbuf_bounded_formal(tmp_path):
    """Four cycles from reset (reset anywhere): up to two accesses per port, a yield, a read of
    a written byte, the priority port's whole wait bound (2) and the others' (4)."""
    ok, seconds, log = run_bmc(tmp_path, depth=4)
    assert ok, log[-3000:]
    print(f"depth 4 proven in {seconds:.0f} s")
