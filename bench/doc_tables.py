# SPDX-License-Identifier: Apache-2.0
"""Tables of the documentation generated from the code and the benchmarks' results.

Each table sits between ``<!-- <name>:begin ... -->`` and ``<!-- <name>:end -->`` marker comments
in its Markdown file; ``python -m bench.doc_tables`` (``make docs``) rewrites them, ``--check``
only compares (``tests/test_doc_tables.py`` runs the comparison). Only descriptive words
(references, remarks, formulas as text) are written here; every number comes from
:mod:`rtl.config`, :mod:`rtl.isa`, :mod:`golden.activation` or ``build/bench/*.json``.

- ``formats-table`` in ``docs/number-formats.md``: every :class:`~rtl.config.FPFormat`, cfp8
  and E8M0 with their derived figures;
- ``presets-table`` in ``docs/architecture.md``: key parameters of the presets;
- ``cycles-table`` in ``docs/architecture.md``: the §6.8 cycle formulas for the presets;
- ``params-table`` in ``README.md``: the ``CoreConfig`` fields of the presets;
- ``isa-header``, ``isa-ap``, ``isa-dtypes``, ``isa-opcodes`` in ``docs/isa.md``: the
  instruction encoding of :mod:`rtl.isa`;
- ``act-table-sizes`` in ``docs/scalar.md``: segments and words of every activation table;
- ``figures-table`` in ``README.md``: the benchmarks' headline metrics from the JSON records
  ``make bench`` writes (``build/bench/<name>.json``), each with its preset, command and commit.
  A metric without a record is shown as "not measured". With no record at all the table is
  left as it is (a fresh clone keeps the committed figures); :func:`parse_figures_table` reads
  it back into records, so that a table edited by hand is found without them.
"""

import argparse
import json
import re
import sys
from fractions import Fraction
from pathlib import Path

from rtl.config import DENSE_FORMAT_NAMES, E8M0, FORMATS, PRESETS, cfp8_format

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "python -m bench.doc_tables"
#: Where ``make bench`` writes its JSON records.
BENCH_DIR = ROOT / "build" / "bench"
#: Presets shown as columns of the preset tables.
COLUMNS = ("small", "default", "trainium")


# --- number formatting ----------------------------------------------------------------------

def _group(n):
    """``16384`` -> ``"16 384"`` (the docs' thousands separator), below 10 000 ungrouped."""
    return f"{n:,}".replace(",", " ") if abs(n) >= 10_000 else str(n)


def _bytes(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def _log2_exact(n):
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def pow2_text(v):
    """A power of two ``v`` (a :class:`Fraction`) as ``2^k``."""
    num, den = v.numerator, v.denominator
    if num == 1:
        return f"2^-{_log2_exact(den)}" if den > 1 else "2^0"
    if den == 1:
        return f"2^{_log2_exact(num)}"
    raise ValueError(f"{v} is not a power of two")


def _value(v):
    """A finite value: exactly when below 10^6 with at most six digits, otherwise to three
    significant digits."""
    if v < 10**6:
        short = f"{float(v):.6g}"
        if Fraction(short) == v:
            return short
    return f"{float(v):.2e}".replace("e+", "e").replace("e-0", "e-").replace("e0", "e")


# --- formats-table --------------------------------------------------------------------------

#: Name as shown, reference implementation the golden model is checked against.
_FORMAT_DOC = {
    "fp32": ("`fp32`", "numpy float32"),
    "tf32": ("`tf32`", "— (checked via fp32 masks)"),
    "bf16": ("`bf16`", "ml_dtypes.bfloat16"),
    "fp16": ("`fp16`", "numpy float16"),
    "fp8_e5m2": ("`fp8_e5m2`", "ml_dtypes.float8_e5m2"),
    "fp8_e4m3": ("`fp8_e4m3` (Trainium-1/2 style)", "ml_dtypes.float8_e4m3"),
    "fp8_e4m3fn": ("`fp8_e4m3fn` (OCP)", "ml_dtypes.float8_e4m3fn"),
    "cfp8": ("`cfp8` (configurable)",
             "ml_dtypes.float8_e3m4 / e4m3 / e5m2 at their standard bias, scaled by "
             "2^(std_bias − bias)"),
    "fp4_e2m1": ("`fp4_e2m1` (MXFP4 element)", "ml_dtypes.float4_e2m1fn"),
    "e8m0": ("`e8m0` (MX scale)", "ml_dtypes.float8_e8m0fnu"),
}
#: Formats the contract marks as our choice ([I]) for their overflow policy.
_OWN_OVERFLOW_CHOICE = {"fp8_e4m3fn"}


def _specials(fmt):
    if fmt.specials == "ieee":
        return "IEEE Inf/NaN"
    if fmt.specials == "fn":
        ones = "1" * fmt.exp_bits + "." + "1" * fmt.man_bits
        return f"no Inf; NaN = S.{ones}"
    return "none"


def _overflow(fmt):
    if fmt.overflow == "inf":
        return "Inf"
    return "**saturate**" + (" [I]" if fmt.name in _OWN_OVERFLOW_CHOICE else "")


def figures(fmt):
    """``(max finite, min normal, min subnormal)`` of ``fmt`` as exact fractions."""
    m = fmt.man_bits
    max_finite = Fraction(2) ** fmt.emax * (1 + Fraction(fmt.max_man_code, 1 << m))
    min_normal = Fraction(2) ** fmt.emin
    min_sub = Fraction(2) ** (fmt.emin - m)
    assert float(max_finite) == fmt.max_finite and float(min_sub) == fmt.min_subnormal
    return max_finite, min_normal, min_sub


def _format_row(fmt, shown=None, layout=None, bias=None):
    name, ref = _FORMAT_DOC[shown or fmt.name]
    mx, mn, ms = figures(fmt)
    return [name, layout or f"1.{fmt.exp_bits}.{fmt.man_bits}", str(fmt.width),
            bias or str(fmt.bias), _specials(fmt), _value(mx), pow2_text(mn), pow2_text(ms),
            _overflow(fmt), ref]


def _cfp8_exp_bits():
    """Exponent widths the config accepts for cfp8 (each tried at its IEEE-style bias)."""
    out = []
    for e in range(1, 9):
        try:
            cfp8_format(e, (1 << (e - 1)) - 1)
        except ValueError:
            continue
        out.append(e)
    return out


def formats_table(cfg=None):
    """The format table of docs/number-formats.md §1; cfp8 figures are those of ``cfg``
    (default: the ``default`` preset)."""
    cfg = cfg or PRESETS["default"]
    head = ["name", "layout (S.E.M)", "bits", "bias", "specials", "max finite", "min normal",
            "min subnormal", "overflow on convert", "reference"]
    rows = [_format_row(FORMATS[n]) for n in DENSE_FORMAT_NAMES if n != "cfp8"]
    c = cfg.cfp8
    exps = _cfp8_exp_bits()
    rows.append(_format_row(
        c, shown="cfp8",
        layout=(f"1.e.(7−e), e = `cfp8_exp_bits` ∈ {{{','.join(map(str, exps))}}}; "
                f"`{cfg.name}`: 1.{c.exp_bits}.{c.man_bits}"),
        bias=f"`cfp8_bias` (`{cfg.name}`: {c.bias})"))
    rows[-1][5:8] = [f"{x} (`{cfg.name}`)" for x in rows[-1][5:8]]
    rows.append(_format_row(FORMATS["fp4_e2m1"]))
    e8 = E8M0
    rows.append([_FORMAT_DOC["e8m0"][0], "0.8.0", str(e8.width), str(e8.bias),
                 f"0x{e8.nan_code:02X} = NaN", pow2_text(Fraction(2) ** (e8.nan_code - 1 - e8.bias)),
                 pow2_text(Fraction(2) ** -e8.bias), "—", "—", _FORMAT_DOC["e8m0"][1]])
    return _markdown(head, rows)


# --- presets-table (docs/architecture.md §1) ------------------------------------------------

def pe_significand_width(cfg):
    """Significand bits (implicit bit included) of one PE multiplier operand: the widest of the
    enabled formats, or 12 with ``fp32_passes = 4`` (FP32 split into 12-bit halves, §6.4)."""
    fmts = list(cfg.dense_formats) + list(cfg.mx_element_formats.values())
    w = max(1 + f.man_bits for f in fmts)
    return min(w, 12) if cfg.fp32_passes == 4 else w


def _frac(x):
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _preset_rows():
    """``(parameter, formula, function of a config)`` rows of the architecture preset table."""
    mx_block = {PRESETS[n].mx_block for n in COLUMNS}
    mxb = f" ({mx_block.pop()})" if len(mx_block) == 1 else ""
    return [
        ("partitions P", "`partitions`", lambda c: str(c.partitions)),
        ("PE array R × C (K × M)", "`pe_rows × pe_cols`", lambda c: f"{c.pe_rows} × {c.pe_cols}"),
        ("MACs per cycle", "`macs`", lambda c: _group(c.macs)),
        ("FLOP per cycle (dense)", "2 · `macs`", lambda c: _group(2 * c.macs)),
        ("SBUF per partition", "`sbuf_bytes_per_partition`",
         lambda c: _bytes(c.sbuf_bytes_per_partition)),
        ("SBUF total", "`sbuf_bits / 8`", lambda c: _bytes(c.sbuf_bits // 8)),
        ("SBUF byte-address bits", "log2(bytes/partition)",
         lambda c: str(_log2_exact(c.sbuf_bytes_per_partition))),
        ("SBUF banks × bank size [invented]", "`sbuf_banks` × `sbuf_bank_bytes`",
         lambda c: f"{c.sbuf_banks} × {_bytes(c.sbuf_bank_bytes)}"),
        ("PSUM banks × FP32 entries", "`psum_banks × psum_bank_fp32`",
         lambda c: f"{c.psum_banks} × {c.psum_bank_fp32}"),
        ("PSUM bank bytes", "`psum_bank_bytes`", lambda c: _bytes(c.psum_bank_bytes)),
        ("PSUM per partition / total", "`psum_bits / 8`",
         lambda c: f"{_bytes(c.psum_bits // 8 // c.partitions)} / {_bytes(c.psum_bits // 8)}"),
        ("PSUM entry-index bits", "log2(banks · entries)",
         lambda c: str(_log2_exact(c.psum_banks * c.psum_bank_fp32))),
        ("max N of one matmul", "`psum_bank_fp32`", lambda c: str(c.psum_bank_fp32)),
        ("`Vec32` stream payload", "32 · P bits", lambda c: str(32 * c.partitions)),
        ("`Vec16` stream payload", "16 · P bits", lambda c: str(16 * c.partitions)),
        ("quadrant (start-partition step)", "P / 4", lambda c: _frac(Fraction(c.partitions, 4))),
        ("DMA engines", "max(1, P / 8) (scaled from A1: 16 per 128)",
         lambda c: str(max(1, c.partitions // 8))),
        ("MX blocks per K-fold", f"R / `mx_block`{mxb}",
         lambda c: _frac(Fraction(c.pe_rows, c.mx_block))),
        ("4:16 sparse logical K per fold", "4 · R", lambda c: str(4 * c.pe_rows)),
        ("PE significand width [invented]",
         "widest significand of the enabled formats; 12 with `fp32_passes` = 4 (§6.4)",
         lambda c: str(pe_significand_width(c))),
        ("PE MAC latency L", "`1 + mul_stages + add_stages` (the PE computes from its registered "
         "buses)", lambda c: str(1 + c.mul_stages + c.add_stages)),
        ("moving-skew registers", "`add_stages` · R(R−1)/2 lanes (row skew = adder latency)",
         lambda c: _group(c.add_stages * c.pe_rows * (c.pe_rows - 1) // 2)),
    ]


def presets_table():
    cfgs = [PRESETS[n] for n in COLUMNS]
    rows = [[p, f, *(fn(c) for c in cfgs)] for p, f, fn in _preset_rows()]
    return _markdown(["parameter", "formula", *COLUMNS], rows)


# --- cycles-table (docs/architecture.md §6.8) ----------------------------------------------

#: Bits of one SBUF word per partition per cycle: e = SBUF_WORD_BITS // element width.
SBUF_WORD_BITS = 32


def _ceil_div(a, b):
    return -(-a // b)


def cycles_table():
    """The §6.8 cycle formulas evaluated for the presets (N = ``psum_bank_fp32``)."""
    cfgs = [PRESETS[n] for n in COLUMNS]
    lat = {(1 + c.mul_stages + c.add_stages, c.add_stages + 1) for c in cfgs}
    if len(lat) != 1:
        raise ValueError("the presets differ in L or A; give the table a column for each")
    L, A = lat.pop()
    e16, e8 = SBUF_WORD_BITS // 16, SBUF_WORD_BITS // 8
    passes = {c.fp32_passes for c in cfgs}
    if len(passes) != 1:
        raise ValueError("the presets differ in fp32_passes; give the table a column for each")
    P = passes.pop()
    head = ["preset", "SCALE-Sim (N max)", "ours, L=1 e=1 A=0", "ours cold BF16",
            "steady BF16 / FP8", f"steady FP32 (e = 1, {P} pass{'es' if P > 1 else ''})",
            "steady BF16 at N = C"]
    rows = []
    for c in cfgs:
        R, C, N = c.pe_rows, c.pe_cols, c.psum_bank_fp32
        bf16, fp8 = (max(N, _ceil_div(C, e) + 1, A) for e in (e16, e8))
        rows.append([c.name, str(2 * R + C + N - 2), str(C + N + R + C - 2),
                     str(_ceil_div(C, e16) + N + L * R + C - 2 + A),
                     str(bf16) if bf16 == fp8 else f"{bf16} / {fp8}",
                     str(max(P * N, C + 1, A)), str(max(C, _ceil_div(C, e16) + 1, A))])
    return (f"Values computed from the presets with L = {L}, A = {A}, N = `psum_bank_fp32`, "
            f"e = {e16} for BF16, {e8} for FP8, 1 for FP32:\n\n" + _markdown(head, rows))


# --- params-table (README.md) ---------------------------------------------------------------

def _formats_cell(c):
    if c.formats == DENSE_FORMAT_NAMES:
        return f"all {len(c.formats)}"
    return ", ".join(c.formats)


def params_table():
    cfgs = [PRESETS[n] for n in COLUMNS]
    spec = [
        ("`partitions` = `pe_rows`", "SBUF/PSUM partitions = array rows (K)",
         lambda c: str(c.partitions)),
        ("`pe_cols`", "array columns (M)", lambda c: str(c.pe_cols)),
        ("`psum_banks` × `psum_bank_fp32`", "PSUM banks × FP32 entries per partition (max N)",
         lambda c: f"{c.psum_banks} × {c.psum_bank_fp32}"),
        ("`sbuf_bytes_per_partition`", "SBUF per partition",
         lambda c: _bytes(c.sbuf_bytes_per_partition)),
        ("`formats`", "dense input formats", _formats_cell),
        ("`mx_formats`, `mx_block`", "MX formats, elements per scale",
         lambda c: f"{len(c.mx_formats)}, {c.mx_block}"),
        ("`cfp8_exp_bits`, `cfp8_bias`", "configurable FP8",
         lambda c: f"E{c.cfp8.exp_bits}M{c.cfp8.man_bits}, {c.cfp8.bias}"),
        ("`sr_seed`", "stochastic-rounding PRNG seed", lambda c: f"0x{c.sr_seed:08X}"),
        ("`mul_stages`, `add_stages`", "FP pipeline registers",
         lambda c: f"{c.mul_stages}, {c.add_stages}"),
        ("`fp32_passes`", "array passes of an FP32 column (1 = native 24 × 24 multiplier, "
         "4 = 12 × 12 split, ¼ rate)", lambda c: str(c.fp32_passes)),
        ("`packed_modes`", "double-rate FP8 / x4 MX (elements per PE step: `fp8_pack`, "
         "`mx_pack`)", lambda c: f"{c.fp8_pack}, {c.mx_pack}" if c.packed_modes else "off"),
        ("`ap_dims`", "free dimensions of an access pattern (≤ 4)", lambda c: str(c.ap_dims)),
        ("`sparse_patterns`", "N:M sparsity patterns (None = all that fit; `()` = none)",
         lambda c: "all " + str(len(c.sparsity)) if c.sparse_patterns is None
         else ", ".join(c.sparsity) or "none"),
        ("`sbuf_banks`", "SBUF banks per partition (top address bits)",
         lambda c: f"{c.sbuf_banks} × {_bytes(c.sbuf_bank_bytes)}"),
        ("`axi_data_bits`", "DMA AXI4 data width = SBUF word (`sbuf_word_bytes`)",
         lambda c: f"{c.axi_data_bits} ({c.sbuf_word_bytes} B)"),
        ("`axi_addr_bits`", "AXI4 address width", lambda c: str(c.axi_addr_bits)),
        ("`dma_queues`, `dma_outstanding`", "DMA queues per engine, AXI transactions in flight "
         "(engines = max(1, P/8))", lambda c: f"{c.dma_queues}, {c.dma_outstanding} "
         f"(×{c.dma_engines})"),
        ("`dma_element_ops`", "DMA element path (ops add/max/min, casts; docs/dma.md §4.2)",
         lambda c: "on" if c.dma_element_ops else "off"),
        ("`semaphores` × `semaphore_bits`", "semaphore file",
         lambda c: f"{c.semaphores} × {c.semaphore_bits}"),
        ("`fetch_depth`, `issue_depth`", "per sequencer: instructions prefetched, issued and "
         "not complete", lambda c: f"{c.fetch_depth}, {c.issue_depth}"),
        ("`watchdog_reset`", "reset value of `WATCHDOG` (cycles; 0 = off)",
         lambda c: pow2_text(c.watchdog_reset) if c.watchdog_reset > 0
         and not c.watchdog_reset & (c.watchdog_reset - 1) else str(c.watchdog_reset)),
        ("`act_segments`", "Scalar-engine activation-table segments per lane (docs/scalar.md)",
         lambda c: str(c.act_segments)),
        ("`ring_size`, `link_bits`", "cores on the collective ring; ring-link payload bits per "
         "flit (docs/collectives.md)", lambda c: f"{c.ring_size}, {c.link_bits}"),
        ("`link_credits`, `link_latency`", "ring-link receive flits per virtual channel; wire "
         "cycles (full rate when credits >= 2 x latency + 4)",
         lambda c: f"{c.link_credits}, {c.link_latency}"),
    ]
    rows = [[f, m, *(fn(c) for c in cfgs)] for f, m, fn in spec]
    return _markdown(["field", "meaning", *COLUMNS], rows)


# --- docs/isa.md: the encoding, from rtl/isa.py ---------------------------------------------

def _bits(f, base=0):
    lo = base + f.lsb
    return f"[{lo + f.width - 1}:{lo}]" if f.width > 1 else f"[{lo}]"


def isa_header_table():
    from rtl import isa
    rows = [(f"`{f.name}`", _bits(f), isa.FIELD_KINDS[f.kind], f.doc) for f in isa.HEADER]
    rows += [(f"`{slot}`", f"[{8 * b + 8 * isa.AP_BYTES - 1}:{8 * b}]", "AP", "access pattern")
             for slot, b in isa.AP_SLOTS.items()]
    rows.append(("`imm`", f"[{8 * isa.INSTR_BYTES - 1}:{8 * isa.IMM_BYTE}]", "per opcode",
                 "immediates (opcode table)"))
    return _markdown(("field", "bits", "kind", "meaning"), rows)


def isa_ap_table():
    from rtl import isa
    return _markdown(("field", "bits", "kind", "meaning"),
                     [(f"`{f.name}`", _bits(f), isa.FIELD_KINDS[f.kind], f.doc)
                      for f in isa.AP_FIELDS])


def isa_dtype_table():
    from rtl import isa
    return _markdown(("code", "dtype"), [(str(i), f"`{n}`") for i, n in enumerate(isa.DTYPES)]
                     + [(f"{len(isa.DTYPES)}-15", "reserved")])


def isa_opcode_table():
    from rtl import isa
    rows = []
    for op in isa.OPCODES:
        aps = ", ".join(f"{k}: {v}" for k, v in op.aps.items()) or "-"
        imm = ", ".join(f"`{f.name}` {_bits(f, 8 * isa.IMM_BYTE)} {isa.FIELD_KINDS[f.kind]}"
                        for f in op.imm) or "-"
        rows.append((f"0x{op.code:02X}", f"`{op.name}`", op.engine or "any", aps,
                     ", ".join(op.flags) or "-", imm, op.doc))
    return _markdown(("code", "mnemonic", "engine", "APs", "flags", "immediates", "operation"),
                     rows)


# --- act-table-sizes (docs/scalar.md §3): from golden.activation ---------------------------

def act_table_sizes_table():
    """Segments, image words and ``ACT_TABLE_LOAD`` stream words of every activation table."""
    from golden import activation as act
    rows = []
    for name in act.FUNCTIONS:
        tab = act.table(name)
        rows.append((f"`{name}`", str(tab.segments), _thousands(len(act.table_image(tab))),
                     _thousands(len(act.table_words(tab)))))
    return _markdown(("function", "segments", "image words (`table_image`)",
                      "load words (`table_words`)"), rows)


def _thousands(n):
    return f"{n:,}"


# --- figures-table (README.md): from build/bench/*.json --------------------------------------

#: Per bench, in order: ``(metric, what it is, format)``; format ``"f3"`` three decimals,
#: ``"f2"`` two, ``"f1"`` one, ``"int"`` a whole number with thousands commas, ``"pct"`` a
#: fraction as a percentage. The metrics the issues name, and the few that explain them.
FIGURES = (
    ("tensor_engine", (
        ("utilization_back_to_back_bf16", "8 back-to-back BF16 tiles, K = rows, M = cols, "
         "N = one PSUM bank", "f3"),
        ("utilization_single_tile_bf16", "one BF16 tile", "f3"),
        ("rate_vs_bf16_fp8", "FP8 MACs per cycle over BF16's (double-rate FP8)", "f2"),
        ("rate_vs_bf16_fp32", "FP32 over BF16 (`fp32_passes` = 4)", "f2"),
        ("rate_vs_bf16_mx", "MX over BF16 (x4 MX)", "f2"),
        ("sim_cycles_per_second", "Verilator cycles/s, best scenario", "int"),
        ("sim_cycles_per_second_all_scenarios", "Verilator cycles/s, every scenario", "int"),
        ("verilator_build_seconds_cold", "cold Verilator build (s)", "f1"),
        ("pe_um2_per_fp8_mac_per_cycle", "PE sky130 µm² per FP8 MAC per cycle "
         "(needs `python -m synth.pe_settings`)", "int"),
    )),
    ("core", (
        ("gemm_tensor_util_from_dram", "tiled GEMM from DRAM on the whole core (Verilator)",
         "f3"),
        ("mlp_roofline_fraction", "MLP layer from DRAM: roofline cycles / RTL cycles", "f3"),
        ("golden_cycle_error", "golden cycle model vs RTL, mean over the `make sim` kernels "
         "(small)", "pct"),
        ("golden_cycle_error_max", "the same, worst kernel", "pct"),
        ("sim_cycles_per_second", "whole core, cycles/s (hierarchical `-O3` build)", "int"),
        ("small_sim_cycles_per_second", "whole core (small), cycles/s", "int"),
    )),
    ("dma", (
        ("bw_fraction_zero_latency", "DRAM → SBUF, 64 KiB, beats per cycle, no DRAM latency",
         "f3"),
        ("bw_fraction_latency64", "the same, 64-cycle DRAM latency", "f3"),
        ("bw_fraction_latency64_4k", "the same, 16 descriptors of 4 KiB back to back", "f3"),
        ("bw_fraction_latency64_1k", "the same, 64 descriptors of 1 KiB", "f3"),
        ("bw_fraction_latency64_4k_one", "the same, one 4 KiB descriptor alone", "f3"),
        ("bw_fraction_latency64_write", "SBUF → DRAM, 64 KiB, 64-cycle latency", "f3"),
        ("bw_fraction_latency64_write_4k", "the same, 16 descriptors of 4 KiB", "f3"),
        ("bw_fraction_latency64_write_1k", "the same, 64 descriptors of 1 KiB", "f3"),
        ("descriptor_overhead_cycles", "cycles per extra descriptor", "f1"),
        ("element_elems_per_cycle", "element path: SBUF → SBUF FP32 → BF16 cast", "f3"),
        ("element_elems_per_cycle_add_sbuf", "element path: BF16 add into SBUF", "f3"),
    )),
    ("collectives", (
        ("allreduce_busbw_fraction_64k", "all-reduce on 4 cores, 64 KiB per core, NCCL busbw "
         "over link peak (golden model)", "f3"),
        ("allreduce_busbw_fraction_256k", "the same, 256 KiB (golden model)", "f3"),
        ("allgather_busbw_fraction", "all-gather, 4 cores, 256 KiB (golden model)", "f3"),
        ("reducescatter_busbw_fraction", "reduce-scatter, 4 cores, 256 KiB (golden model)",
         "f3"),
        ("alltoall_busbw_fraction", "all-to-all, 4 cores, 256 KiB, one ring direction "
         "(golden model; the ring's bound is 2/n)", "f3"),
        ("hop_latency_cycles", "forwarding core, flit in to flit out (RTL link ring)", "int"),
        ("allreduce_4kib_cycles", "all-reduce of 4 KiB per core, 4 cores (golden model's "
         "formula)", "int"),
        ("rtl_allreduce_busbw_fraction_64k", "all-reduce, 4 cores, 64 KiB (RTL engine ring, "
         "Verilator)", "f3"),
        ("rtl_allreduce_busbw_fraction_256k", "the same, 256 KiB (RTL)", "f3"),
        ("rtl_allgather_busbw_fraction", "all-gather, 4 cores, 64 KiB (RTL; the engine's "
         "bound is (n-1)/n)", "f3"),
        ("rtl_reducescatter_busbw_fraction", "reduce-scatter, 4 cores, 64 KiB (RTL; the same "
         "bound)", "f3"),
        ("rtl_alltoall_busbw_fraction", "all-to-all, 4 cores, 64 KiB (RTL permute engine; "
         "the ring's bound is 2/n)", "f3"),
        ("rtl_sendrecv_busbw_fraction", "send/recv to the next rank, 64 KiB, algbw (RTL)",
         "f3"),
        ("rtl_allreduce_4kib_cycles", "all-reduce of 4 KiB per core, 4 cores (RTL)", "int"),
        ("sem_to_first_flit_cycles", "semaphore to the first flit (RTL MultiCore, small)",
         "int"),
        ("gemm_slowdown_with_allreduce", "GEMM from DRAM slowed by an all-reduce of an "
         "SBUF buffer on the same core (RTL MultiCore, small, 2 cores)", "f3"),
        ("allreduce_slowdown_with_gemm", "the all-reduce slowed by the GEMM (the same run)",
         "f3"),
    )),
    ("memory", (
        ("tensor_util_with_dma", "tensor engine fed from SBUF while the DMA writes another "
         "bank", "f3"),
        ("tensor_util_alone", "the same without DMA traffic", "f3"),
        ("tensor_util_with_synthetic_writer", "a full-rate writer on the moving operand's "
         "bank", "f3"),
    )),
    ("vector_scalar", (
        ("vector_elems_per_lane_cycle", "vector tensor_tensor, elements per lane per cycle",
         "f3"),
        ("instruction_overhead_cycles", "vector instruction overhead (cycles)", "int"),
    )),
    ("activation", (
        ("scalar_elems_per_lane_cycle", "scalar engine, 512-element instructions in a stream",
         "f3"),
        ("instruction_overhead_cycles", "scalar instruction overhead in a stream (cycles)",
         "f1"),
        ("max_ulp_fp32_worst_function", "worst FP32-output error over the functions (ULP; "
         "every BF16 input and 2^20 sampled FP32 inputs)", "f3"),
        ("max_ulp_bf16_worst_function", "worst BF16-output error (ULP; every BF16 input)",
         "f3"),
        ("functions_within_goal", "functions within 2 ULP (FP32) and 1 ULP (BF16)", "int"),
    )),
    ("sparsity", (
        ("speedup_4_16", "4:16 sparse over dense, steady state", "f2"),
        ("speedup_2_4", "2:4 sparse over dense, steady state", "f2"),
        ("decoder_area_fraction", "sparsity decoder's share of the array's sky130 area",
         "pct"),
    )),
    ("formats", (
        ("cases_per_second", "FP units, Verilator cases/s (every case checked bit for bit)",
         "int"),
        ("verilator_build_seconds", "FP units, cold Verilator builds (s)", "f1"),
    )),
)
NOT_MEASURED = "not measured"
#: The figures table's columns.
FIGURES_HEAD = ("metric", "value", "preset", "command", "commit")


def _figure(v, fmt):
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return str(v)
    if fmt == "int":
        return f"{round(v):,}"
    if fmt == "pct":
        return f"{100 * v:.1f} %"
    return f"{v:.{fmt[1:]}f}"


def bench_records(bench_dir=None):
    """``{bench name: record}`` of the JSON files in ``bench_dir`` (default ``build/bench``)."""
    d = Path(bench_dir) if bench_dir is not None else BENCH_DIR
    out = {}
    for f in sorted(d.glob("*.json")) if d.is_dir() else ():
        rec = json.loads(f.read_text())
        if isinstance(rec, dict) and "metrics" in rec:
            out[rec.get("name", f.stem)] = rec
    return out


def figures_table(records=None, commit=None):
    """The README's figures table from bench ``records`` (default: :func:`bench_records`): per
    bench a row with its preset, command and commit, then a row per metric. ``commit`` is shown
    for a record that has none (one written before ``bench/__main__.py`` recorded it)."""
    records = bench_records() if records is None else records
    rows = []
    for bench, metrics in FIGURES:
        rec = records.get(bench)
        if rec is None:
            rows.append((f"**{bench}**", "", "—", f"`make bench BENCH={bench}`", "—"))
        else:
            rows.append((f"**{bench}**", "", rec.get("preset", "—"),
                         f"`{rec.get('command', f'make bench BENCH={bench}')}`",
                         rec.get("commit") or commit or "not recorded"))
        for metric, what, fmt in metrics:
            v = rec["metrics"].get(metric) if rec is not None else None
            rows.append((f"`{metric}`: {what}",
                         NOT_MEASURED if v is None else f"**{_figure(v, fmt)}**", "", "", ""))
    return _markdown(FIGURES_HEAD, rows)


def _parse_figure(text, fmt):
    """The value :func:`_figure` printed as ``text`` in format ``fmt``: a number in ``fmt``'s
    form, or a text that is no number (printed as it was recorded); a number in another form
    raises ValueError."""
    try:
        float(text.replace(",", "").removesuffix(" %"))
    except ValueError:
        return text
    try:
        if fmt == "pct":
            if not text.endswith(" %"):
                raise ValueError(text)
            return float(text[:-2]) / 100
        if fmt == "int":
            return int(text.replace(",", ""))
        return float(text)
    except ValueError:
        raise ValueError(f"figures table value {text!r} is not a number in format "
                         f"{fmt!r}") from None


def parse_figures_table(text):
    """Bench records read back from a figures table (``text``: a document holding the
    ``figures-table`` block, or the table alone): ``{bench: {"preset", "command", "metrics"[,
    "commit"]}}`` such that :func:`figures_table` of them prints the table again, when the table
    is one it printed (values as printed: three decimals stay three decimals).

    A table that is not in the generator's form (header, a bench or metric not in
    :data:`FIGURES`, a row out of place, a cell not as printed) raises ValueError naming the
    row; a hand-edited cell that still parses is caught by comparing :func:`figures_table` of
    the result with ``text``."""
    m = _block_re(FIGURES_TABLE[1]).search(text)
    lines = (m.group(2) if m else text).strip("\n").split("\n")
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]
    if len(rows) < 2 or tuple(rows[0]) != FIGURES_HEAD:
        raise ValueError(f"figures table header must be {FIGURES_HEAD!r}, not {lines[0]!r}")
    fmts = {bench: {metric: fmt for metric, _, fmt in metrics} for bench, metrics in FIGURES}
    records, bench = {}, None
    for line, cells in zip(lines[2:], rows[2:]):
        if len(cells) != len(FIGURES_HEAD):
            raise ValueError(f"figures table row must have {len(FIGURES_HEAD)} cells: {line!r}")
        name, value, preset, command, commit = cells
        bm = re.fullmatch(r"\*\*(\w+)\*\*", name)
        if bm:
            bench = bm[1]
            if bench not in fmts or bench in records or value:
                raise ValueError(f"figures table bench row not in the generator's form: {line!r}")
            if (preset, commit) == ("—", "—"):
                records[bench] = None
                continue
            rec = {"name": bench, "preset": preset, "command": command.strip("`"),
                   "metrics": {}}
            if commit != "not recorded":
                rec["commit"] = commit
            records[bench] = rec
            continue
        mm = re.match(r"`(\w+)`: ", name)
        if bench is None or mm is None or mm[1] not in fmts[bench] or preset or command \
                or commit:
            raise ValueError(f"figures table metric row not in the generator's form: {line!r}")
        if value == NOT_MEASURED:
            continue
        vm = re.fullmatch(r"\*\*(.+)\*\*", value)
        if vm is None or records[bench] is None:
            raise ValueError(f"figures table value must be **value** under a bench with a "
                             f"record, or {NOT_MEASURED!r}: {line!r}")
        records[bench]["metrics"][mm[1]] = _parse_figure(vm[1], fmts[bench][mm[1]])
    return {b: r for b, r in records.items() if r is not None}


# --- Markdown and files ---------------------------------------------------------------------

def _markdown(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


#: ``(file relative to the repository, marker name, generator)`` of the tables generated from
#: the code alone (always current; checked in every regression).
TABLES = (
    ("docs/number-formats.md", "formats-table", formats_table),
    ("docs/architecture.md", "presets-table", presets_table),
    ("docs/architecture.md", "cycles-table", cycles_table),
    ("README.md", "params-table", params_table),
    ("docs/isa.md", "isa-header", isa_header_table),
    ("docs/isa.md", "isa-ap", isa_ap_table),
    ("docs/isa.md", "isa-dtypes", isa_dtype_table),
    ("docs/isa.md", "isa-opcodes", isa_opcode_table),
    ("docs/scalar.md", "act-table-sizes", act_table_sizes_table),
)
#: The table generated from ``build/bench/*.json`` (only when there is a record).
FIGURES_TABLE = ("README.md", "figures-table")


def _block_re(name):
    return re.compile(rf"(<!-- {name}:begin[^\n]*-->\n)(.*?)(<!-- {name}:end -->)", re.S)


def render(text, name, table):
    """``text`` with the block between the ``name`` markers replaced by ``table``."""
    pat = _block_re(name)
    if len(pat.findall(text)) != 1:
        raise ValueError(f"expected exactly one '<!-- {name}:begin ... -->' ... "
                         f"'<!-- {name}:end -->' block")
    return pat.sub(lambda m: m.group(1) + table + m.group(3), text)


def _jobs(records, commit):
    """``(file, marker name, generator)`` of every table to write: the figures table only when
    there are bench records."""
    jobs = list(TABLES)
    if records:
        jobs.append((*FIGURES_TABLE, lambda: figures_table(records, commit)))
    return jobs


def stale(root=ROOT, records=None, commit=None):
    """``[(file, marker name)]`` of the tables that differ from the generated ones (the
    figures table only when ``records``, default those of ``build/bench``, exist)."""
    records = bench_records(Path(root) / "build" / "bench") if records is None else records
    out = []
    for rel, name, gen in _jobs(records, commit):
        text = (Path(root) / rel).read_text()
        if render(text, name, gen()) != text:
            out.append((rel, name))
    return out


def update(root=ROOT, records=None, commit=None):
    """Rewrite every table; returns the files changed."""
    records = bench_records(Path(root) / "build" / "bench") if records is None else records
    changed = []
    for rel, name, gen in _jobs(records, commit):
        path = Path(root) / rel
        text = path.read_text()
        new = render(text, name, gen())
        if new != text:
            path.write_text(new)
            if rel not in changed:
                changed.append(rel)
    return changed


def main(argv=None):
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="only compare; exit status 1 when a table is out of date")
    ap.add_argument("--commit", help="commit to show for bench records that do not name one "
                    "(written before bench/__main__.py recorded it)")
    args = ap.parse_args(argv)
    records = bench_records()
    if not records:
        print(f"no bench records in {BENCH_DIR}: the figures table is left as it is "
              "(run make bench first)")
    if args.check:
        bad = stale(records=records, commit=args.commit)
        for rel, name in bad:
            print(f"{rel}: table '{name}' is out of date; run {COMMAND}")
        return 1 if bad else 0
    for rel in update(records=records, commit=args.commit):
        print(f"updated {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
