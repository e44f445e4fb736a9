# SPDX-License-Identifier: Apache-2.0
"""The error codes the golden ISA simulator reports (defined in :mod:`rtl.isa`,
``docs/architecture.md`` §11.2, re-exported here for its engine hooks) and the two ways it
reports them: :class:`Fault` (raised by an engine hook) and :class:`SimError` (the
first error of a run)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rtl.isa import (E_AP_ALIGN, E_AP_FORM, E_AP_PART, E_AP_RANGE, E_AXI, E_DESC, E_FLAGS,
                     E_FORMAT, E_LINK, E_OPCODE, E_QUEUE, E_SEM, E_SHAPE, E_SPARSE_TAG,
                     E_TIMEOUT, ERROR_NAMES)

__all__ = ["E_OPCODE", "E_FORMAT", "E_AP_PART", "E_AP_RANGE", "E_SHAPE", "E_FLAGS",
           "E_SPARSE_TAG", "E_SEM", "E_TIMEOUT", "E_AXI", "E_QUEUE", "E_LINK", "E_DESC",
           "E_AP_ALIGN", "E_AP_FORM", "ERROR_NAMES", "Fault", "SimError"]


class Fault(Exception):
    """An instruction rejected by its checks: ``code`` (§11.2), ``info`` (``ERR_INFO``: the AP
    slot for AP/format/shape errors, the semaphore for ``E_SEM``/``E_TIMEOUT``, the DMA detail
    word for DMA errors), ``msg``."""

    def __init__(self, code, info, msg):
        super().__init__(f"{ERROR_NAMES.get(code, code)}: {msg}")
        self.code, self.info, self.msg = code, info, msg


@dataclass(frozen=True)
class SimError:
    """The first error of a run: ``code``, ``source`` (an engine name of
    :data:`rtl.isa.ENGINES`, ``"dma<e>.q<q>"`` or ``"sem"``), ``index`` (queue index of the
    instruction, or descriptor number on its DMA queue), ``info`` and ``detail`` (text), and
    ``op``: the kernel operation that emitted the instruction when known (set by
    :meth:`golden.kernel.KernelProgram.locate`, e.g. ``"tensor_tensor #3"``).

    ``str()`` gives ``E_SHAPE on dve instruction 2 (tensor_tensor #1): ...`` with the detail
    cut before any decoded-instruction dump (the whole text stays in ``detail``)."""
    code: int
    source: str
    index: int
    info: int
    detail: str
    op: str = field(default="", compare=False)

    @property
    def name(self):
        return ERROR_NAMES.get(self.code, hex(self.code))

    @property
    def short_detail(self):
        """``detail`` without a trailing decoded-instruction dump (``(VecInstr(...))``), on one
        line, at most 200 characters."""
        d = " ".join(re.sub(r"\s*\(\w+Instr\(.*$", "", self.detail, flags=re.S).split())
        return d if len(d) <= 200 else d[:197] + "..."

    def __str__(self):
        what = "descriptor" if self.source.startswith("dma") else "instruction"
        where = "" if self.source == "sem" else f" on {self.source} {what} {self.index}"
        op = f" ({self.op})" if self.op else ""
        return f"{self.name}{where}{op}: {self.short_detail}"

    def __repr__(self):
        op = f", op={self.op!r}" if self.op else ""
        return (f"SimError({self.name}, source={self.source!r}, index={self.index}, "
                f"info={self.info}{op}, detail={self.short_detail!r})")


