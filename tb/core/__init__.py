# SPDX-License-Identifier: Apache-2.0
"""Testbenches of the whole core (rtl/core/neuroncore.py): cocotb with cocotbext-axi's AxiRam as
DRAM and AxiLiteMaster as the host."""
