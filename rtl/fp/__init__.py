# SPDX-License-Identifier: Apache-2.0
"""Floating-point datapath: decode, exact multiplier, fused FP32 add/round, FMA, FP32 adder.

Every unit is a ``wiring.Component`` with the pipeline members ``i_valid``/``i``/``o_valid``/
``o`` (``i`` and ``o`` are ``StructLayout`` views, also available as ``in_layout``/
``out_layout``) and a ``latency`` property; see each class's docstring.
"""
