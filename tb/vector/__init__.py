# SPDX-License-Identifier: Apache-2.0
"""Testbench of the Vector engine: the Verilator harness (engine + real SBUF and PSUM), its build,
driver and cocotb tests, and the amaranth.sim rig."""
