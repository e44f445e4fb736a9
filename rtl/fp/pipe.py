# SPDX-License-Identifier: Apache-2.0
"""Pipeline-register helper shared by the floating-point units (no enable, valid alongside)."""

from amaranth.hdl import Signal

__all__ = ["stage", "delay"]


def stage(m, enabled, valid, values, *, name):
    """Register ``valid`` and every value of the dict ``values`` when ``enabled``.

    Data registers are ``reset_less`` and load every cycle (a free-running pipeline: ``valid``,
    which is reset, says which cycles carry data). Returns ``(valid, values)``, registered or
    passed through unchanged.
    """
    if not enabled:
        return valid, dict(values)
    v = Signal(name=f"{name}_valid")
    m.d.sync += v.eq(valid)
    out = {}
    for key, x in values.items():
        r = Signal(x.shape(), name=f"{name}_{key}", reset_less=True)
        m.d.sync += r.eq(x)
        out[key] = r
    return v, out


def delay(m, value, cycles, *, name):
    """``value`` delayed by ``cycles`` reset-less registers."""
    for k in range(cycles):
        r = Signal(value.shape(), name=f"{name}_d{k}", reset_less=True)
        m.d.sync += r.eq(value)
        value = r
    return value
