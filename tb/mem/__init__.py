# SPDX-License-Identifier: Apache-2.0
"""Testbenches of the memories (SBUF, PSUM, AP reader/writer): a Python model of SBUF, random
requester traffic and the AP / SBUF-fed tensor rigs in amaranth.sim, and the real DMA engine with
the SBUF-fed tensor engine on Verilator (harness, build, driver, cocotb tests)."""
