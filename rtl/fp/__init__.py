# SPDX-License-Identifier: Apache-2.0
"""Floating-point datapath.

Every unit is a :class:`rtl.pipeline.Pipeline`: members ``i`` and ``o``, each an
``amaranth.lib.stream`` interface (``valid``, ``payload``; ``ready`` is the constant 1) whose
payload is a ``StructLayout`` view; one operation per cycle and no back-pressure (registers load
every cycle; ``o.valid`` is ``i.valid`` delayed by ``latency``). Each unit has a nested
``Signature`` class taking the unit's own arguments, which gives ``in_layout``, ``out_layout`` and
``latency`` without building the unit: ``FMA.Signature(cfg).latency``.

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
    m.d.comb += [mac.i.valid.eq(v), mac.i.payload.a.eq(x), mac.i.payload.b.eq(w),
                 mac.i.payload.fmt_a.eq(k), mac.i.payload.fmt_b.eq(k), mac.i.payload.c.eq(acc)]
    # mac.o.payload.result (FP32 bits) is valid mac.latency cycles later, with mac.o.valid
"""
