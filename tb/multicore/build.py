# SPDX-License-Identifier: Apache-2.0
"""The Verilator builds of the multi-core top (:class:`rtl.core.multicore.MultiCore`: the core
converted once, with its own leaves, :func:`tb.core.build.core_design`, and instantiated
``ring_size`` times) and of the collective-engine ring (:class:`tb.multicore.harness.
EngineRingHarness`: the engine and the SBUF converted once each, :func:`engine_ring_sim`), and
the run of the engine ring's cases (:func:`run_engine_ring`, :func:`ring_case`)."""

from __future__ import annotations

from rtl.core.multicore import MultiCore, core_module_name
from rtl.emit import Design
from tb.core.build import CORE_BUILD_ARGS, core_design, integration_cfg
from tb.runner import SimBuild

__all__ = ["engine_ring_design", "engine_ring_sim", "multicore_cfg", "multicore_design",
           "permute_ring_case", "ring_case", "run_engine_ring", "multicore_sim"]


def multicore_cfg(cfg, n=None):
    """``cfg`` narrowed like the core's integration tests (:func:`tb.core.build.integration_cfg`)
    on a ring of ``n`` (default ``cfg.ring_size``)."""
    c = integration_cfg(cfg)
    return c if n is None else c.replace(ring_size=n, name=f"{c.name}_r{n}")


def multicore_design(cfg):
    """The top with the core module (and the core's leaf modules) emitted once each."""
    core = core_design(cfg)
    modules = {core_module_name(cfg): core.top, **core.modules}
    pragmas = {core_module_name(cfg): "no_inline_module", **core.pragmas}
    return Design(top=MultiCore(cfg), modules=modules, pragmas=pragmas)


def multicore_sim(cfg, *, waves=False) -> SimBuild:
    """A (cached) Verilator build of the multi-core top (C++ at -O0, like the core's)."""
    return SimBuild(multicore_design(cfg), unit="multicore" + ("_waves" if waves else ""),
                    cfg=cfg, waves=waves, public_depth=1, build_args=CORE_BUILD_ARGS)


# ---- the collective-engine ring (tb/multicore/harness.py) ------------------------------------

#: Files the engine ring's Verilog depends on besides ``rtl/`` (in its build key).
ENGINE_RING_SOURCES = ("tb/multicore/harness.py", "tb/multicore/rig.py", "tb/multicore/build.py")


def engine_ring_design(cfg, engine="collective"):
    """:class:`tb.multicore.harness.EngineRingHarness` of ``engine`` (a key of
    :data:`tb.multicore.harness.ENGINES`) with the engine and the SBUF each converted once and
    instantiated ``ring_size`` times."""
    from tb.multicore.harness import EngineRingHarness, leaf_modules
    return Design(top=EngineRingHarness(cfg, engine=engine), modules=leaf_modules(cfg, engine))


def engine_ring_sim(cfg, *, optimize=True, engine="collective") -> SimBuild:
    """A (cached) Verilator build of the engine ring of ``cfg`` (``cfg.ring_size`` ranks) of
    ``engine`` (``"permute"``: :class:`rtl.collective.permute.PermuteEngine`, its own build
    directory); ``optimize=False`` compiles the C++ at ``-O0`` like the core's regression build (a shorter
    build for short tests, a separate directory). cocotb sees the top's ports and the SBUF
    bank memories only (``public_depth=1``); a finished build of the same key (config,
    ``rtl/``, :data:`ENGINE_RING_SOURCES`, options) is reused without elaborating the design
    (``.cached``)."""
    import hashlib

    from tb.core.build import build_key, sources_digest
    from tb.multicore.harness import ENGINES, SBUF_MODULE
    from tb.runner import FAST_BUILD_ARGS, MAKE_OVERRIDES, ROOT
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {tuple(ENGINES)}, not {engine!r}")
    public = [(SBUF_MODULE, "bank*")]
    unit, args = ("engine_ring", ()) if optimize else ("engine_ring_o0", CORE_BUILD_ARGS)
    if engine != "collective":
        unit = unit.replace("engine", engine)
    options = {"unit": unit, "public_depth": 1, "public_vars": public, "build_args": args,
               "fast_build_args": FAST_BUILD_ARGS, "make_overrides": MAKE_OVERRIDES}
    h = hashlib.sha1(sources_digest().encode())
    for f in ENGINE_RING_SOURCES:
        h.update(f.encode() + b"\0" + (ROOT / f).read_bytes() + b"\0")
    return SimBuild(lambda: engine_ring_design(cfg, engine), unit=unit, cfg=cfg, build_args=args,
                    public_depth=1, public_vars=public,
                    key=build_key(cfg, options, h.hexdigest()))


def permute_ring_case(cfg, op, size, seed=0, *, layout="packed", d=1):
    """``(instruction text, SBUF images)`` of one FP32 ``op`` (``"all_to_all"``, or
    ``"send_recv"`` with distance ``d``) of ``size`` bytes per core on ``cfg.ring_size`` ranks
    of ``cfg``, for the ring of :class:`rtl.collective.permute.PermuteEngine`: the source at byte
    0 of every partition (``partitions`` rows of random data, ``seed``), the destination of the
    same shape placed by ``layout`` (``"packed"`` right after the source, ``"split"`` at the
    middle of the partition, other SBUF banks), so an all-to-all block is ``partitions / n``
    whole rows; the same instruction on every rank."""
    from tb.multicore.program import RING_LAYOUTS, engine_ring_case
    if op not in ("all_to_all", "send_recv"):
        raise ValueError(f"op must be 'all_to_all' or 'send_recv', not {op!r}")
    n, P = cfg.ring_size, cfg.partitions
    if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < n:
        raise ValueError(f"d must be an int in [0, ring_size = {n}), not {d!r}")
    if layout not in RING_LAYOUTS:
        raise ValueError(f"layout must be one of {RING_LAYOUTS}, not {layout!r}")
    # an all-reduce of the same size has the same source and destination shape and data
    text, images = engine_ring_case(cfg, "all_reduce", size, seed, layout=layout)
    text = text.replace("all_reduce", op).replace(" op=1", f" d={d}" if op == "send_recv"
                                                                    else "")
    assert P % n == 0 and f"fp32[0:{P}]" in text
    return text, images


def ring_case(cfg, case):
    """``(instruction text, SBUF images)`` of one engine-ring case (a dict: ``op``, ``size``
    and optionally ``seed``, ``layout``, ``d``): :func:`tb.multicore.program.engine_ring_case`
    for the collective engine's ops, :func:`permute_ring_case` for all_to_all and send_recv."""
    from tb.multicore.program import RING_OPS, engine_ring_case
    op, size = case["op"], int(case["size"])
    seed, layout = int(case.get("seed", 0)), case.get("layout", "packed")
    if op in RING_OPS:
        return engine_ring_case(cfg, op, size, seed, layout=layout)
    return permute_ring_case(cfg, op, size, seed, layout=layout, d=int(case.get("d", 1)))


def run_engine_ring(cfg, cases, *, seed=0, sim=None):
    """Run ``cases`` (``[(op, size bytes per core)]``, or dicts of the case keys of
    :mod:`tb.multicore.tb_multicore_engine_ring`) in one simulation of the Verilator engine
    ring of ``cfg`` (``sim``: a build of it, default :func:`engine_ring_sim` of the permute
    engine when every case is an all_to_all or send_recv), every rank's
    SBUF checked bit for bit against the golden multi-core simulator (``AssertionError``
    otherwise), ``seed`` the data's unless a case names its own. Returns one dict per case
    (``op``, ``size``, ``n``, ``cycles``, ``sim_seconds``...) and the build's seconds (0 when
    cached)."""
    import json
    import os
    cases = [c if isinstance(c, dict) else {"op": c[0], "size": c[1]} for c in cases]
    perm = {c["op"] in ("all_to_all", "send_recv") for c in cases}
    if len(perm) > 1:
        raise ValueError("cases mix the permute engine's ops and the collective engine's")
    sim = sim or engine_ring_sim(cfg, engine="permute" if perm == {True} else "collective")
    out = sim.build_dir / f"engine_ring_metrics_{os.getpid()}.jsonl"
    out.unlink(missing_ok=True)
    sim.run("tb.multicore.tb_multicore_engine_ring", tag="engine_ring",
            params={"seed": seed, "metrics": str(out), "cases": cases})
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    if len(rows) != len(cases):
        raise RuntimeError(f"engine ring: {len(rows)} results for {len(cases)} cases")
    return rows, sim.build_seconds
