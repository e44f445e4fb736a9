# SPDX-License-Identifier: Apache-2.0
"""The one registry of blocks that ``make synth`` reports.

A new block joins the area report by adding **one** :class:`Block` entry to :data:`BLOCKS` below;
the flow (:mod:`synth.flow`) is not edited. Entries import their RTL lazily: a block whose Python
module does not exist yet is listed as "not available" and skipped, so the flow runs while the
core is being written.

A factory is ``build(cfg, variant) -> Component | Design`` (see :class:`rtl.emit.Design`); it
returns the block for the :class:`rtl.config.CoreConfig` ``cfg``. ``variants(cfg)`` lists the
variants reported for that config (one CSV row each, named ``<block>_<variant>``), or is ``None``
for a single row named ``<block>``.

An ``array`` block is a grid built from one processing-element module instantiated by name
(``Design.modules[pe_module]``); the sweep synthesizes it at several sizes and estimates the
larger sizes hierarchically (:mod:`synth.estimate`).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Callable, Optional

__all__ = ["Block", "BLOCKS", "get_block", "available_blocks", "is_available"]


@dataclass(frozen=True)
class Block:
    """One entry of the registry.

    Parameters
    ----------
    name : str
        Row name in the report (``<name>`` or ``<name>_<variant>``).
    module : str
        Python module that must exist for the block to be available (e.g. ``"rtl.fp.fma"``).
    build : callable
        ``build(cfg, variant)`` returning an Amaranth ``Component`` or a ``Design``.
    variants : callable or None
        ``variants(cfg)`` -> tuple of variant names, or ``None`` for one row.
    array : bool
        True for a grid built hierarchically from the module ``pe_module``.
    pe_module : str, callable or None
        Name of the processing-element module in ``Design.modules`` (array blocks only), or
        ``pe_module(cfg)`` returning it.
    pnr : bool
        Whether the default flow places and routes the block for an ECP5 Fmax. Large blocks set
        this False (their LUT count exceeds the largest ECP5 part; the report says "n/a").
    sweep : bool
        Whether ``make synth-sweep`` also synthesizes the block for every format configuration
        (False: only for the chosen preset, e.g. a whole engine that costs as much as an array).
    holds_array : bool
        A non-array block that contains the whole array (e.g. the engine): it is synthesized
        only while the preset's array is no larger than the largest directly synthesized array
        size (``synth.cli.DIRECT_SIZES``); above it the report names it as not synthesized
        and the array's own area is estimated hierarchically.
    default : bool
        Whether the default ``make synth`` synthesizes the block (False: only ``--blocks`` naming
        it, or the sweep; for composites whose parts are rows of their own, so that the
        default run stays within its 10-minute budget on 2 cores).
    default_variants : callable or None
        ``default_variants(cfg)`` -> the variants the default run synthesizes (``None``: all of
        ``variants``); the sweep synthesizes every variant.
    description : str
        One line for the Markdown report.
    sources : tuple of str
        Repository-relative RTL files whose mutants belong to this block (``make mutate``).
    tests : tuple of str
        pytest node ids that cover the block: the tests ``make mutate`` runs on its mutants
        (keep the fastest first: a mutant stops at its first failing test).
    rtlil : bool
        Hand yosys the block's RTLIL (``rtl.emit.emit_rtlil``) instead of its Verilog: for
        memories with byte-lane write enables, which the Verilog round trip splits into one
        write port per lane (the default SBUF: 256 per bank, a front end that never finished).
    default_pnr : bool
        Whether the default ``make synth`` (no ``--blocks``) places and routes the block (False:
        its Fmax comes from ``--blocks <name>`` or the sweep, so that the default run stays
        within its 10-minute budget on 2 cores).
    slow : bool
        A long single job (minutes of synthesis or place and route at the default preset):
        started before the short ones so that the two workers finish together.
    glue : bool
        Synthesize the top module's own logic only: every other module of the design is a
        blackbox (the glue of the whole-core report, :mod:`synth.core`).
    flatten : bool
        Flatten the design before synthesis (optimization across the hierarchy; the figures
        have no per-module breakdown): the whole-core check of :mod:`synth.core`.
    """

    name: str
    module: str
    build: Callable
    variants: Optional[Callable] = None
    array: bool = False
    pe_module: Optional[object] = None
    pnr: bool = True
    sweep: bool = True
    holds_array: bool = False
    default: bool = True
    default_variants: Optional[Callable] = None
    description: str = ""
    sources: tuple = ()
    tests: tuple = ()
    rtlil: bool = False
    default_pnr: bool = True
    slow: bool = False
    glue: bool = False
    flatten: bool = False


def _mac_variants(cfg):
    # One MAC per enabled dense input format, plus the multi-format MAC the array uses.
    return tuple(cfg.formats) + ("all",)


def _build_mac(cfg, variant):
    from rtl.fp.fma import FMA
    fmts = tuple(cfg.formats) if variant == "all" else (variant,)
    return FMA(cfg, formats_a=fmts, formats_b=fmts)


def _build_adder(cfg, variant):
    from rtl.fp.adder import FP32Adder
    return FP32Adder(cfg)


def _build_convert(cfg, variant):
    from rtl.fp.convert import ConvertFromFP32
    return ConvertFromFP32(cfg)     # the core's targets: default_convert_formats(cfg)


def _build_widen(cfg, variant):
    from rtl.fp.widen import WidenToFP32
    return WidenToFP32(cfg)


def _build_pe(cfg, variant):
    from rtl.tensor.pe import PE
    return PE(cfg)


def _build_array(cfg, variant):
    from rtl.tensor.array import SystolicArray, array_leaf_modules
    from rtl.emit import Design
    return Design(top=SystolicArray(cfg), modules=array_leaf_modules(cfg))


def _array_pe_module(cfg):
    from rtl.tensor.array import pe_module_name
    return pe_module_name(cfg)


def _build_ap_generator(cfg, variant):
    from rtl.mem.ap import APGenerator
    return APGenerator(cfg)


def _build_dma_engine(cfg, variant):
    from rtl.dma.engine import DMAEngine
    return DMAEngine(cfg.replace(dma_element_ops=(variant == "element")))


def _build_dma_element_alu(cfg, variant):
    from rtl.dma.element import ElementALU
    return ElementALU(cfg)


def _build_dma_check(cfg, variant):
    from rtl.dma.descriptor import DescriptorCheck
    return DescriptorCheck(cfg)


def _build_semaphores(cfg, variant):
    from rtl.core.semaphores import SemaphoreFile
    return SemaphoreFile(cfg, sources=cfg.dma_engines)


def _build_sbuf(cfg, variant):
    from rtl.mem.sbuf import SBUF
    # the ports the plan names (architecture §4.1): tensor stationary / moving (priority),
    # vector 2R + 1W, scalar R + W, one DMA partition port per DMA engine
    return SBUF(cfg, row_ports=("tensor_st", "tensor_mv", "vector_r0", "vector_r1", "vector_w",
                                "scalar_r", "scalar_w"),
                part_ports=tuple(f"dma{i}" for i in range(cfg.dma_engines)),
                priority=("tensor_st", "tensor_mv"))


def _build_bank_arbiter(cfg, variant):
    from rtl.mem.arbiter import ArbiterUnit
    from rtl.mem.sbuf import YIELD_AFTER
    # a bank of _build_sbuf's SBUF: 2 priority row ports, 5 other row ports + the DMA ports
    return ArbiterUnit(2, 5 + cfg.dma_engines, YIELD_AFTER)


def _build_psum(cfg, variant):
    from rtl.emit import Design
    from rtl.fp.adder import FP32Adder
    from rtl.tensor.psum import ENGINE_ROW_PORTS, PsumUnit, psum_adder_module_name
    return Design(top=PsumUnit(cfg, row_ports=ENGINE_ROW_PORTS),
                  modules={psum_adder_module_name(cfg): FP32Adder(cfg)})


def _build_ap_reader(cfg, variant):
    from rtl.mem.apport import APReader
    return APReader(cfg, "sbuf", prefetch=variant == "prefetch")


def _build_ap_writer(cfg, variant):
    from rtl.mem.apport import APWriter
    return APWriter(cfg, "sbuf")


def _build_vector_engine(cfg, variant):
    # the lane ALU converted once and instantiated per lane: yosys maps it once and the
    # report multiplies it by its instance count
    from rtl.emit import Design
    from rtl.vector.engine import VectorEngine
    from rtl.vector.fu import leaf_modules
    return Design(top=VectorEngine(cfg, use_instances=True), modules=leaf_modules(cfg))


def _build_vector_alu(cfg, variant):
    from rtl.vector.alu import LaneALU
    return LaneALU(cfg)


def _build_link_port(cfg, variant):
    from rtl.collective.link import LinkPort
    return LinkPort(cfg)


def _build_cc_engine(cfg, variant):
    from rtl.collective.engine import CollectiveEngine
    return CollectiveEngine(cfg)


def _build_cc_permute(cfg, variant):
    from rtl.collective.permute import PermuteEngine
    return PermuteEngine(cfg)


def _build_tensor_sbuf(cfg, variant):
    from rtl.emit import Design
    from rtl.tensor.engine import leaf_modules, leaf_pragmas
    from rtl.tensor.sbuf_fed import SbufTensorEngine
    return Design(top=SbufTensorEngine(cfg), modules=leaf_modules(cfg), pragmas=leaf_pragmas(cfg))


def _build_sequencer(cfg, variant):
    from rtl.core.sequencer import Sequencer
    return Sequencer(cfg, "dve")


def _build_csr(cfg, variant):
    from rtl.core.csr import CSR
    return CSR(cfg)


def _build_axi_mux(cfg, variant):
    from rtl.core.axi_mux import AXI4Mux
    return AXI4Mux(cfg, 4)


def _build_tensor_decode(cfg, variant):
    from rtl.core.tensor_decode import TensorDecoder
    return TensorDecoder(cfg)


def _build_sync_engine(cfg, variant):
    from rtl.core.sync_engine import SyncEngine
    return SyncEngine(cfg)
def _build_act_function(cfg, variant):
    from rtl.scalar.function import FunctionUnit
    return FunctionUnit(cfg)


def _build_scalar_engine(cfg, variant):
    # the function unit converted once (as _build_vector_engine's lane ALU)
    from rtl.emit import Design
    from rtl.scalar.engine import ScalarEngine, leaf_modules
    return Design(top=ScalarEngine(cfg, use_instances=True), modules=leaf_modules(cfg))


def _build_rowmux(cfg, variant):
    from rtl.mem.rowmux import RowPortMux
    return RowPortMux(cfg, "psum", 3)


def _build_vector_decode(cfg, variant):
    from rtl.core.engine_decode import VectorDecoder
    return VectorDecoder(cfg)


def _build_engine(cfg, variant):
    from rtl.tensor.engine import build_tensor_engine
    return build_tensor_engine(cfg)     # Design: engine + leaf modules converted once


_ARITH = "tests/test_fp_arith.py::"
_CONV = "tests/test_fp_convert.py::"
#: Fast amaranth.sim unit tests first: ``make mutate`` runs pytest with ``-x`` in this order, so
#: most mutants are killed in seconds before a Verilator build is needed.
_TENSOR = ("tests/test_tensor_units.py", "tests/test_tensor_engine.py::test_tensor_engine")
_DMA = ("tests/test_dma_units.py", "tests/test_dma_element.py", "tests/test_dma.py::test_dma",
        "tests/test_mem_dma_fed.py::test_dma_sbuf_with_tensor")
#: The sparsity decoder (group bus, tag mux) and the sparse paths of the PE and the engine:
#: the amaranth.sim unit tests and the formal check first, then the cocotb sparse tests.
_SPARSE = ("tests/test_tensor_sparse_units.py", "tests/test_tensor_sparse.py::test_tensor_sparse")
#: The packed modes (double-rate FP8, x4 MX): the PE's dot unit in amaranth.sim, then cocotb.
_PACKED = ("tests/test_tensor_packed_units.py", "tests/test_tensor_packed.py::test_tensor_packed")
_MEM = "tests/test_mem_"
_VECTOR = ("tests/test_vector_units.py",)

#: THE registry. Add one entry per block; keep the order of the report.
BLOCKS = (
    Block(name="mac", module="rtl.fp.fma", build=_build_mac, variants=_mac_variants,
          default_variants=lambda cfg: ("all",), default_pnr=False,
          description="fused multiply-add: exact multiplier of one input format + FP32 adder",
          sources=("rtl/fp/fma.py", "rtl/fp/multiplier.py", "rtl/fp/unpack.py"),
          tests=(_ARITH + "test_multiplier_few_formats", _ARITH + "test_fma_pipeline_depths",
                 _ARITH + "test_multiplier", _ARITH + "test_fma")),
    Block(name="fp32_adder", module="rtl.fp.adder", build=_build_adder,
          description="FP32 adder (the accumulator of a MAC)",
          sources=("rtl/fp/fused_add.py", "rtl/fp/adder.py", "rtl/fp/pipe.py"),
          tests=(_ARITH + "test_fma_pipeline_depths", _ARITH + "test_adder",
                 _ARITH + "test_fma")),
    Block(name="convert", module="rtl.fp.convert", build=_build_convert,
          description="FP32 -> every enabled format (RNE / stochastic rounding)",
          sources=("rtl/fp/convert.py", "rtl/fp/prng.py"),
          tests=(_CONV + "test_xorwow_matches_golden", _CONV + "test_convert_all_formats",
                 _CONV + "test_convert_exotic_formats")),
    Block(name="widen", module="rtl.fp.widen", build=_build_widen,
          description="every enabled format (and E8M0) -> FP32",
          sources=("rtl/fp/widen.py",), tests=(_CONV + "test_widen_all_formats",)),
    Block(name="tensor_pe", module="rtl.tensor.pe", build=_build_pe,
          description="tensor-engine PE: weight-stationary FMA of every enabled format (+MX)",
          sources=("rtl/tensor/pe.py", "rtl/tensor/sparse.py", "rtl/tensor/splitmul.py",
                   "rtl/tensor/dot.py"),
          tests=_PACKED + _SPARSE + _TENSOR, slow=True),
    # The array's Fmax is its PE's (every path is PE-local or a single skew register); the
    # array itself is too big for the ECP5 parts at 16 x 16 and is not placed and routed.
    Block(name="tensor_array", module="rtl.tensor.array", build=_build_array, array=True,
          pe_module=_array_pe_module, pnr=False,
          description="pe_rows x pe_cols systolic array of tensor_pe with input skew/de-skew",
          sources=("rtl/tensor/array.py", "rtl/tensor/row.py", "rtl/tensor/hier.py"),
          tests=_TENSOR),
    # Above 16 x 16 the engine's skew triangles and its PSUM memory (whose initial block alone is
    # megabytes of Verilog at 128 x 128) keep yosys' front end busy for far longer than
    # `make synth` may take; the array's area is estimated, the PSUM bits follow the config.
    Block(name="tensor_engine", module="rtl.tensor.engine", build=_build_engine, pnr=False,
          sweep=False, holds_array=True, default=False,
          description="tensor engine: array + PSUM banks (memory) + lane adders + control",
          sources=("rtl/tensor/engine.py",), tests=_TENSOR + _SPARSE + _PACKED),
    Block(name="ap_generator", module="rtl.mem.ap", default=False, build=_build_ap_generator,
          description="access-pattern generator: closed-form range check, one address/cycle",
          sources=("rtl/mem/ap.py",), tests=("tests/test_ap_units.py",)),
    Block(name="dma_engine", module="rtl.dma.engine", default=False, build=_build_dma_engine, pnr=False,
          sweep=False, variants=lambda cfg: ("element", "bytes"),
          description="one DMA engine: descriptor queues, check, walkers, AXI4 master, SBUF "
                      "port; with the element path (dma_element_ops) or without",
          sources=("rtl/dma/engine.py", "rtl/dma/walker.py", "rtl/dma/descriptor.py",
                   "rtl/dma/axi.py", "rtl/dma/element.py"), tests=_DMA),
    Block(name="dma_element_alu", module="rtl.dma.element", default=False,
          build=_build_dma_element_alu, pnr=False, sweep=False,
          description="DMA element path arithmetic: 2 decoders, FP32 adder, max/min, encoder "
                      "(part of dma_engine)",
          sources=("rtl/dma/element.py",),
          tests=("tests/test_dma_element.py", "tests/test_dma.py::test_dma")),
    Block(name="dma_check", module="rtl.dma.descriptor", default=False, build=_build_dma_check, sweep=False,
          description="DMA descriptor closed-form check (part of dma_engine)",
          sources=("rtl/dma/descriptor.py",), tests=_DMA),
    Block(name="semaphores", module="rtl.core.semaphores", build=_build_semaphores,
          sweep=False, description="semaphore file (one increment source per DMA engine)",
          sources=("rtl/core/semaphores.py", "rtl/mem/arbiter.py"),
          tests=("tests/test_dma_units.py::test_semaphore_file", _MEM + "arbiter.py",
                 "tests/test_dma.py::test_dma")),
    Block(name="bank_arbiter", module="rtl.mem.arbiter", build=_build_bank_arbiter,
          description="one SBUF bank's arbiter: 2 tensor ports first, the other 7 round-robin, "
                      "yield counter",
          sources=("rtl/mem/arbiter.py",),
          tests=(_MEM + "arbiter.py", _MEM + "sbuf.py", _MEM + "formal.py")),
    Block(name="sbuf", module="rtl.mem.sbuf", build=_build_sbuf, pnr=False, sweep=False, rtlil=True,
          default=False,
          description="SBUF: banks (memory bits) + per-bank arbiters of 7 row ports and the DMA "
                      "partition ports",
          sources=("rtl/mem/sbuf.py", "rtl/mem/arbiter.py"),
          tests=(_MEM + "sbuf.py", _MEM + "ap_ports.py",
                 _MEM + "dma_fed.py::test_dma_sbuf_with_tensor")),
    Block(name="psum", module="rtl.tensor.psum", build=_build_psum, pnr=False, sweep=False,
          default=False,
          description="PSUM banks (memory bits) + accumulate adders + vector/scalar row ports",
          sources=("rtl/tensor/psum.py",),
          tests=(_MEM + "psum.py", "tests/test_tensor_units.py", _MEM + "ap_ports.py")),
    Block(name="ap_reader", module="rtl.mem.apport", default=False, build=_build_ap_reader,
          variants=lambda cfg: ("single", "prefetch"),
          description="AP reader: AP generator(s) + row-port reads + element buffer",
          sources=("rtl/mem/apport.py",), tests=(_MEM + "ap_ports.py",)),
    Block(name="ap_writer", module="rtl.mem.apport", default=False, build=_build_ap_writer,
          description="AP writer: AP generator + byte-enabled row-port writes",
          sources=("rtl/mem/apport.py",), tests=(_MEM + "ap_ports.py",)),
    Block(name="tensor_sbuf", module="rtl.tensor.sbuf_fed", build=_build_tensor_sbuf,
          pnr=False, sweep=False, holds_array=True, default=False,
          description="tensor engine fed from SBUF: engine + two prefetching AP readers + queues",
          sources=("rtl/tensor/sbuf_fed.py",),
          tests=(_MEM + "tensor_fed.py", _MEM + "tensor_fed_sparse.py")),
    Block(name="sequencer", module="rtl.core.sequencer", build=_build_sequencer, sweep=False,
          default_pnr=False,
          description="one engine's sequencer: queue fetch (AXI4 reads), E_OPCODE check, "
                      "semaphore wait + watchdog, in-order issue/retire, posts",
          sources=("rtl/core/sequencer.py", "rtl/isa.py"),
          tests=("tests/test_core_sequencer.py",)),
    Block(name="csr", module="rtl.core.csr", build=_build_csr, pnr=False, sweep=False,
          description="host registers (AXI4-Lite), first-error latch, interrupt",
          sources=("rtl/core/csr.py",), tests=("tests/test_core_csr.py",)),
    Block(name="axi_mux", module="rtl.core.axi_mux", build=_build_axi_mux, pnr=False, sweep=False,
          description="AXI4 interconnect, 4 managers onto the core's one master",
          sources=("rtl/core/axi_mux.py", "rtl/mem/arbiter.py"),
          tests=(_MEM + "arbiter.py", "tests/test_core_axi_mux.py")),
    Block(name="tensor_decode", module="rtl.core.tensor_decode", build=_build_tensor_decode,
          pnr=False, sweep=False, description="tensor-engine instruction decoder (ISA -> fed commands)",
          sources=("rtl/core/tensor_decode.py",),
          tests=("tests/test_core_decode.py", "tests/golden/test_isasim_rtl_decoders.py",
                 "tests/test_core.py")),
    Block(name="rowmux", module="rtl.mem.rowmux", build=_build_rowmux, pnr=False, sweep=False,
          description="three row-port requesters on one PSUM port (the vector engine's)",
          sources=("rtl/mem/rowmux.py", "rtl/mem/arbiter.py"),
          tests=(_MEM + "arbiter.py", "tests/test_mem_rowmux.py")),
    Block(name="vector_decode", module="rtl.core.engine_decode", build=_build_vector_decode,
          pnr=False, sweep=False, description="vector/scalar instruction decoders (ISA -> engine fields)",
          sources=("rtl/core/engine_decode.py",),
          tests=("tests/test_core_decode.py", "tests/test_core.py")),
    Block(name="sync_engine", module="rtl.core.sync_engine", build=_build_sync_engine,
          pnr=False, sweep=False, description="sync engine: dma_start (descriptor reads -> DMA queues)",
          sources=("rtl/core/sync_engine.py",),
          tests=("tests/test_core_decode.py", "tests/test_core.py")),
    Block(name="act_function", module="rtl.scalar.function", build=_build_act_function,
          pnr=False, sweep=False, default=False,
          description="Scalar-engine function unit (one lane): 12 FP32 FMAs + loadable table",
          sources=("rtl/scalar/function.py",), tests=("tests/test_act_function.py",)),
    Block(name="scalar_engine", module="rtl.scalar.engine", build=_build_scalar_engine,
          pnr=False, sweep=False, default=False,
          description="Scalar engine: P function-unit lanes, widen/convert, AP readers/writers, "
                      "accumulators, control",
          sources=("rtl/scalar/engine.py",),
          tests=("tests/test_act_engine.py", "tests/test_act_function.py")),
    Block(name="vector_engine", module="rtl.vector.engine", build=_build_vector_engine,
          pnr=False, sweep=False, default=False,
          description="vector engine: decode + lanes frame (4 AP readers, 2 writers, widen/convert "
                      "per lane) + 2 ALUs per lane + reduce partials",
          sources=("rtl/vector/engine.py", "rtl/vector/frame.py", "rtl/vector/fu.py",
                   "rtl/vector/alu.py", "rtl/vector/isa.py"), tests=_VECTOR),
    Block(name="vector_alu", module="rtl.vector.alu", build=_build_vector_alu,
          description="one vector lane ALU stage: FP32 FMA (add/sub/mul) + compare/minmax/bitwise",
          sources=("rtl/vector/alu.py",), tests=_VECTOR),
    Block(name="link_port", module="rtl.collective.link", build=_build_link_port, sweep=False,
          default_pnr=False,
          description="one ring-link port: TX (credits, sequence numbers, CRC-32C) + RX (2 VC "
                      "FIFOs of link_credits flits, CRC and sequence check, watchdogs)",
          sources=("rtl/collective/link.py", "rtl/collective/crc.py"),
          tests=("tests/test_collective_link.py", "tests/test_collective_formal.py")),
    Block(name="cc_engine", module="rtl.collective.engine", build=_build_cc_engine, sweep=False,
          default_pnr=False,
          description="the collective engine: ring schedule, source/destination cursors, FP32 "
                      "reduce (lane ALU), widen and RNE rounding (links and SBUF apart)",
          sources=("rtl/collective/engine.py", "rtl/collective/phases.py"),
          tests=("tests/test_collective_engine.py",)),
    Block(name="cc_permute", module="rtl.collective.permute", build=_build_cc_permute,
          sweep=False, default_pnr=False,
          description="the permute engine: all-to-all and send/recv, header-routed flits "
                      "with bubble flow control, source and per-origin destination cursors "
                      "(links and SBUF apart)",
          sources=("rtl/collective/permute.py",),
          tests=("tests/test_collective_permute.py",)),
)


def pe_module_of(block, cfg):
    """Name of the PE module of the array ``block`` at ``cfg``."""
    return block.pe_module(cfg) if callable(block.pe_module) else block.pe_module


def get_block(name):
    """The registered block called ``name``; ``ValueError`` naming the registered ones otherwise."""
    for b in BLOCKS:
        if b.name == name:
            return b
    raise ValueError(f"block must be one of {[b.name for b in BLOCKS]}, not {name!r}")


def is_available(block):
    """True when the block's Python module exists (it may still fail to elaborate)."""
    try:
        return importlib.util.find_spec(block.module) is not None
    except ModuleNotFoundError:
        return False


def available_blocks(blocks=BLOCKS):
    """``(available, missing)`` lists of blocks."""
    avail = [b for b in blocks if is_available(b)]
    return avail, [b for b in blocks if b not in avail]
