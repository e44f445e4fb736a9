# SPDX-License-Identifier: Apache-2.0
"""The DMA engine (docs/dma.md): ``axi.py`` the AXI4 manager signature, ``descriptor.py`` the
64-byte descriptor layout and its closed-form check, ``walker.py`` the burst/segment walker,
``engine.py`` one DMA engine (queues, AXI4 master, SBUF partition port)."""
