# SPDX-License-Identifier: Apache-2.0
"""Bounded formal check of the ring link ports (tb/collective/formal.py): the TX credit
counters stay in [0, link_credits] and follow credits + returned - sent, and the RX flags
every flit whose sequence number is out of order (dropped, duplicated, reordered), every CRC
mismatch and every overflow, and nothing else, delivering nothing after an error; 12 cycles
from reset (resets anywhere), long enough for a VC's 3-bit sequence number to wrap. And the
check's own tests: two planted faults in its model are found."""

import pytest

from tb.collective.formal import run_bmc


def test_link_ports_bounded_formal(tmp_path):
    ok, seconds, log = run_bmc(tmp_path, depth=12)
    assert ok, log[-3000:]
    print(f"depth 12 proven in {seconds:.0f} s")


@pytest.mark.parametrize("bug", ["vc1", "credit"])
def test_planted_fault_is_found(tmp_path, bug):
    ok, seconds, log = run_bmc(tmp_path, depth=6, bug=bug)
    assert not ok, f"the formal check did not notice the planted fault {bug!r}"
    assert "proof did fail" in log, log[-2000:]


@pytest.mark.full
def test_link_ports_bounded_formal_deeper(tmp_path):
    """20 cycles: both VCs' sequence numbers can wrap."""
    ok, seconds, log = run_bmc(tmp_path, depth=20)
    assert ok, log[-3000:]
    print(f"depth 20 proven in {seconds:.0f} s")
