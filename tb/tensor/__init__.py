# SPDX-License-Identifier: Apache-2.0
"""Testbench of the tensor engine: a memory-fed harness, a program builder and cocotb tests."""
