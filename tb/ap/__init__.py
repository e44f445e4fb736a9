# SPDX-License-Identifier: Apache-2.0
"""Testbench of the access-pattern units: stimulus (``program.py``) and the bounded formal
harness (``formal.py``)."""
