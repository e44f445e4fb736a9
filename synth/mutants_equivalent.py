# SPDX-License-Identifier: Apache-2.0
"""Mutants of the RTL claimed equivalent to the original (``make mutate``, docs/mutation.md).

One entry per claim: the mutant's id (as printed in ``build/mutate/<block>.md``) -> a one-line
reason, with the mutant's readable key as a comment above it. Claimed mutants are still run on
every ``make mutate``: a claimed mutant that the tests kill is reported as "equivalence claim no
longer holds", a claim whose mutant no longer exists as "stale claim". Surviving claimed mutants
are left out of the kill fraction.
"""

EQUIVALENT = {
    # rtl/collective/engine.py:elaborate:drop_eq:`m.d.comb += [alu.i.valid.eq(vchain[1]),`#1
    "c1c132164d": "the lane ALU's valid only travels beside the data to o.valid, which the "
                  "engine never reads (its own vchain times the stages): results unchanged",
    # rtl/collective/engine.py:elaborate:const_inc:`keff = Signal(range(K + 1))`#1
    "48335ec857": "keff holds K or 1 (Mux(packed, K, 1)); range(K + 2) only widens the signal, "
                  "the value and every use of it are the same",
    # rtl/core/sync_engine.py:elaborate:drop_eq:`axi.arid.eq(0), axi.bready.eq(1)]`#1
    "cba65b0e7c": "arid is a combinational output with init 0: without the explicit .eq(0) "
                  "it is still the constant 0",
    # rtl/fp/fused_add.py:lzc:const_inc:`p2 = 1 << max(1, (n - 1).bit_length())`#1
    "fa8f762554": "lzc padded to twice the power of two: more zeros below the LSB "
                  "leave the count of every nonzero value (and the zero flag) unchanged",
    # rtl/fp/fused_add.py:lzc:const_inc:`p2 = 1 << max(1, (n - 1).bit_length())`#2
    "8c4b7e8347": "p2 >= 4 instead of >= 2 only pads 1- and 2-bit values further below their "
                  "LSB: the count of a nonzero value is unchanged",
    # rtl/fp/fused_add.py:lzc:binop:`p2 = 1 << max(1, (n - 1).bit_length())`#2
    "1b0f1727a1": "(n + 1).bit_length() gives a power of two >= n as well (at most twice as "
                  "large): only more LSB padding, same count for a nonzero value",
    # rtl/fp/fused_add.py:lzc:const_dec:`p2 = 1 << max(1, (n - 1).bit_length())`#3
    "49fa9b998b": "n.bit_length() gives a power of two > n: only more LSB padding, same count "
                  "for a nonzero value",
    # rtl/fp/fused_add.py:lzc:const_inc:`out = Signal(range(len(value) + 1), name=name)`#1
    "8d1ea087d5": "the count (0..len(value)) fits range(len(value) + 1); a wider output signal "
                  "holds the same value and every use reads it as a number",
    # rtl/fp/fused_add.py:elaborate:const_dec:`packed = Signal(signed(ew + 25))`#1
    "62369acbbb": "packed = ((eb - 1) << 23) + sig + up < 2**36 in magnitude (|eb| < 2**12 "
                  "< 2**(ew - 1)), so signed(ew + 24) holds it as well as signed(ew + 25)",
    # rtl/fp/fused_add.py:elaborate:const_inc:`m.d.comb += c_al.eq(full[24:] | full[:24].any())`#2
    "dda510200e": "the sticky OR then also takes full[24], which is already c_al's LSB: "
                  "c_al[0] = full[24] | any(full[:24]) either way",
    # rtl/fp/fused_add.py:elaborate:const_dec:`m.d.comb += dc.eq(P_MAX + 24)`#1
    "ecac28b25d": "c (24 bits) clamped to a right shift of P_MAX + 23 instead of + 24 still lies "
                  "at or below c_al's bit 0, which ORs all of it: c_al = 1 for a nonzero c "
                  "either way, 0 for a zero one",
    # rtl/fp/fused_add.py:elaborate:const_inc:`m.d.comb += cc.eq(x["c_al"] ^ Mux(sub, (1 << (T + 1)) - 1, 0))`#1
    "8d443ebc28": "a mask of T + 2 ones instead of T + 1 is truncated to cc's T + 1 bits: "
                  "the same ones' complement",
    # rtl/fp/fused_add.py:elaborate:const_inc:`full = Signal(P_MAX + 48)`#1
    "7ac239cfff": "the shifted value is P_MAX + 48 bits wide: a wider 'full' only gains a zero "
                  "MSB, which the P_MAX + 24-bit c_al truncates away",
    # rtl/fp/convert.py:elaborate:const_inc:`"valid": 1, "sr": 1, "fmt": range(nf), "sgn": 1, "nan": 1, "inf": 1,`#6
    "afcde7d2b2": "s2.valid widened to 2 bits is loaded from the 1-bit s1.valid (MSB always 0) "
                  "and read only as o.valid/prng.next through 1-bit uses: same values",
    # rtl/fp/convert.py:elaborate:const_inc:`"int": int_bits, "frac": _FRAC, "bexp": range(1 << 10)}))`#2
    "6ea177a019": "s2.bexp widened to 11 bits is loaded from the 10-bit unsigned s1.bexp (zero-"
                  "extended) and only feeds (bexp << M) + rounded in a w + 24-bit sum: same value",
    # rtl/fp/convert.py:elaborate:const_dec:`bexp = Signal(range(1 << 10))   # biased exponent field - 1 of the quantum's binade`#2
    "77154a629e": "bexp = max(E, emin) + bias - 1 <= 127 + 150 - 1 < 2**9 for every finite FP32 "
                  "input and FP32-subset target (emin - M >= -149 bounds bias <= 150); "
                  "Inf/NaN override the result: 9 bits hold every value 10 bits do",
    # rtl/fp/widen.py:elaborate:const_inc:`m.d.comb += bits.eq((norm >> sub_sh)[:23])`#1
    "be9a72ef32": "in the subnormal branch e_un < -126, so sub_sh = -126 - e_un >= 1 and bit 23 "
                  "of norm >> sub_sh is 0 (norm's leading one is bit 23): [:24] adds a zero bit",
    # rtl/mem/ap.py:elaborate:const_inc:`RW = SW + 2 + AP_OFFSET_BITS + 2              # x4 bytes, plus the u32 offset`#2
    "3ef44dfb5f": "RW already holds offset + 4 * (sum of spans) without overflow (|span| < 2**32, "
                  "offset < 2**32); one more bit sign-extends the same lo/hi values",
    # rtl/mem/ap.py:elaborate:const_inc:`spans = [Signal(signed(AP_STEP_BITS + AP_NUM_BITS + 1), name=f"span{k}") for k in range(D)]`#1
    "dbb5cf5297": "|step * (num - 1)| <= 2**15 * (2**16 - 1) < 2**32 fits the 33-bit signed span; "
                  "a 34-bit span holds the same sign-extended value",
    # rtl/tensor/pe.py:elaborate:const_inc:`mul.i.payload.b.eq(Mux(forced, 0, x_code)),`#1
    "8d3878a36a": "a forced product has a = -0 (sign bit only, format 0), so b = code 1 (the "
                  "smallest positive finite value of format 0) gives -0 exactly as b = +0 does",
    # rtl/tensor/pe.py:elaborate:const_inc:`mul.i.payload.fmt_b.eq(Mux(forced, 0, mv.fmt)),`#1
    "8e64d4dfaa": "a forced product has b = code 0, which is +0 in every format (IEEE, fn and "
                  "specials-free alike), so format index 1 instead of 0 still gives -0 x +0 = -0",
    # rtl/core/tensor_decode.py:elaborate:drop_eq:`m.d.comb += self.done.payload.info.eq(0)`#1
    "852b2fa67a": "done.payload.info is assigned nowhere else: an undriven comb output holds "
                  "its reset value 0 every cycle, so the explicit .eq(0) changes nothing",
    # rtl/tensor/psum.py:elaborate:drop_eq:`rp.addr.eq(r_addr), rp.en.eq(r_en),`#2
    "497b1c19bb": "rp.data is used only in the cycle after a read (accumulate stage 1, a row "
                  "response; nothing stalls them) and each such read drives r_en = 1: an "
                  "always-enabled port (en's reset value) gives the same data then; the enable "
                  "only saves read power",
    # rtl/dma/descriptor.py:elaborate:cmp:`neg = sum(Mux(spans[k][s] < 0, spans[k][s], 0) for k in range(1, DIMS))`#1
    "55cbf41be1": "at spans[k][s] == 0 both Mux arms are 0, so < 0 and <= 0 select the same value",
    # rtl/mem/sbuf.py:elaborate:const_inc:`words = Array([word[p * WB * 8:(p + 1) * WB * 8] for p in range(P)])`#3
    "ee21ddbe7a": "a wider slice starts at the same bit; rsp.payload (one word, WB * 8 bits) "
                  "takes its low WB * 8 bits, the same ones",
    # rtl/mem/sbuf.py:elaborate:const_inc:`ln = Array([pw[j * LANE_BITS:(j + 1) * LANE_BITS] for j in range(lanes)])`#1
    "adccd19ac3": "a wider slice starts at the same bit; rsp.payload[p] (LANE_BITS wide) takes "
                  "its low LANE_BITS bits, the same ones",
    # rtl/vector/frame.py:elaborate:binop:`with m.If(~self.start & (ok1 | err1)):`#1
    "e8e086a8fc": "an instruction starts only after the previous one's last element was "
                  "written, so both source readers are idle, take their descriptors in the same "
                  "cycle and strobe ok/err in the same cycle; CHECK reads got1/bad1/sc1 the "
                  "cycle after, when re-latching them every cycle gives the same values, and in "
                  "DRAIN_SRC a bad1 read as 0 only readies a reader that holds no elements",
    # rtl/vector/fu.py:elaborate:drop_eq:`m.d.sync += [slot.eq(0), comb_on.eq(0), comb_issue.eq(0)]`#2
    "42253a021c": "comb_on falls at each reduce element's final combine step, which precedes "
                  "the instruction's last output beat (also when DRAIN_OUT discards it); start "
                  "comes only after that instruction's done, so comb_on is already 0 there",
    # rtl/tensor/engine.py:elaborate:const_dec:`return ok & (c.k[:n.bit_length() - 1] == 0) if n > 1 else ok`#2
    "fc1a5a9c96": "for n = 1 (the only value the change reaches) c.k[:0] is an empty slice, "
                  "whose == 0 is always 1, so ok & 1 is ok",
    # rtl/core/axi_mux.py:elaborate:drop_eq:`m.d.comb += [s.wvalid.eq(1), s.wstrb.eq(0), s.wlast.eq(flush_last)]`#2
    "694b79c0f0": "s.wstrb is a comb signal with init 0 driven only in the Elif (pass-through) "
                  "branch: in the flush branch it takes its init value 0 without the explicit "
                  ".eq(0), so flush beats stay strobe-less",
}
