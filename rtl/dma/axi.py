# SPDX-License-Identifier: Apache-2.0
"""The AXI4 manager interface of a DMA engine, as one flat signature.

Members carry the AXI4 names (``awid``, ``awaddr``, ..., ``rready``), so a component member
``axi`` becomes the Verilog ports ``axi__awid`` ... and cocotbext-axi finds them with
``AxiBus.from_prefix(dut, "axi", bus_separator="__")``.
"""

from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config

__all__ = ["AXI4Signature", "BURST_INCR", "RESP_OKAY", "RESP_EXOKAY", "RESP_SLVERR",
           "RESP_DECERR", "MAX_BURST", "PAGE_BYTES"]

BURST_INCR = 1
RESP_OKAY, RESP_EXOKAY, RESP_SLVERR, RESP_DECERR = 0, 1, 2, 3
#: AXI4 INCR bursts: at most 256 beats, never crossing a 4 KiB page.
MAX_BURST = 256
PAGE_BYTES = 4096


class AXI4Signature(wiring.Signature):
    """Manager (requester) view of an AXI4 interface of ``axi_data_bits`` data,
    ``axi_addr_bits`` addresses and an ID wide enough for one ID per DMA queue, or ``id_bits``
    wide (an interconnect's output carries the manager index above the manager's own ID).

    Attributes
    ----------
    data_bits, addr_bits, id_bits, strb_bits : int
    size : int
        ``log2`` of the bytes per beat (the ``AxSIZE`` of full-width bursts).
    """

    def __init__(self, cfg: CoreConfig, *, id_bits=None):
        check_config(cfg, "AXI4Signature")
        self.data_bits = cfg.axi_data_bits
        self.addr_bits = cfg.axi_addr_bits
        if id_bits is not None and (isinstance(id_bits, bool) or not isinstance(id_bits, int)
                                    or not 1 <= id_bits <= 16):
            raise ValueError(f"AXI4Signature id_bits must be in [1, 16], not {id_bits!r}")
        self.id_bits = id_bits or max(1, (cfg.dma_queues - 1).bit_length())
        self.strb_bits = self.data_bits // 8
        self.size = self.strb_bits.bit_length() - 1
        A, D, ID = self.addr_bits, self.data_bits, self.id_bits
        super().__init__({
            "awid": Out(ID), "awaddr": Out(A), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awlock": Out(1), "awcache": Out(4), "awprot": Out(3),
            "awvalid": Out(1), "awready": In(1),
            "wdata": Out(D), "wstrb": Out(D // 8), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1),
            "bid": In(ID), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(ID), "araddr": Out(A), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arlock": Out(1), "arcache": Out(4), "arprot": Out(3),
            "arvalid": Out(1), "arready": In(1),
            "rid": In(ID), "rdata": In(D), "rresp": In(2), "rlast": In(1), "rvalid": In(1),
            "rready": Out(1),
        })
