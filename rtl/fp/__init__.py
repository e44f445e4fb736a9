# SPDX-License-Identifier: Apache-2.0
"""Floating-point datapath.

Every unit is a ``wiring.Component`` with the pipeline members ``i_valid: In(1)``,
``i: In(in_layout)``, ``o_valid: Out(1)``, ``o: Out(out_layout)`` (``StructLayout`` views; the
layouts are also attributes), a ``latency`` property, one operation per cycle and no
back-pressure (registers load every cycle; ``o_valid`` is ``i_valid`` delayed by ``latency``).

Arithmetic half (numbers in ``docs/number-formats.md`` §2, §5):

================================  ========================================  ======================
unit                              ``i`` -> ``o``                            latency
================================  ========================================  ======================
``unpack.Unpack(formats)``        ``code``, ``fmt`` -> exact layout         0 (combinational)
``multiplier.ExactMultiplier``    ``a, b, fmt_a, fmt_b`` -> exact product   ``mul_stages``
``fused_add.FusedAdd``            ``c`` (FP32), ``p`` (exact) -> ``result``  ``add_stages``
``fma.FMA``                       ``a, b, fmt_a, fmt_b, c`` -> ``result``   ``mul + add_stages``
``adder.FP32Adder``               ``a, b`` (FP32) -> ``result``             ``add_stages``
================================  ========================================  ======================

A processing element uses :class:`rtl.fp.fma.FMA`::

    mac = FMA(cfg)                       # every cfg.dense_formats for a and b, run-time select
    m.d.comb += [mac.i_valid.eq(v), mac.i.a.eq(x), mac.i.b.eq(w),
                 mac.i.fmt_a.eq(k), mac.i.fmt_b.eq(k), mac.i.c.eq(acc)]
    # mac.o.result (FP32 bits) is valid mac.latency cycles later, with mac.o_valid
"""
