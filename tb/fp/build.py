# SPDX-License-Identifier: Apache-2.0
"""The floating-point units under test, built identically by pytest, benchmarks and cocotb.

One table (:data:`UNITS`) names each unit's class; ``params`` (the JSON dict the runner passes
to the cocotb module) carries the variant: ``formats`` (names, or dicts of
:class:`~rtl.config.FPFormat` fields for formats outside the config) and ``lane`` for the
converters, and the harness ``depth``. Inside cocotb only :func:`signature` is used: the layouts
and latency without building the unit.
"""

from __future__ import annotations

from rtl.config import FPFormat
from rtl.fp.adder import FP32Adder
from rtl.fp.convert import ConvertFromFP32
from rtl.fp.fma import FMA
from rtl.fp.multiplier import ExactMultiplier
from rtl.fp.widen import WidenToFP32
from tb.fp.harness import VectorHarness
from tb.runner import SimBuild

__all__ = ["UNITS", "DEPTH", "signature", "dut", "sim", "pipeline_tb"]

#: unit name -> Pipeline class. Multiplier and FMA take every dense format of the config for
#: both operands (one build covers all pairs through the run-time selects).
UNITS = {"mul": ExactMultiplier, "fma": FMA, "add": FP32Adder, "convert": ConvertFromFP32,
         "widen": WidenToFP32}
#: Default vectors per harness batch.
DEPTH = 8192


def _cls(unit):
    try:
        return UNITS[unit]
    except KeyError:
        raise ValueError(f"unit must be one of {sorted(UNITS)}, not {unit!r}") from None


def _formats(params):
    return tuple(f if isinstance(f, str) else FPFormat(**f) for f in params["formats"])


def _kwargs(unit, params):
    if unit in ("convert", "widen") and (params or {}).get("formats") is not None:
        return {"formats": _formats(params)}
    return {}


def signature(unit, cfg, params=None):
    """The unit's :class:`~rtl.pipeline.PipelineSignature` (layouts, latency, formats)."""
    return _cls(unit).Signature(cfg, **_kwargs(unit, params))


def dut(unit, cfg, params=None):
    """The unit itself."""
    kw = _kwargs(unit, params)
    if unit == "convert":
        kw["lane"] = int((params or {}).get("lane", 0))
    return _cls(unit)(cfg, **kw)


def variant(unit, params=None):
    """The parameters that change the unit's Verilog (for the build name)."""
    p = params or {}
    return {"formats": p.get("formats"), "lane": p.get("lane", 0),
            "depth": p.get("depth", DEPTH)}


def sim(unit, cfg, params=None, **kw):
    """A (cached) Verilator build of the unit in a :class:`~tb.fp.harness.VectorHarness`."""
    top = VectorHarness(dut(unit, cfg, params), depth=(params or {}).get("depth", DEPTH))
    kw.setdefault("public_depth", 1)  # the harness top holds the memories cocotb loads
    return SimBuild(top, unit=f"fp_{unit}", cfg=cfg, variant=variant(unit, params), **kw)


def pipeline_tb(dut_handle, unit):
    """Inside cocotb: a :class:`~tb.fp.driver.PipelineTB` for ``unit`` with the config and
    parameters the runner passed."""
    from tb import env
    from tb.fp.driver import PipelineTB
    p = env.params()
    return PipelineTB(dut_handle, signature(unit, env.config(), p), unit,
                      depth=p.get("depth", DEPTH))
