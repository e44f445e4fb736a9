# SPDX-License-Identifier: Apache-2.0
"""The error codes the golden ISA simulator reports (defined in :mod:`rtl.isa`,
``docs/architecture.md`` §11.2, re-exported here for its engine hooks) and the two ways it
reports them: :class:`Fault` (raised by an engine hook) and :class:`SimError` (the
first error of a run)."""

from __future__ import annotations

from dataclasses import dataclass

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
    instruction, or descriptor number on its DMA queue), ``info`` and ``detail`` (text)."""
    code: int
    source: str
    index: int
    info: int
    detail: str

    @property
    def name(self):
        return ERROR_NAMES.get(self.code, hex(self.code))


