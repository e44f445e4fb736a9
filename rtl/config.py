# SPDX-License-Identifier: Apache-2.0
"""The one source of parameters: number formats, the core configuration and its presets.

This module imports nothing from Amaranth so that ``golden/``, ``bench/`` and ``synth/`` can use it
without the HDL. Every width, depth and format used by ``rtl``, ``golden``, ``tb``, ``synth`` and
``bench`` is read from a :class:`CoreConfig` (or derived from it here).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from typing import Optional

__all__ = [
    "FPFormat", "FORMATS", "FP32", "TF32", "BF16", "FP16", "FP8_E5M2", "FP8_E4M3", "FP8_E4M3FN",
    "FP4_E2M1", "E8M0", "cfp8_format", "CoreConfig", "check_config", "PRESETS", "get_preset",
    "preset_from_env", "parse_config", "AP_MAX_DIMS", "AP_STEP_BITS", "AP_NUM_BITS", "AP_OFFSET_BITS",
    "AP_PART_BITS", "LANE_BITS", "SPARSE_PATTERN_NAMES", "parse_sparse_pattern", "ACT_DEGREE",
    "ACT_BINADES", "ACT_MAP_BASE", "ACT_SEG_BASE", "ACT_SEG_STRIDE", "ACT_HEADER_WORDS",
    "LINK_VCS", "LINK_STREAM_BITS", "LINK_CHUNK_BITS", "LINK_CRC_BITS", "LINK_CRC_POLY",
    "LINK_FAULTS", "link_flit_fields",
]


def _check_int(owner, name, value, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner} field '{name}' must be an integer, not {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{owner} field '{name}' must be in {rng}, not {value!r}")


def _is_pow2(x):
    return x > 0 and (x & (x - 1)) == 0


def _check_pow2(owner, name, value, lo, hi):
    """:func:`_check_int`, then a power of two (``lo`` and ``hi`` are powers of two)."""
    _check_int(owner, name, value, lo, hi)
    if not _is_pow2(value):
        raise ValueError(f"{owner} field '{name}' must be a power of two in [{lo}, {hi}], "
                         f"not {value!r}")


@dataclass(frozen=True, kw_only=True)
class FPFormat:
    """A binary floating-point format and its conversion policy.

    Parameters
    ----------
    name : str
        Short identifier, e.g. ``"bf16"``.
    exp_bits, man_bits : int
        Exponent and explicit-mantissa widths. The code is ``1 + exp_bits + man_bits`` bits wide,
        sign in the MSB.
    bias : int
        Exponent bias. A normal code with biased exponent ``e`` has value
        ``(-1)**s * 2**(e - bias) * (1 + m / 2**man_bits)``; subnormals (``e == 0``) have
        ``2**(1 - bias) * (m / 2**man_bits)``.
    specials : str
        ``"ieee"``: the all-ones exponent encodes Inf (mantissa 0) and NaN (otherwise).
        ``"fn"``: no Inf; only ``S.1..1.1..1`` is NaN (OCP E4M3FN).
        ``"none"``: every code is finite (OCP E2M1).
    overflow : str
        Policy when a conversion from FP32 overflows: ``"inf"`` (IEEE: round to ±Inf; Inf stays
        Inf) or ``"saturate"`` (finite overflow *and* ±Inf become ±max finite).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    specials: str = "ieee"
    overflow: str = "inf"

    def __post_init__(self):
        _check_int("FPFormat", "exp_bits", self.exp_bits, 1, 8)
        _check_int("FPFormat", "man_bits", self.man_bits, 1, 23)
        _check_int("FPFormat", "bias", self.bias, -(1 << 8), 1 << 8)
        if self.specials not in ("ieee", "fn", "none"):
            raise ValueError(f"FPFormat field 'specials' must be one of 'ieee', 'fn', 'none', "
                             f"not {self.specials!r}")
        if self.overflow not in ("inf", "saturate"):
            raise ValueError(f"FPFormat field 'overflow' must be one of 'inf', 'saturate', "
                             f"not {self.overflow!r}")
        if self.specials != "ieee" and self.overflow == "inf":
            raise ValueError(f"FPFormat field 'overflow' must be 'saturate' for a format without "
                             f"Inf (specials={self.specials!r}), not {self.overflow!r}")

    # --- derived quantities -------------------------------------------------------------------
    @property
    def width(self):
        """Total code width in bits."""
        return 1 + self.exp_bits + self.man_bits

    @property
    def exp_max_code(self):
        """Largest biased exponent field value that encodes finite numbers."""
        top = (1 << self.exp_bits) - 1
        return top - 1 if self.specials == "ieee" else top

    @property
    def max_man_code(self):
        """Largest mantissa field of the largest finite value."""
        full = (1 << self.man_bits) - 1
        return full - 1 if self.specials == "fn" else full

    @property
    def emax(self):
        """Unbiased exponent of the largest finite value."""
        return self.exp_max_code - self.bias

    @property
    def emin(self):
        """Unbiased exponent of the smallest normal value."""
        return 1 - self.bias

    @property
    def max_finite(self):
        """Largest finite value, as a Python float."""
        return 2.0 ** self.emax * (1 + self.max_man_code / (1 << self.man_bits))

    @property
    def min_subnormal(self):
        """Smallest positive value, as a Python float."""
        return 2.0 ** (self.emin - self.man_bits)

    @property
    def max_finite_code(self):
        """Code of +max finite."""
        return (self.exp_max_code << self.man_bits) | self.max_man_code

    @property
    def inf_code(self):
        """Code of +Inf, or ``None`` when the format has no Inf."""
        return ((1 << self.exp_bits) - 1) << self.man_bits if self.specials == "ieee" else None

    @property
    def nan_code(self):
        """Canonical (quiet) NaN code with the sign bit clear, or ``None`` when there is none."""
        ones = (1 << self.exp_bits) - 1
        if self.specials == "ieee":
            return (ones << self.man_bits) | (1 << (self.man_bits - 1))
        if self.specials == "fn":
            return (ones << self.man_bits) | ((1 << self.man_bits) - 1)
        return None

    @property
    def is_fp32_subset(self):
        """True when every finite value of this format is exactly representable in FP32."""
        return (self.man_bits <= 23 and self.emax <= 127
                and self.emin - self.man_bits >= -149)


FP32 = FPFormat(name="fp32", exp_bits=8, man_bits=23, bias=127)
TF32 = FPFormat(name="tf32", exp_bits=8, man_bits=10, bias=127)
BF16 = FPFormat(name="bf16", exp_bits=8, man_bits=7, bias=127)
FP16 = FPFormat(name="fp16", exp_bits=5, man_bits=10, bias=15)
#: OCP / IEEE-style E5M2 (Inf and NaN), max 57344. Also the MXFP8-E5M2 element type.
FP8_E5M2 = FPFormat(name="fp8_e5m2", exp_bits=5, man_bits=2, bias=15)
#: Trainium-1/2 style E4M3 with IEEE specials: max finite 240.
FP8_E4M3 = FPFormat(name="fp8_e4m3", exp_bits=4, man_bits=3, bias=7)
#: OCP E4M3FN: no Inf, NaN = S.1111.111, max 448; saturating conversion (OCP "satfinite").
FP8_E4M3FN = FPFormat(name="fp8_e4m3fn", exp_bits=4, man_bits=3, bias=7, specials="fn",
                      overflow="saturate")
#: OCP E2M1 (MXFP4 element): no Inf, no NaN, max 6; saturating conversion.
FP4_E2M1 = FPFormat(name="fp4_e2m1", exp_bits=2, man_bits=1, bias=1, specials="none",
                    overflow="saturate")


@dataclass(frozen=True)
class _E8M0:
    """OCP E8M0 block-scale format: value ``2**(code - 127)``, code 0xFF is NaN, no sign/zero."""
    name: str = "e8m0"
    width: int = 8
    bias: int = 127
    nan_code: int = 0xFF


E8M0 = _E8M0()


def cfp8_format(exp_bits, bias):
    """The configurable FP8 (cFP8) format: IEEE-style specials, ``exp_bits`` in 3..5, any bias
    that keeps every value inside FP32's range."""
    _check_int("CoreConfig", "cfp8_exp_bits", exp_bits, 3, 5)
    fmt = FPFormat(name="cfp8", exp_bits=exp_bits, man_bits=7 - exp_bits, bias=bias)
    if not fmt.is_fp32_subset:
        lo = (1 << exp_bits) - 2 - 127
        hi = 150 - (7 - exp_bits)
        raise ValueError(f"CoreConfig field 'cfp8_bias' must be in [{lo}, {hi}] for "
                         f"{exp_bits} exponent bits, not {bias!r}")
    return fmt


#: Dense element formats a config may enable, by name ("cfp8" is built from the config).
DENSE_FORMAT_NAMES = ("fp32", "tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn",
                      "cfp8")
#: MX block formats: element format name of each.
MX_FORMAT_NAMES = {"mxfp8_e4m3": "fp8_e4m3fn", "mxfp8_e5m2": "fp8_e5m2", "mxfp4": "fp4_e2m1"}

#: Access-pattern field widths of the instruction encoding (docs/architecture.md §8.3): at most 4
#: free dimensions of {step int16 (elements), num uint16}; u32 byte offset; u8 start partition and
#: partition count. Fixed by the encoding, not knobs.
AP_MAX_DIMS = 4
AP_STEP_BITS = 16
AP_NUM_BITS = 16
AP_OFFSET_BITS = 32
AP_PART_BITS = 8

#: Bits of one partition's lane: an SBUF/PSUM row-port access moves one lane per partition (an
#: element is right-aligned in it, FP32 filling it), and a sparse matmul's moving beat packs the
#: ``m / n`` kept elements of a row into one. Fixed by the datapath, not a knob.
LANE_BITS = 32

#: Activation-table format of the Scalar engine (docs/scalar.md): polynomial degree per segment
#: (Horner steps, each one fused MAC) and binade-map entries per sign half. Fixed by the table
#: format, not knobs; the segment count is the field ``act_segments``.
ACT_DEGREE = 6
ACT_BINADES = 64
#: Word addresses of a table image (32-bit words): header words 0..8, the binade map at
#: ``ACT_MAP_BASE + half * ACT_BINADES + b``, segment ``s`` word ``j`` at
#: ``ACT_SEG_BASE + s * ACT_SEG_STRIDE + j`` (j = 0 centre, 1..7 c0..c6, 8 flags).
ACT_MAP_BASE = 0x80
ACT_SEG_BASE = 0x200
ACT_SEG_STRIDE = 16
#: Header words of a table image that ``act_table_load`` takes before the binade map (word 9:
#: the function id the table is for).
ACT_HEADER_WORDS = 10

#: Ring-link flit format (docs/collectives.md §2): virtual channels per link, the fixed header
#: fields' widths, and the CRC: CRC-32C (Castagnoli), reflected polynomial 0x82F63B78
#: (normal form 0x1EDC6F41), init and final XOR 0xFFFFFFFF. Fixed by the format, not knobs.
LINK_VCS = 2
LINK_STREAM_BITS = 4
LINK_CHUNK_BITS = 8
LINK_CRC_BITS = 32
LINK_CRC_POLY = 0x82F63B78
#: What a link port reports with E_LINK (its ``err_info``; docs/collectives.md §5).
LINK_FAULTS = {"crc": 1, "seq": 2, "overflow": 3, "credit_timeout": 4, "credit_overflow": 5,
               "silent": 6}


def link_flit_fields(cfg):
    """The flit's fields ``((name, width), ...)``, least significant first: the payload
    ``data`` (``link_bits``), the header ``src`` (``link_src_bits``), ``vc``, ``last``,
    ``stream``, ``chunk``, ``seq`` (``link_seq_bits``), zero ``pad`` to a whole byte, then
    ``crc``: CRC-32C over the little-endian bytes of every field below it."""
    f = [("data", cfg.link_bits), ("src", cfg.link_src_bits), ("vc", 1), ("last", 1),
         ("stream", LINK_STREAM_BITS), ("chunk", LINK_CHUNK_BITS), ("seq", cfg.link_seq_bits)]
    covered = sum(w for _, w in f)
    pad = -covered % 8
    return tuple(f + ([("pad", pad)] if pad else []) + [("crc", LINK_CRC_BITS)])


#: N:M structured-sparsity patterns a config may enable (the Trainium2 set, architecture §6.6):
#: n kept weights in every group of m consecutive K elements.
SPARSE_PATTERN_NAMES = ("4:16", "4:12", "4:8", "2:8", "2:4", "1:4", "1:2")


def parse_sparse_pattern(name):
    """``(n, m)`` of a pattern name such as ``"4:16"``; ``ValueError`` unless it is one of
    :data:`SPARSE_PATTERN_NAMES`."""
    if name not in SPARSE_PATTERN_NAMES:
        raise ValueError(f"sparse pattern must be one of {SPARSE_PATTERN_NAMES}, not {name!r}")
    n, m = name.split(":")
    return int(n), int(m)


FORMATS = {f.name: f for f in (FP32, TF32, BF16, FP16, FP8_E5M2, FP8_E4M3, FP8_E4M3FN,
                               FP4_E2M1)}


@dataclass(frozen=True, kw_only=True)
class CoreConfig:
    """Every parameter of the NeuronCore, for RTL, golden model, testbenches, synthesis, benches.

    Derived values are properties. Invalid values raise :class:`ValueError` (or
    :class:`TypeError`) naming the field and its allowed range.

    Parameters
    ----------
    name : str
        Preset name; used for build directories.
    partitions : int
        SBUF/PSUM partition count (128 on Trainium). Power of two, 2..128.
    pe_rows, pe_cols : int
        Systolic array size: rows = contraction (K, partition) axis, cols = output (M) axis.
        ``pe_rows`` must equal ``partitions``; ``pe_cols`` is a power of two <= partitions.
    psum_banks : int
        PSUM banks (accumulation groups in flight), 1..16.
    psum_bank_fp32 : int
        FP32 entries per partition per PSUM bank = max N of one matmul (512 on Trainium).
    sbuf_bytes_per_partition : int
        SBUF capacity per partition in bytes (192 KiB on Trainium-1).
    formats : tuple of str
        Dense input formats the tensor engine supports (subset of ``DENSE_FORMAT_NAMES``).
    mx_formats : tuple of str
        MX formats supported by ``matmul_mx`` (subset of ``MX_FORMAT_NAMES``); empty disables MX.
    mx_block : int
        Elements per MX scale block (OCP: 32).
    cfp8_exp_bits, cfp8_bias : int
        The configurable FP8 format: exponent width 3..5 (mantissa = 7 - exp_bits) and bias.
    sr_seed : int
        Reset seed of the stochastic-rounding PRNG (XORWOW), 1..2**32-1.
    mul_stages, add_stages : int
        Pipeline registers in the FP multiplier (0..4) and in the FP32 adder (0..6; 5 cuts
        the fused adder between its leading-zero count and its normalizing shift, 6 also
        between its exponent difference and its alignment shift) (latency in cycles).
    fp32_passes : int
        Array passes of an FP32 moving column: 1 = native (an exact 24 x 24 multiplier in every
        PE, FP32 at the BF16 rate) or 4 = split (a 12 x 12 multiplier per PE forms the four
        partial products of the hi/lo operand halves exactly over 4 cycles and the fused adder
        rounds their exact sum once: FP32 at 1/4 rate, bit-identical results; TF32 and every
        narrower format stay at one pass). Trainium runs FP32 at 1/4 rate.
    packed_modes : bool
        The packed tensor modes (issue 13): double-rate FP8 (two FP8 elements per PE step,
        :attr:`fp8_pack`) and x4 MX (four, :attr:`mx_pack`), where the config can run them.
        They add a dot unit to every PE (docs/tensor-engine.md, "Packed modes"); False leaves
        the PE without it (one element per PE step for every format).
    ap_dims : int
        Free dimensions an access-pattern unit walks, 1..4 (``AP_MAX_DIMS``, the encoding's 4
        slots; fewer saves counters, and a descriptor using more is rejected with E_AP_FORM).
    sbuf_banks : int
        SBUF banks per partition, selected by the top address bits (architecture §4.1), a power
        of two in 1..16; each bank holds at least 16 words.
    axi_data_bits : int
        Data width of the DMA's AXI4 master, a power of two in 32..1024. The SBUF word (what one
        partition stores per bank row, ``sbuf_word_bytes``) is as wide, so one AXI beat is one
        SBUF word write.
    axi_addr_bits : int
        AXI4 address width, 32..64.
    dma_queues : int
        Descriptor queues per DMA engine (one AXI ID each), 1..16.
    dma_outstanding : int
        AXI transactions in flight per DMA engine and direction, 1..32.
    dma_element_ops : bool
        Whether each DMA engine has the element path (ops add/max/min into the destination and
        casts through FP32, docs/dma.md §4.2); False: such descriptors are E_DESC and the
        engine only moves bytes.
    semaphores : int
        Semaphores in the semaphore file, a power of two in 1..256.
    semaphore_bits : int
        Width of a semaphore, 8..32.
    fetch_depth : int
        Instructions each sequencer prefetches from its DRAM queue, 1..16 (architecture §8.1).
    issue_depth : int
        Instructions a sequencer has issued to its engine and not yet seen complete, 1..16;
        completions (semaphore posts) stay in order.
    watchdog_reset : int
        Reset value of the ``WATCHDOG`` register: the longest wait, in cycles, on a semaphore
        or an AXI response before ``E_TIMEOUT``; 0..2**32-1, 0 = off (architecture §11.3).
    sparse_patterns : tuple of str or None
        N:M structured-sparsity patterns the tensor engine runs (subset of
        ``SPARSE_PATTERN_NAMES``, no repeats; ``()`` = no sparsity hardware at all). Each
        ``n:m`` needs ``partitions % n == 0`` (a group of n kept weights fills n whole PE rows)
        and an enabled dense format of at most ``32 * n / m`` bits (the m/n elements a row meets
        per beat share one 32-bit moving lane; docs/tensor-engine.md, "Structured sparsity").
        ``None`` (the default) enables every pattern of ``SPARSE_PATTERN_NAMES`` that meets
        both rules, 4:16 first; :attr:`sparsity` is the resolved tuple.
    act_segments : int
        Segments of the Scalar engine's loadable activation table (a power of two in
        [16, 4096]); each segment is a centre, ``ACT_DEGREE + 1`` FP32 coefficients and 3 flags
        per lane (docs/scalar.md). 512 holds every built-in function's table.
    ring_size : int
        Cores on the collective ring: 1 (a core alone, no links), 2, 4 or 8.
    link_bits : int
        Payload bits of one ring-link flit (one flit per cycle per link), a power of two in
        [32, 512] (docs/collectives.md).
    link_credits : int
        Receive-buffer flits per virtual channel of a link, 2..256; the link runs at one flit
        per cycle when ``link_credits >= 2 * link_latency + 4`` (the credit round trip).
    link_latency : int
        Cycles of the wire between two cores (the delay line), 4..256.
    """

    name: str = "custom"
    partitions: int = 16
    pe_rows: int = 16
    pe_cols: int = 16
    psum_banks: int = 8
    psum_bank_fp32: int = 512
    sbuf_bytes_per_partition: int = 16 * 1024
    formats: tuple = DENSE_FORMAT_NAMES
    mx_formats: tuple = tuple(MX_FORMAT_NAMES)
    mx_block: int = 32
    cfp8_exp_bits: int = 3
    cfp8_bias: int = 3
    sr_seed: int = 0x2545F491
    mul_stages: int = 1
    add_stages: int = 2
    fp32_passes: int = 4
    packed_modes: bool = True
    ap_dims: int = AP_MAX_DIMS
    sbuf_banks: int = 4
    axi_data_bits: int = 128
    axi_addr_bits: int = 64
    dma_queues: int = 4
    dma_outstanding: int = 8
    dma_element_ops: bool = True
    semaphores: int = 256
    semaphore_bits: int = 32
    fetch_depth: int = 4
    issue_depth: int = 4
    watchdog_reset: int = 1 << 24
    sparse_patterns: Optional[tuple] = None
    act_segments: int = 512
    ring_size: int = 4
    link_bits: int = 128
    link_credits: int = 32
    link_latency: int = 8

    def __post_init__(self):
        c = "CoreConfig"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"{c} field 'name' must be an identifier string, not {self.name!r}")
        _check_pow2(c, "partitions", self.partitions, 2, 128)
        _check_int(c, "pe_rows", self.pe_rows, self.partitions, self.partitions)
        _check_int(c, "pe_cols", self.pe_cols, 1, self.partitions)
        if not _is_pow2(self.pe_cols):
            raise ValueError(f"{c} field 'pe_cols' must be a power of two in "
                             f"[1, {self.partitions}], not {self.pe_cols!r}")
        _check_int(c, "psum_banks", self.psum_banks, 1, 16)
        _check_pow2(c, "psum_bank_fp32", self.psum_bank_fp32, 1, 4096)
        _check_int(c, "sbuf_bytes_per_partition", self.sbuf_bytes_per_partition, 64, 1 << 20)
        if not _is_pow2(self.sbuf_bytes_per_partition):
            raise ValueError(f"{c} field 'sbuf_bytes_per_partition' must be a power of two in "
                             f"[64, {1 << 20}], not {self.sbuf_bytes_per_partition!r}")
        if not isinstance(self.formats, tuple) or not self.formats:
            raise TypeError(f"{c} field 'formats' must be a non-empty tuple, not {self.formats!r}")
        for f in self.formats:
            if f not in DENSE_FORMAT_NAMES:
                raise ValueError(f"{c} field 'formats' entries must be in {DENSE_FORMAT_NAMES}, "
                                 f"not {f!r}")
        if len(set(self.formats)) != len(self.formats):
            raise ValueError(f"{c} field 'formats' must not repeat a format, not {self.formats!r}")
        if not isinstance(self.mx_formats, tuple):
            raise TypeError(f"{c} field 'mx_formats' must be a tuple, not {self.mx_formats!r}")
        for f in self.mx_formats:
            if f not in MX_FORMAT_NAMES:
                raise ValueError(f"{c} field 'mx_formats' entries must be in "
                                 f"{tuple(MX_FORMAT_NAMES)}, not {f!r}")
        _check_pow2(c, "mx_block", self.mx_block, 2, 256)
        cfp8_format(self.cfp8_exp_bits, self.cfp8_bias)   # validates both fields
        _check_int(c, "sr_seed", self.sr_seed, 1, (1 << 32) - 1)
        _check_int(c, "mul_stages", self.mul_stages, 0, 4)
        _check_int(c, "add_stages", self.add_stages, 0, 6)
        _check_int(c, "fp32_passes", self.fp32_passes, 1, 4)
        if self.fp32_passes not in (1, 4):
            raise ValueError(f"{c} field 'fp32_passes' must be 1 or 4, not {self.fp32_passes!r}")
        _check_int(c, "ap_dims", self.ap_dims, 1, AP_MAX_DIMS)
        _check_pow2(c, "axi_data_bits", self.axi_data_bits, 32, 1024)
        _check_int(c, "sbuf_banks", self.sbuf_banks, 1, 16)
        max_banks = max(1, min(16, self.sbuf_bytes_per_partition // (16 * self.sbuf_word_bytes)))
        if not _is_pow2(self.sbuf_banks) or self.sbuf_banks > max_banks:
            raise ValueError(f"{c} field 'sbuf_banks' must be a power of two in [1, {max_banks}] "
                             f"(banks of at least 16 words of {self.sbuf_word_bytes} bytes), "
                             f"not {self.sbuf_banks!r}")
        _check_int(c, "axi_addr_bits", self.axi_addr_bits, 32, 64)
        _check_int(c, "dma_queues", self.dma_queues, 1, 16)
        _check_int(c, "dma_outstanding", self.dma_outstanding, 1, 32)
        if not isinstance(self.dma_element_ops, bool):
            raise TypeError(f"{c} field 'dma_element_ops' must be a bool, "
                            f"not {self.dma_element_ops!r}")
        _check_pow2(c, "semaphores", self.semaphores, 1, 256)
        _check_int(c, "semaphore_bits", self.semaphore_bits, 8, 32)
        _check_int(c, "fetch_depth", self.fetch_depth, 1, 16)
        _check_int(c, "issue_depth", self.issue_depth, 1, 16)
        _check_int(c, "watchdog_reset", self.watchdog_reset, 0, (1 << 32) - 1)
        if not isinstance(self.packed_modes, bool):
            raise TypeError(f"{c} field 'packed_modes' must be a bool, "
                            f"not {self.packed_modes!r}")
        _check_pow2(c, "act_segments", self.act_segments, 16, 4096)
        _check_pow2(c, "ring_size", self.ring_size, 1, 8)
        _check_pow2(c, "link_bits", self.link_bits, 32, 512)
        _check_int(c, "link_credits", self.link_credits, 2, 256)
        _check_int(c, "link_latency", self.link_latency, 4, 256)
        if self.sparse_patterns is not None:
            if not isinstance(self.sparse_patterns, tuple):
                raise TypeError(f"{c} field 'sparse_patterns' must be a tuple or None, "
                                f"not {self.sparse_patterns!r}")
            for p in self.sparse_patterns:
                if p not in SPARSE_PATTERN_NAMES:
                    raise ValueError(f"{c} field 'sparse_patterns' entries must be in "
                                     f"{SPARSE_PATTERN_NAMES}, not {p!r}")
                why = self._sparse_misfit(p)
                if why:
                    raise ValueError(f"{c} field 'sparse_patterns' entry {p!r} needs {why}")
            if len(set(self.sparse_patterns)) != len(self.sparse_patterns):
                raise ValueError(f"{c} field 'sparse_patterns' must not repeat a pattern, "
                                 f"not {self.sparse_patterns!r}")

    def _sparse_misfit(self, pattern):
        """Why ``pattern`` cannot run on this config (text), or ``""``."""
        n, m = parse_sparse_pattern(pattern)
        if self.partitions % n:
            return f"partitions % {n} == 0, not partitions={self.partitions}"
        wmax = 32 * n // m
        if not any(self.fmt(f).width <= wmax for f in self.formats):
            return (f"an enabled format of at most {wmax} bits in 'formats', not "
                    f"{self.formats!r}")
        return ""

    # --- derived ------------------------------------------------------------------------------
    @property
    def cfp8(self):
        """The configurable FP8 format of this config."""
        return cfp8_format(self.cfp8_exp_bits, self.cfp8_bias)

    def fmt(self, name):
        """The :class:`FPFormat` called ``name`` (``"cfp8"`` resolves to this config's)."""
        if name == "cfp8":
            return self.cfp8
        try:
            return FORMATS[name]
        except KeyError:
            raise ValueError(f"format must be one of {sorted(FORMATS) + ['cfp8']}, "
                             f"not {name!r}") from None

    @property
    def sparsity(self):
        """The enabled N:M patterns (names, config order): ``sparse_patterns``, or with
        ``None`` every pattern of ``SPARSE_PATTERN_NAMES`` this config can run."""
        if self.sparse_patterns is not None:
            return self.sparse_patterns
        return tuple(p for p in SPARSE_PATTERN_NAMES if not self._sparse_misfit(p))

    @property
    def dense_formats(self):
        """Enabled dense formats, as :class:`FPFormat` objects in config order."""
        return tuple(self.fmt(n) for n in self.formats)

    @property
    def fp8_formats(self):
        """Every enabled 8-bit dense format."""
        return tuple(f for f in self.dense_formats if f.width == 8)

    @property
    def mx_element_formats(self):
        """Element formats of the enabled MX formats, by MX format name."""
        return {n: FORMATS[MX_FORMAT_NAMES[n]] for n in self.mx_formats}

    @property
    def fp8_pack(self):
        """FP8 elements per PE step of a double-rate FP8 matmul (issue 13): 2 when
        ``packed_modes``, an FP8 format is enabled and a lane (the widest PE format) holds two
        8-bit codes, else 0."""
        widest = max(f.width for f in (*self.dense_formats, *self.mx_element_formats.values()))
        return 2 if self.packed_modes and self.fp8_formats and widest >= 16 else 0

    @property
    def mx_pack(self):
        """MX elements per PE step of an x4 MX matmul (issue 13): 4 when ``packed_modes``, MX
        is enabled, a lane holds four 8-bit codes and ``mx_block`` is a multiple of 4 (the four
        elements of a step share one scale), else 0."""
        widest = max(f.width for f in (*self.dense_formats, *self.mx_element_formats.values()))
        return 4 if (self.packed_modes and self.mx_formats and widest >= 32
                     and self.mx_block % 4 == 0) else 0

    @property
    def link_src_bits(self):
        """Width of a flit's source rank: ``max(1, ceil(log2(ring_size)))``."""
        return max(1, (self.ring_size - 1).bit_length())

    @property
    def link_seq_bits(self):
        """Width of a flit's sequence number: ``bit_length(link_credits) + 1``, so that
        ``2**link_seq_bits > 2 * link_credits`` (no drop a link can survive aliases)."""
        return self.link_credits.bit_length() + 1

    @property
    def link_flit_bits(self):
        """Bits of a whole flit on the wire: payload, header, pad and CRC."""
        return sum(w for _, w in link_flit_fields(self))

    @property
    def psum_bank_bytes(self):
        return 4 * self.psum_bank_fp32

    @property
    def psum_bytes_per_partition(self):
        """PSUM bytes per partition: ``psum_banks`` banks of ``psum_bank_bytes``."""
        return self.psum_banks * self.psum_bank_bytes

    @property
    def ap_addr_bits(self):
        """Width of a byte address inside one partition of SBUF or PSUM (the wider of the
        two): what an access-pattern unit issues."""
        return max(self.sbuf_bytes_per_partition, self.psum_bytes_per_partition).bit_length() - 1

    @property
    def sbuf_word_bytes(self):
        """Bytes of one SBUF word per partition (one AXI beat): ``max(4, axi_data_bits / 8)``."""
        return max(4, self.axi_data_bits // 8)

    @property
    def sbuf_bank_bytes(self):
        """Bytes of one SBUF bank per partition."""
        return self.sbuf_bytes_per_partition // self.sbuf_banks

    @property
    def dma_engines(self):
        """DMA engines: ``max(1, partitions / 8)`` (16 per 128 partitions, architecture §9)."""
        return max(1, self.partitions // 8)

    @property
    def sbuf_bits(self):
        return 8 * self.sbuf_bytes_per_partition * self.partitions

    @property
    def psum_bits(self):
        return 32 * self.psum_bank_fp32 * self.psum_banks * self.partitions

    @property
    def macs(self):
        return self.pe_rows * self.pe_cols

    def replace(self, **changes):
        """A copy with ``changes`` applied (validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["derived"] = {"macs": self.macs, "psum_bank_bytes": self.psum_bank_bytes,
                        "sbuf_bits": self.sbuf_bits, "psum_bits": self.psum_bits,
                        "psum_bytes_per_partition": self.psum_bytes_per_partition,
                        "ap_addr_bits": self.ap_addr_bits,
                        "sbuf_word_bytes": self.sbuf_word_bytes,
                        "sbuf_bank_bytes": self.sbuf_bank_bytes,
                        "dma_engines": self.dma_engines,
                        "sparsity": list(self.sparsity)}
        return d


def check_config(cfg, owner):
    """``cfg`` itself; ``TypeError`` naming ``owner`` unless it is a :class:`CoreConfig`.

    The one check every block's constructor (and its ``Signature``) runs on its config.
    """
    if not isinstance(cfg, CoreConfig):
        raise TypeError(f"{owner} cfg must be a CoreConfig, not {cfg!r}")
    return cfg


DEFAULT = CoreConfig(name="default")
#: Fast tests: 4 partitions, 4x4 array, small PSUM banks, 32-bit links at the shortest latency.
SMALL = DEFAULT.replace(name="small", partitions=4, pe_rows=4, pe_cols=4, psum_banks=4,
                        psum_bank_fp32=64, sbuf_bytes_per_partition=4096, axi_data_bits=64,
                        semaphores=16, ring_size=2, link_bits=32, link_credits=12,
                        link_latency=4)
#: Trainium scale: 128 partitions, 128x128 array, 8 x 2 KiB PSUM banks, 192 KiB SBUF/partition
#: (rounded to the power of two 256 KiB, the NeuronCore-v4 figure).
TRAINIUM = DEFAULT.replace(name="trainium", partitions=128, pe_rows=128, pe_cols=128,
                           psum_banks=8, psum_bank_fp32=512,
                           sbuf_bytes_per_partition=256 * 1024)
#: Format-restricted variants used by the synthesis sweep.
BF16_ONLY = DEFAULT.replace(name="bf16_only", formats=("bf16",), mx_formats=())
FP8_ONLY = DEFAULT.replace(name="fp8_only", formats=("fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn",
                                                     "cfp8"), mx_formats=())

PRESETS = {c.name: c for c in (SMALL, DEFAULT, TRAINIUM, BF16_ONLY, FP8_ONLY)}


def get_preset(name):
    """The preset called ``name``; ``ValueError`` naming the allowed presets otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"CONFIG must be one of {sorted(PRESETS)}, not {name!r}") from None


#: Longest config name spelled out from its overrides; longer ones use a hash
#: (``<preset>__<8 hex digits>``).
CONFIG_NAME_MAX = 48


def _override_value(field, text):
    """The Python value of ``field=text`` in a ``CONFIG`` string: an integer (``int(text, 0)``),
    ``true``/``false``, ``none``, a tuple for a tuple-valued field (items joined by ``+``, empty
    for ``()``), else the text itself (``CoreConfig`` rejects it with its usual message)."""
    t = text.strip()
    default = next(f.default for f in dataclasses.fields(CoreConfig) if f.name == field)
    if field == "sparse_patterns" or isinstance(default, tuple):
        if t.lower() == "none" and field == "sparse_patterns":
            return None
        return tuple(x.strip() for x in t.split("+") if x.strip())
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if t.lower() == "none":
        return None
    try:
        return int(t, 0)
    except ValueError:
        return t


def _config_name(preset, overrides):
    """Stable name of ``preset`` with ``overrides`` (a dict of the fields that differ from it):
    ``preset`` alone, ``<preset>__<field>_<value>...`` (fields sorted) when that spells an
    identifier of at most :data:`CONFIG_NAME_MAX` characters, else ``<preset>__<hash>``."""
    if not overrides:
        return preset
    def spell(v):
        if isinstance(v, tuple):
            return "_".join(str(x) for x in v) or "none"
        return str(v).lower() if isinstance(v, bool) or v is None else str(v)
    items = sorted(overrides.items())
    name = preset + "".join(f"__{k}_{spell(v)}" for k, v in items)
    if name.isidentifier() and len(name) <= CONFIG_NAME_MAX:
        return name
    canon = preset + ":" + ",".join(f"{k}={v!r}" for k, v in items)
    return f"{preset}__{hashlib.sha256(canon.encode()).hexdigest()[:8]}"


def _apply_overrides(preset, overrides, source):
    """``preset`` (a name) with ``overrides`` ({field: value}) applied, validated and named."""
    base = get_preset(preset)
    fields = [f.name for f in dataclasses.fields(CoreConfig) if f.name != "name"]
    for k in overrides:
        if k not in fields:
            raise ValueError(f"CONFIG {source!r}: CoreConfig has no field {k!r}; fields: "
                             f"{', '.join(fields)}")
    overrides = dict(overrides)
    # pe_rows must equal partitions: one given alone sets the other
    for a, b in (("pe_rows", "partitions"), ("partitions", "pe_rows")):
        if a in overrides and b not in overrides:
            overrides[b] = overrides[a]
    changed = {k: v for k, v in overrides.items() if getattr(base, k) != v}
    if not changed:
        return base
    cfg = base.replace(**changed)     # CoreConfig validates every field
    return cfg.replace(name=_config_name(preset, changed))


def parse_config(text):
    """The :class:`CoreConfig` a ``CONFIG`` value names.

    ``text`` is one of

    * a preset name: ``"default"``;
    * a preset with overrides: ``"default:pe_rows=8,pe_cols=8"`` (``field=value`` pairs,
      comma-separated; integers, ``true``/``false``, ``none``, tuple items joined by ``+``,
      e.g. ``formats=bf16+fp8_e4m3``, ``mx_formats=`` for none; ``pe_rows`` given without
      ``partitions``, or the other way round, sets both, since they must be equal);
    * a TOML file (a path ending in ``.toml``) or TOML text: a ``preset = "<name>"`` key (default
      ``"default"``) plus fields (lists for tuple fields).

    The result is validated by :class:`CoreConfig` (its usual ``ValueError``/``TypeError``; an
    unknown field raises ``ValueError`` naming it and listing the fields) and named stably from
    the preset and the fields that differ from it (:func:`_config_name`): ``default``,
    ``default__pe_cols_8__pe_rows_8``, or ``<preset>__<hash>``, the same for the string and
    the TOML spelling of one config. The name is what build directories and reports use.
    """
    if not isinstance(text, str):
        raise TypeError(f"CONFIG must be a string, not {text!r}")
    src = text.strip()
    if src.endswith(".toml") and "\n" not in src:
        try:
            with open(src, "rb") as f:
                raw = f.read().decode()
        except OSError as e:
            raise ValueError(f"CONFIG {src!r}: cannot read the TOML file ({e.strerror})") from None
        return _parse_toml(raw, src)
    if "\n" in src or "=" in src.split(":", 1)[0]:
        return _parse_toml(src, "<toml>")
    preset, _, rest = src.partition(":")
    overrides = {}
    for item in (x for x in rest.split(",") if x.strip()):
        k, eq, v = item.partition("=")
        k = k.strip()
        if not eq:
            raise ValueError(f"CONFIG {src!r}: override {item.strip()!r} must be field=value")
        if k not in {f.name for f in dataclasses.fields(CoreConfig)} or k == "name":
            _apply_overrides(preset.strip(), {k: None}, src)    # raises naming the fields
        if k in overrides:
            raise ValueError(f"CONFIG {src!r}: field {k!r} is given twice")
        overrides[k] = _override_value(k, v)
    return _apply_overrides(preset.strip(), overrides, src)


def _parse_toml(raw, source):
    import tomllib
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"CONFIG {source!r}: not valid TOML ({e})") from None
    preset = data.pop("preset", "default")
    if not isinstance(preset, str):
        raise TypeError(f"CONFIG {source!r}: 'preset' must be a string, not {preset!r}")
    over = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return _apply_overrides(preset, over, source)


def preset_from_env(default="default"):
    """The config named by the ``CONFIG`` environment variable (the Makefile's ``CONFIG=``):
    a preset, a preset with overrides or a TOML file (:func:`parse_config`)."""
    return parse_config(os.environ.get("CONFIG", default) or default)
