# SPDX-License-Identifier: Apache-2.0
"""The Scalar engine's per-lane function unit: ``y = f(x)`` from a loadable table.

The algorithm (reduction modes, segment map, degree-6 Horner in FP32 fused MACs, post scale,
specials) is specified and modelled bit for bit by ``golden/activation/evaluator.py``; the table image
(word addresses in ``rtl.config``: ``ACT_MAP_BASE``, ``ACT_SEG_BASE``, ``ACT_SEG_STRIDE``) by
:func:`golden.activation.table_image`. See ``docs/scalar.md``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, memory, stream
from amaranth.lib.wiring import In

from rtl.config import (ACT_BINADES, ACT_DEGREE, ACT_MAP_BASE, ACT_SEG_BASE, ACT_SEG_STRIDE,
                        FP32, check_config)
from rtl.fp.fma import FMA
from rtl.fp.fused_add import lzc
from rtl.fp.pipe import delay
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["FunctionUnit", "table_write_layout", "NCOEF"]

QNAN = 0x7FC00000
INF = 0x7F800000
NEG0 = 0x80000000
ONE = 0x3F800000
LOG2E = 0x3FB8AA3B
MAGIC = 0x4B400000
LN2_HI = 0x3F317218
LN2_LO = 0xB102E308
ZCLAMP = 0x43480000
NCOEF = ACT_DEGREE + 1
#: Segment words: centre, c0..c6, flags.
SEG_WORDS = NCOEF + 2
PRE_DIRECT, PRE_LOG, PRE_EVEN = 0, 1, 2
#: FMA steps in the chain: s, r1, r, t, 6 Horner steps, 2 post steps.
N_FMA = 4 + ACT_DEGREE + 2


def table_write_layout(cfg):
    """Payload of the table-write port: ``addr`` (word address) and ``data`` (32 bits)."""
    check_config(cfg, "table_write_layout")
    top = ACT_SEG_BASE + cfg.act_segments * ACT_SEG_STRIDE
    return data.StructLayout({"addr": range(top), "data": 32})


def _to_fp32(m, value, mag_bits, *, name):
    """FP32 bits of a small signed integer ``value`` (exact: ``mag_bits`` <= 24)."""
    neg = value < 0
    mag = Signal(mag_bits, name=f"{name}_mag")
    m.d.comb += mag.eq(Mux(neg, -value, value))
    lz = lzc(m, mag, name=f"{name}_lz")
    shifted = Signal(mag_bits + 24, name=f"{name}_sh")
    m.d.comb += shifted.eq(mag << (24 - mag_bits + lz))   # leading one to bit 23
    out = Signal(32, name=name)
    m.d.comb += out.eq(Mux(mag == 0, 0,
                           Cat(shifted[:23], (127 + mag_bits - 1 - lz)[:8], neg)))
    return out


class FunctionUnit(Pipeline):
    """One lane of ``y = f(x)`` (FP32 bits in and out) from a loaded activation table.

    A chain of ``N_FMA`` = 12 FP32 fused MACs (:class:`rtl.fp.fma.FMA`): the exp reduction
    (``s``, ``r1``, ``r``), ``t = v - centre``, six Horner steps and two post steps (``mulx`` or
    the ``E * ln 2`` add), then the exact power-of-two scale with one RNE rounding, the
    ``tiny_odd`` round-to-odd of the tiny segment and the specials. Every step and its rounding is the one of :func:`golden.activation.evaluate`.

    Parameters
    ----------
    cfg : CoreConfig
        Supplies ``act_segments`` (table depth), ``mul_stages`` and ``add_stages`` (the FMA
        latency ``L``).

    Members
    -------
    i : In(stream.Signature(in_layout, always_ready=True))
        ``x`` (FP32 bits).
    o : Out(stream.Signature(out_layout, always_ready=True))
        ``y`` (FP32 bits); ``o.valid`` is ``i.valid`` delayed by ``latency``.
    tw : In(stream.Signature(table_write_layout(cfg), always_ready=True))
        Table image words (:func:`golden.activation.table_image`): header registers, binade
        map, segment memories. Writing while elements are in flight gives undefined results
        for those elements (the engine drains the pipeline before ``ACT_TABLE_LOAD``).

    Latency ``N_FMA * L + 4`` cycles (input decode, ``k`` to FP32, segment select, scale,
    specials/sign: one register each, overlapping the chain where they can); one element per
    cycle, no back-pressure.
    """

    class Signature(PipelineSignature):
        """Layouts and latency of a :class:`FunctionUnit`."""

        def __init__(self, cfg):
            check_config(cfg, "FunctionUnit")
            if cfg.mul_stages + cfg.add_stages < 1:
                raise ValueError("FunctionUnit needs CoreConfig fields 'mul_stages' + "
                                 "'add_stages' >= 1 (the table reads overlap one FMA), not "
                                 f"{cfg.mul_stages} + {cfg.add_stages}")
            self.fma = FMA.Signature(cfg, formats_a=(FP32,), formats_b=(FP32,))
            self.table_layout = table_write_layout(cfg)
            super().__init__(data.StructLayout({"x": 32}), data.StructLayout({"y": 32}),
                             latency=N_FMA * self.fma.latency + 4,
                             members={"tw": In(stream.Signature(self.table_layout,
                                                                always_ready=True))})

    def __init__(self, cfg):
        check_config(cfg, "FunctionUnit")
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        S = cfg.act_segments
        segw = (S - 1).bit_length()
        L = self.signature.fma.latency

        # --- table: header registers, binade map, segment memories ---------------------------
        hdr = [Signal(32, name=f"hdr{j}") for j in range(9)]
        tw = self.tw
        for j, r in enumerate(hdr):
            with m.If(tw.valid & (tw.payload.addr == j)):
                m.d.sync += r.eq(tw.payload.data)
        sym, pre = hdr[0][0:2], hdr[0][2:4]
        exp_en, log_add, neg_nan, tiny_odd = hdr[0][4], hdr[0][5], hdr[0][6], hdr[0][7]
        q2 = hdr[0][8:11].as_signed()
        bmin, bmax = hdr[0][16:24], hdr[0][24:32]
        tiny = (hdr[1][0:16], hdr[1][16:32])
        big = (hdr[2][0:16], hdr[2][16:32])
        exp_base, kmin, kmax = hdr[3][0:16], hdr[3][16:32].as_signed(), hdr[4][0:16].as_signed()
        spec_pinf, spec_ninf, spec_p0, spec_n0 = hdr[5], hdr[6], hdr[7], hdr[8]

        map_mem = memory.Memory(shape=data.StructLayout({"mb": 4, "base": 16}),
                                depth=2 * ACT_BINADES, init=[])
        m.submodules.map_mem = map_mem
        mw = map_mem.write_port()
        mrel = tw.payload.addr - ACT_MAP_BASE
        m.d.comb += [
            mw.addr.eq(mrel[:7]),
            mw.data.eq(Cat(tw.payload.data[0:4], tw.payload.data[16:32])),
            mw.en.eq(tw.valid & (tw.payload.addr >= ACT_MAP_BASE)
                     & (tw.payload.addr < ACT_MAP_BASE + 2 * ACT_BINADES)),
        ]
        srel = tw.payload.addr - ACT_SEG_BASE
        s_in = tw.valid & (tw.payload.addr >= ACT_SEG_BASE)
        seg_mems = []
        for j in range(SEG_WORDS):
            width = 3 if j == SEG_WORDS - 1 else 32
            mem = memory.Memory(shape=width, depth=S, init=[])
            m.submodules[f"seg_w{j}"] = mem
            wp = mem.write_port()
            m.d.comb += [wp.addr.eq(srel[4:4 + segw]), wp.data.eq(tw.payload.data[:width]),
                         wp.en.eq(s_in & (srel[0:4] == j))]
            seg_mems.append(mem)

        # --- stage 0 -> 1: decode, mantissa split, z, clamp, specials --------------------------
        x = self.i.payload.x
        sign = x[31]
        a = x[:31]
        e = a[23:31]
        man = a[:23]
        lz = lzc(m, man, name="man_lz")
        nlz = Signal(5)
        m.d.comb += nlz.eq(lz + 1)
        man_sh = Signal(46)
        m.d.comb += man_sh.eq(man << nlz)
        man_n = Signal(23)
        big_e = Signal(signed(10))
        m.d.comb += [
            man_n.eq(Mux(e == 0, man_sh[:23], man)),
            big_e.eq(Mux(e == 0, -126 - nlz, e - 127)),
        ]
        zexp = Signal(8)
        e_adj = Signal(signed(10))
        with m.Switch(pre):
            with m.Case(PRE_LOG):
                m.d.comb += [zexp.eq(Mux(man_n[22], 126, 127)), e_adj.eq(big_e + man_n[22])]
            with m.Case(PRE_EVEN):
                m.d.comb += [zexp.eq(Mux(big_e[0], 128, 127)), e_adj.eq(big_e - big_e[0])]
            with m.Default():
                m.d.comb += [zexp.eq(127), e_adj.eq(big_e)]
        direct = pre == PRE_DIRECT
        z0 = Signal(32)
        m.d.comb += z0.eq(Mux(direct, Mux(sym != 0, a, x), Cat(man_n, zexp, Const(0, 1))))
        znan = z0[:31] > INF
        zc0 = Signal(32)
        m.d.comb += zc0.eq(Mux(znan, 0, Mux(z0[:31] > ZCLAMP, Cat(Const(ZCLAMP, 31), z0[31]),
                                             z0)))
        # tiny_odd direction (golden.activation.evaluator._tiny_odd_down): x/2 exact -> the sign, a
        # midpoint of k = |x| >> 1 and k + 1 -> k's last bit
        ro_exact = (e[1:] != 0) | ~x[0]
        st1 = {
            "sign": sign, "z": z0, "zc": zc0, "h": direct & (sym == 0) & sign,
            "E": Mux(direct, 0, e_adj), "isnan": a > INF, "isinf": a == INF, "iszero": a == 0,
            "rodn": Mux(ro_exact, sign, x[1]),
        }
        r1 = {}
        for key, v in st1.items():
            reg = Signal(v.shape(), name=f"s1_{key}", reset_less=True)
            m.d.sync += reg.eq(v)
            r1[key] = reg
        v1 = Signal()
        m.d.sync += v1.eq(self.i.valid)
        zb = r1["z"][23:31]
        zm = r1["z"][:23]
        is_tiny = Signal()
        m.d.comb += is_tiny.eq(zb < bmin)

        # --- FMA helper ------------------------------------------------------------------------
        n_fma = [0]

        def fma(a_, b_, c_):
            u = FMA(cfg, formats_a=(FP32,), formats_b=(FP32,))
            m.submodules[f"fma{n_fma[0]}"] = u
            n_fma[0] += 1
            m.d.comb += [u.i.valid.eq(1), u.i.payload.a.eq(a_), u.i.payload.b.eq(b_),
                         u.i.payload.c.eq(c_)]
            return u.o.payload.result

        def dl(v, n, name):
            return delay(m, v, n, name=name)

        # T1: stage-1 values. FMA1: s at T1 + L.
        s = fma(r1["zc"], LOG2E, MAGIC)
        k = Signal(signed(11))
        m.d.comb += k.eq(s[:23] - 0x400000)
        kf = _to_fp32(m, k, 9, name="kf")
        k_r = Signal(signed(11), reset_less=True)
        nkf_r = Signal(32, reset_less=True)
        m.d.sync += [k_r.eq(k), nkf_r.eq(kf ^ NEG0)]          # T1 + L + 1

        # binade map read: address at T1, data at T1 + 1
        mr = map_mem.read_port(domain="sync")
        bi = Signal(signed(10))
        m.d.comb += bi.eq(zb - bmin)
        m.d.comb += mr.addr.eq(Cat(Mux(bi < 0, 0, Mux(bi > ACT_BINADES - 1, ACT_BINADES - 1,
                                                      bi[:6])), r1["h"]))
        map_d = dl(mr.data.as_value(), L, "map")             # T1 + L + 1
        mb = map_d[0:4]
        base = map_d[4:20]

        # segment select at T1 + L + 1, registered -> T1 + L + 2
        zb_d, zm_d, h_d = (dl(v, L + 1, n) for v, n in ((zb, "zb"), (zm, "zm"), (r1["h"], "h")))
        seg_bin = Signal(16)
        mb_sh = Signal(5)
        m.d.comb += [mb_sh.eq(23 - mb), seg_bin.eq(base + (zm_d >> mb_sh))]
        lo_k = Signal(signed(18))
        kcl = Signal(signed(18))
        m.d.comb += [
            lo_k.eq(kmin - 1),
            kcl.eq(Mux(k_r < lo_k, lo_k, Mux(k_r > kmax + 1, kmax + 1, k_r))),
        ]
        in_exp = Signal()
        m.d.comb += in_exp.eq(exp_en & (zb_d >= bmax))
        seg_c = Signal(segw)
        with m.If(in_exp):
            m.d.comb += seg_c.eq(exp_base + kcl - lo_k)
        with m.Elif(zb_d < bmin):
            m.d.comb += seg_c.eq(Mux(h_d, tiny[1], tiny[0]))
        with m.Elif(zb_d >= bmax):
            m.d.comb += seg_c.eq(Mux(h_d, big[1], big[0]))
        with m.Else():
            m.d.comb += seg_c.eq(seg_bin)
        seg = Signal(segw, reset_less=True)
        in_exp_r = Signal(reset_less=True)
        m.d.sync += [seg.eq(seg_c), in_exp_r.eq(in_exp)]       # T1 + L + 2
        t_seg = L + 2                                          # seg valid at T1 + t_seg

        def seg_read(j, at):
            """Segment word j of this element, valid at T1 + at (address one cycle before)."""
            rp = seg_mems[j].read_port(domain="sync")
            m.d.comb += rp.addr.eq(dl(seg, at - 1 - t_seg, f"sa{j}"))
            return rp.data

        # FMA3, FMA4: r1 at T1 + 2L + 1, r at T1 + 3L + 1
        zc_d = dl(r1["zc"], L + 1, "zc1")
        r_1 = fma(nkf_r, LN2_HI, zc_d)
        r_ = fma(dl(nkf_r, L, "nkf"), LN2_LO, r_1)
        t0 = 3 * L + 1
        centre = seg_read(0, t0)
        flags = seg_read(SEG_WORDS - 1, t0)
        v_sel = Mux(flags[0], r_, dl(r1["z"], t0, "z_t"))
        t = fma(v_sel, ONE, centre ^ NEG0)                     # T1 + 4L + 1
        p = None
        for i in range(1, ACT_DEGREE + 1):
            at = t0 + i * L
            cj = seg_read(1 + ACT_DEGREE - i, at)
            if p is None:
                p = seg_read(1 + ACT_DEGREE, at)
            p = fma(p, dl(t, (i - 1) * L, f"t{i}"), cj)
        tp = t0 + (ACT_DEGREE + 1) * L                         # p at T1 + tp
        # post A: mulx or E*ln2_lo; post B: E*ln2_hi
        fl_p = dl(flags, tp - t0, "flp")
        ef = dl(_to_fp32(m, r1["E"], 9, name="ef"), tp, "ef")
        zc_p = dl(r1["zc"], tp, "zcp")
        pa = fma(Mux(fl_p[2], p, Mux(log_add, ef, p)),
                 Mux(fl_p[2], zc_p, Mux(log_add, LN2_LO, ONE)),
                 Mux(fl_p[2], NEG0, Mux(log_add, p, NEG0)))
        ef_b = dl(ef, L, "efb")
        pb = fma(Mux(log_add, ef_b, pa), Mux(log_add, LN2_HI, ONE), Mux(log_add, pa, NEG0))
        assert n_fma[0] == N_FMA
        tq = tp + 2 * L                                        # pb at T1 + tq

        # scale by 2^PE with one RNE rounding (T1 + tq -> T1 + tq + 1)
        scale_k = dl(fl_p[1], 2 * L, "fls") & dl(in_exp_r, tq - t_seg, "inexp")
        k_q = dl(k_r, tq - (L + 1), "kq")
        e_q = dl(r1["E"], tq, "eq")
        eq2 = Signal(signed(12))
        m.d.comb += eq2.eq(e_q * q2)
        pe = Signal(signed(12))
        m.d.comb += pe.eq(Mux(scale_k, k_q, 0) + (eq2 >> 1))
        ps, pexp, pman = pb[31], pb[23:31], pb[:23]
        plz = lzc(m, pman, name="p_lz")
        sig = Signal(24)
        en = Signal(signed(10))
        psh = Signal(47)
        m.d.comb += psh.eq(pman << (plz + 1))
        m.d.comb += [
            sig.eq(Mux(pexp == 0, psh[:24], Cat(pman, Const(1, 1)))),
            en.eq(Mux(pexp == 0, -plz, pexp)),
        ]
        ne = Signal(signed(13))
        m.d.comb += ne.eq(en + pe)
        shamt = Signal(range(27))
        m.d.comb += shamt.eq(Mux(ne < -24, 26, 1 - ne))
        ext = Signal(50)
        m.d.comb += ext.eq(Cat(Const(0, 26), sig) >> shamt)
        kept = ext[26:50]
        rnd = ext[25]
        sticky = ext[:25] != 0
        sub = Signal(31)
        m.d.comb += sub.eq(kept + (rnd & (sticky | kept[0])))
        y0 = Signal(32)
        with m.If(pexp == 0xFF):
            m.d.comb += y0.eq(Mux(pman != 0, QNAN, pb))
        with m.Elif((pexp == 0) & (pman == 0)):
            m.d.comb += y0.eq(pb)
        with m.Elif(ne >= 255):
            m.d.comb += y0.eq(Cat(Const(0, 23), Const(0xFF, 8), ps))
        with m.Elif(ne >= 1):
            m.d.comb += y0.eq(Cat(sig[:23], ne[:8], ps))
        with m.Else():
            m.d.comb += y0.eq(Cat(sub, ps))
        y1 = Signal(32, reset_less=True)
        m.d.sync += y1.eq(y0)                                  # T1 + tq + 1

        # sign, specials (T1 + tq + 1 -> T1 + tq + 2 = output)
        d = tq + 1
        sgn, isnan, isinf, iszero, rodn = (dl(r1[n], d, f"{n}_o")
                                           for n in ("sign", "isnan", "isinf", "iszero", "rodn"))
        # tiny_odd: the tiny segment's RNE(x/2) becomes x/2 + 0 rounded to odd
        ro = tiny_odd & dl(is_tiny, d, "tiny_o")
        ro_mag = Signal(31)
        m.d.comb += ro_mag.eq((y1[:31] - rodn)[:31] | 1)
        y1r = Signal(32)
        m.d.comb += y1r.eq(Mux(ro, Cat(ro_mag, y1[31]), y1))
        y2 = Signal(32)
        m.d.comb += y2.eq(Mux((sym == 1) & sgn, y1r ^ NEG0, y1r))
        yout = Signal(32)
        with m.If(isnan | (neg_nan & sgn & ~iszero)):
            m.d.comb += yout.eq(QNAN)
        with m.Elif(iszero):
            m.d.comb += yout.eq(Mux(sgn, spec_n0, spec_p0))
        with m.Elif(isinf):
            m.d.comb += yout.eq(Mux(sgn, spec_ninf, spec_pinf))
        with m.Elif(y2[:31] > INF):
            m.d.comb += yout.eq(QNAN)
        with m.Else():
            m.d.comb += yout.eq(y2)
        yr = Signal(32, reset_less=True)
        m.d.sync += yr.eq(yout)
        m.d.comb += [self.o.payload.y.eq(yr),
                     self.o.valid.eq(dl(v1, d + 1, "valid"))]
        assert d + 2 == self.signature.latency, (d + 2, self.signature.latency)
        return m
