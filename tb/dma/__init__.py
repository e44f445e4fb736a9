# SPDX-License-Identifier: Apache-2.0
"""DMA engine testbenches (docs/dma.md §6)."""
