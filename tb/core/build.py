# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of the NeuronCore top (one per config), cached by a key.

Elaborating the core in Amaranth takes most of a minute of Python even when Verilator then
finds nothing to rebuild, so :func:`core_sim` keys each build by :func:`build_key`: a SHA-1 of
the config, the build options and every source the Verilog comes from (``rtl/**/*.py``, this
file, ``tb/runner.py``) plus the Amaranth and Verilator versions. A build directory whose
finished build has the same key is used as it is, without elaborating; any other key (a config
field, an RTL line, an option changed) elaborates and rebuilds, so a stale build is never
run."""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

from rtl.core.neuroncore import NeuronCore
from rtl.emit import Design
from rtl.scalar import engine as scalar_engine
from rtl.tensor.array import group_module_name, pe_module_name
from rtl.tensor import engine as tensor_engine
from rtl.vector import fu as vector_fu
from tb.runner import FAST_BUILD_ARGS, MAKE_OVERRIDES, ROOT, SimBuild

__all__ = ["HIER_ABOVE_PES", "core_design", "core_sim", "integration_cfg", "build_key",
           "sources_digest"]


def integration_cfg(cfg, *, sparse=False):
    """``cfg`` narrowed for the whole-core tests: BF16 the only tensor input format, no MX, no
    sparsity, and DMA engines without the element path (the kernels' DMA only copies). The core
    test checks how the blocks are joined (queues, semaphores, DMA, engines, errors); every
    format, MX, sparsity and the DMA's element ops are verified block by block. The narrower PE, vector
    lanes and converters cut the Verilator build several-fold.

    ``sparse``: the core of ``make sim`` instead, with the 4:16 sparse PE and FP8 E4M3 (the
    sparse MLP's moving format) as well, so the sparse MLP runs on the tensor engine's sparse
    mode; a separate build."""
    tensor = (dict(name=f"{cfg.name}_core_sparse", formats=("bf16", "fp8_e4m3"),
                   sparse_patterns=("4:16",)) if sparse
              else dict(name=f"{cfg.name}_core", formats=("bf16",), sparse_patterns=()))
    return cfg.replace(**tensor, mx_formats=(), dma_element_ops=False)


def core_design(cfg, *, hier=False):
    """The core with its PE modules, the vector engine's lane ALU and the scalar engine's
    function unit converted once each and instantiated by name.

    ``hier=False``: every leaf is a ``no_inline_module``; Verilator keeps one C++ class per
    leaf, but still writes evaluation code per instance wherever an instance's logic reads its
    neighbours' (the PE array: 55 MB of C++ for 16 x 16 PEs). ``hier=True``: the PE group,
    the lane ALU and the function unit are ``hier_block``s (``verilator --hierarchical``), each
    verilated and compiled once as a library; the other leaves stay ``no_inline_module``."""
    modules = {**tensor_engine.leaf_modules(cfg), **scalar_engine.leaf_modules(cfg),
               **vector_fu.leaf_modules(cfg)}
    pragmas = {name: "no_inline_module" for name in modules}
    if hier:
        pragmas.pop(pe_module_name(cfg))     # inlined in its group
        pragmas.update({group_module_name(cfg): "hier_block",
                        scalar_engine.fu_module_name(cfg): "hier_block",
                        vector_fu.alu_module_name(cfg): "hier_block"})
    return Design(top=NeuronCore(cfg), modules=modules, pragmas=pragmas)


#: Above this many PEs the core is built with Verilator hierarchical blocks (``hier``): the
#: flat build of the default core (16 x 16 PEs) writes a few hundred MB of C++ and did not
#: finish at -O3 (docs/core.md §6); 8 x 8 and below build flat in minutes.
HIER_ABOVE_PES = 64

#: The core's C++ is compiled without optimization for the regression, whose runs are short
#: (docs/core.md, "Simulation speed": about 1.7 min of build and ~1,000 cycles/s at -O0).
CORE_BUILD_ARGS = ("-CFLAGS", "-O0")


def sources_digest(root=ROOT):
    """SHA-1 (hex) of the files the core's Verilog and its build depend on: every
    ``rtl/**/*.py``, ``tb/core/build.py`` and ``tb/runner.py`` under ``root`` (path and
    contents), and the installed Amaranth and Verilator versions. Reading and hashing them
    takes milliseconds."""
    root = Path(root)
    h = hashlib.sha1()
    files = sorted((root / "rtl").rglob("*.py")) + [root / "tb" / "core" / "build.py",
                                                     root / "tb" / "runner.py"]
    for f in files:
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    for dist in ("amaranth", "verilator"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=none".encode())
    return h.hexdigest()


def build_key(cfg, options, sources):
    """The cache key of a core build: SHA-1 (hex) of the whole config (``cfg.to_dict()``), the
    JSON-able build ``options`` and the ``sources`` digest (:func:`sources_digest`)."""
    text = json.dumps({"cfg": cfg.to_dict(), "options": options, "sources": sources},
                      sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def core_sim(cfg, *, waves=False, optimize=False, hier=False) -> SimBuild:
    """A (cached) Verilator build of the core; ``optimize`` compiles the C++ at the default
    ``-O3`` of the fast build (a separate build: several times longer to build, faster to run,
    for long benchmarks); ``waves`` builds with VCD tracing, in a directory of its own so the
    regression's build stays valid; ``hier`` builds the many-instance leaves as Verilator
    hierarchical blocks (:func:`core_design`). The core's testbenches use only its ports, so
    only the top module is visible to cocotb (``public_depth=1``: 17 times faster, see
    :class:`~tb.runner.SimBuild`). A finished build of the same :func:`build_key` is reused
    without elaborating the design (``.cached``)."""
    unit = ("core_opt" if optimize else "core") + ("_hier" if hier else "") \
        + ("_waves" if waves else "")
    args = (() if optimize else CORE_BUILD_ARGS) + (("--hierarchical",) if hier else ())
    options = {"unit": unit, "waves": waves, "build_args": args, "public_depth": 1,
               "fast_build_args": FAST_BUILD_ARGS, "make_overrides": MAKE_OVERRIDES}
    key = build_key(cfg, options, sources_digest())
    return SimBuild(lambda: core_design(cfg, hier=hier), unit=unit, cfg=cfg, waves=waves,
                    public_depth=1, build_args=args, key=key)
