# SPDX-License-Identifier: Apache-2.0
"""The parts of the whole-core report (:mod:`synth.core`): how each submodule of the
:class:`NeuronCore` top is built for synthesis, and how many times the top has it.

The factories live here, apart from the report code, because the result cache's first key
(:func:`synth.flow.job_source_hash`) covers the file that defines a block's ``build``: editing
the table or the plot in :mod:`synth.core` does not make a rerun elaborate the core again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .blocks import Block

__all__ = ["PARTS", "TOP_PARTS", "FLAT", "Part", "core_design", "top_part", "engines",
           "n_seq"]


#: The SBUF row ports of the NeuronCore top (``rtl/core/neuroncore.py``; checked by
#: ``tests/test_synth.py::test_core_parts_cover_every_submodule_of_the_top``).
_SBUF_ROW_PORTS = ("tensor_st", "tensor_mv", "vector_r0", "vector_r1", "vector_w",
                   "scalar_r", "scalar_w", "cc_r", "cc_w")


def engines():
    """The engines with a sequencer (``rtl.core.neuroncore.ENGINES_BUILT``), read lazily."""
    from rtl.core.neuroncore import ENGINES_BUILT
    return ENGINES_BUILT


def n_seq():
    return len(engines())


def _tensor(cfg, v):
    from rtl.emit import Design
    from rtl.tensor.engine import leaf_modules, leaf_pragmas
    from rtl.tensor.sbuf_fed import SbufTensorEngine
    return Design(top=SbufTensorEngine(cfg, use_instances=True), modules=leaf_modules(cfg),
                  pragmas=leaf_pragmas(cfg))


def _vector(cfg, v):
    from rtl.emit import Design
    from rtl.vector.engine import VectorEngine
    from rtl.vector.fu import leaf_modules
    return Design(top=VectorEngine(cfg, use_instances=True), modules=leaf_modules(cfg))


def _scalar(cfg, v):
    from rtl.emit import Design
    from rtl.scalar.engine import ScalarEngine, leaf_modules
    return Design(top=ScalarEngine(cfg, use_instances=True), modules=leaf_modules(cfg))


def _dma(cfg, v):
    from rtl.dma.engine import DMAEngine
    return DMAEngine(cfg, timeout=None, engine=0)


def _sbuf(cfg, v):
    from rtl.mem.sbuf import SBUF
    return SBUF(cfg, row_ports=_SBUF_ROW_PORTS,
                part_ports=tuple(f"dma{i}" for i in range(cfg.dma_engines)),
                priority=("tensor_st", "tensor_mv"))


def _sequencer(cfg, v):
    from rtl.core.sequencer import Sequencer
    return Sequencer(cfg, "dve")


def _sems(cfg, v):
    from rtl.core.semaphores import SemaphoreFile
    n = n_seq()
    return SemaphoreFile(cfg, sources=n + cfg.dma_engines, readers=n)


def _csr(cfg, v):
    from rtl.core.csr import CSR
    return CSR(cfg)


def _axi(cfg, v):
    from rtl.core.axi_mux import AXI4Mux
    return AXI4Mux(cfg, n_seq() + 1 + cfg.dma_engines)


def _decoders(cfg, v):
    if v == "tensor":
        from rtl.core.tensor_decode import TensorDecoder
        return TensorDecoder(cfg)
    from rtl.core.engine_decode import CCDecoder, ScalarDecoder, VectorDecoder
    return {"vector": VectorDecoder, "scalar": ScalarDecoder, "cc": CCDecoder}[v](cfg)


def _sync(cfg, v):
    from rtl.core.sync_engine import SyncEngine
    return SyncEngine(cfg)


def _rowmux(cfg, v):
    from rtl.mem.rowmux import RowPortMux
    return RowPortMux(cfg, "psum", int(v))


def _cc(cfg, v):
    from rtl.collective.engine import CollectiveEngine
    return CollectiveEngine(cfg)


def _cc_permute(cfg, v):
    from rtl.collective.permute import PermuteEngine
    return PermuteEngine(cfg)


def _link(cfg, v):
    # the core's own ports: a TX toward rank + 1 (built without the dateline) and an RX
    from rtl.collective.link import LinkRX, LinkTX
    return LinkTX(cfg) if v == "tx" else LinkRX(cfg)


def core_design(cfg):
    """The whole :class:`NeuronCore` with its leaf modules converted once (as the Verilator
    build of ``tb.core.build.core_design``)."""
    from rtl.core.neuroncore import NeuronCore
    from rtl.emit import Design
    from rtl.scalar.engine import leaf_modules as scalar_leaves
    from rtl.tensor.engine import leaf_modules as tensor_leaves
    from rtl.vector.fu import leaf_modules as vector_leaves
    return Design(top=NeuronCore(cfg), modules={**tensor_leaves(cfg), **scalar_leaves(cfg),
                                                **vector_leaves(cfg)})


def _core(cfg, v):
    return core_design(cfg)


def _blk(name, build, variants=None, **kw):
    return Block(name=name, module="rtl.core.neuroncore", build=build, pnr=False, sweep=False,
                 variants=variants, **kw)


@dataclass(frozen=True)
class Part:
    """One synthesized part of the core: ``block`` (all its ``variants``) times ``count(cfg)``."""
    block: Block
    count: Callable = lambda cfg: 1


PARTS = {
    "tensor": Part(_blk("core_tensor", _tensor)),
    "vector": Part(_blk("core_vector", _vector)),
    "scalar": Part(_blk("core_scalar", _scalar)),
    "dma": Part(_blk("core_dma", _dma), lambda cfg: cfg.dma_engines),
    "sbuf": Part(_blk("core_sbuf", _sbuf, rtlil=True)),
    "sequencer": Part(_blk("core_sequencer", _sequencer), lambda cfg: n_seq()),
    "semaphores": Part(_blk("core_semaphores", _sems)),
    "csr": Part(_blk("core_csr", _csr)),
    "axi_mux": Part(_blk("core_axi_mux", _axi)),
    "decoders": Part(_blk("core_decode", _decoders,
                          variants=lambda cfg: ("tensor", "vector", "scalar", "cc"))),
    "sync": Part(_blk("core_sync", _sync)),
    "psum_mux": Part(_blk("core_psum_mux", _rowmux, variants=lambda cfg: ("3", "2"))),
    "cc": Part(_blk("core_cc", _cc)),
    "cc_permute": Part(_blk("core_cc_permute", _cc_permute)),
    "link": Part(_blk("core_link", _link, variants=lambda cfg: ("tx", "rx")),
                 lambda cfg: 1 if cfg.ring_size > 1 else 0),
    "glue": Part(_blk("core_glue", _core, rtlil=True, glue=True)),
}
#: The part of each submodule of the NeuronCore top, by its name there (``*``: a prefix).
TOP_PARTS = {"csr": "csr", "axi_mux": "axi_mux", "seq_*": "sequencer", "sems": "semaphores",
             "tensor": "tensor", "tensor_decode": "decoders", "sync": "sync", "dma*": "dma",
             "vector": "vector", "vector_decode": "decoders", "scalar": "scalar",
             "scalar_decode": "decoders", "sbuf": "sbuf", "vector_psum": "psum_mux",
             "scalar_psum": "psum_mux", "cc": "cc", "cc_permute": "cc_permute",
             "cc_decode": "decoders",
             "link_tx": "link", "link_rx": "link"}


def top_part(name):
    """The part (a key of :data:`PARTS`) that stands for the top's submodule ``name``."""
    if name in TOP_PARTS:
        return TOP_PARTS[name]
    for k, v in TOP_PARTS.items():
        if k.endswith("*") and name.startswith(k[:-1]):
            return v
    raise KeyError(f"submodule {name!r} of the NeuronCore top has no part in synth.core.PARTS")
#: The whole core in one flattened run (the estimate check).
FLAT = _blk("core_flat", _core, rtlil=True, flatten=True)
