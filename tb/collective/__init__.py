# SPDX-License-Identifier: Apache-2.0
"""Testbench helpers of the collective engine: ``rig.py`` the amaranth.sim rigs of the ring
link layer (one link, a ring of links) checked against the golden model cycle by cycle;
``program.py`` the stimulus: fault injectors of the wire; ``formal.py`` the bounded proof of the link
ports' credit counters and sequence check."""
