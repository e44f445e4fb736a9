# SPDX-License-Identifier: Apache-2.0
"""Runtime-selectable decode of a floating-point code into sign, integer significand and
LSB exponent (the *exact* layout shared by the multiplier, the fused adder and the FP32 adder)."""

from amaranth.hdl import Module, Shape, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import FPFormat

__all__ = ["exact_layout", "wider_exact_layout", "select_exact", "exp_range", "check_formats",
           "Unpack"]


def exact_layout(sig_width, exp_shape):
    """Layout of an exact (unrounded) floating-point value.

    Value ``(-1)**sign * sig * 2**exp`` unless a flag is set. Fields, LSB first: ``sign`` (1),
    ``sig`` (``unsigned(sig_width)``, integer significand, not normalized), ``exp``
    (``exp_shape``, signed exponent of the significand's LSB), ``is_zero``, ``is_inf``,
    ``is_nan`` (1 bit each; at most one is set; ``sig``/``exp`` are meaningless for Inf/NaN,
    ``sig`` is 0 for zero).
    """
    return data.StructLayout({
        "sign": 1, "sig": sig_width, "exp": Shape.cast(exp_shape),
        "is_zero": 1, "is_inf": 1, "is_nan": 1,
    })


def wider_exact_layout(a, b):
    """The :func:`exact_layout` that holds every value of the exact layouts ``a`` and ``b``
    (the wider ``sig``, the wider signed ``exp``)."""
    return exact_layout(max(a["sig"].width, b["sig"].width),
                        signed(max(a["exp"].width, b["exp"].width)))


def select_exact(m, sel, a, b, layout, *, name):
    """A ``layout`` signal holding the exact value ``a`` when ``sel`` is high, else ``b``
    (field by field: ``sig`` zero-extended, ``exp`` sign-extended)."""
    w = Signal(layout, name=name)
    for f in ("sign", "sig", "exp", "is_zero", "is_inf", "is_nan"):
        m.d.comb += w[f].eq(Mux(sel, a[f], b[f]))
    return w


def exp_range(fmt):
    """``(lo, hi)``: smallest and largest LSB exponent of a finite code of ``fmt``."""
    return 1 - fmt.bias - fmt.man_bits, fmt.exp_max_code - fmt.bias - fmt.man_bits


def check_formats(arg, formats, cfg=None):
    """``formats`` as a non-empty tuple of :class:`FPFormat` (names resolved with ``cfg.fmt``);
    ``TypeError``/``ValueError`` naming ``arg`` otherwise."""
    if isinstance(formats, (str, FPFormat)) or not isinstance(formats, (tuple, list)) \
            or not formats:
        raise TypeError(f"{arg} must be a non-empty tuple of FPFormat or format names, "
                        f"not {formats!r}")
    out = []
    for f in formats:
        if isinstance(f, str):
            if cfg is None:
                raise TypeError(f"{arg} entries must be FPFormat objects, not {f!r}")
            f = cfg.fmt(f)
        if not isinstance(f, FPFormat):
            raise TypeError(f"{arg} entries must be FPFormat or format names, not {f!r}")
        if not f.is_fp32_subset:
            raise ValueError(f"{arg} entries must be subsets of FP32, not {f!r}")
        out.append(f)
    if len({f.name for f in out}) != len(out):
        raise ValueError(f"{arg} must not repeat a format, not {tuple(f.name for f in out)}")
    return tuple(out)


class Unpack(wiring.Component):
    """Combinational decode of a code of one of ``formats``, chosen at run time by ``fmt``.

    Parameters
    ----------
    formats : tuple of FPFormat
        Formats that ``fmt`` selects from (``fmt == k`` decodes ``formats[k]``; an index
        ``>= len(formats)`` decodes ``formats[-1]``).

    Members
    -------
    code : In(max width of formats)
        The code, right-aligned (only the low ``formats[fmt].width`` bits are read).
    fmt : In(range(len(formats)))
        Format select (zero bits wide for a single format).
    o : Out(exact_layout)
        ``sign``; ``sig`` = mantissa field with the hidden bit (subnormals unnormalized, width
        ``max(man_bits) + 1``); ``exp`` = exponent of ``sig``'s LSB; ``is_zero``/``is_inf``/
        ``is_nan``. Latency 0 (combinational).
    """

    class Signature(wiring.Signature):
        """The decoder's members for ``formats``, with ``formats``, ``code_width``,
        ``sig_width`` and ``layout`` (the exact layout of ``o``) as attributes."""

        def __init__(self, formats):
            self.formats = check_formats("formats", formats)
            self.code_width = max(f.width for f in self.formats)
            self.sig_width = max(f.man_bits for f in self.formats) + 1
            lo = min(exp_range(f)[0] for f in self.formats)
            hi = max(exp_range(f)[1] for f in self.formats)
            self.layout = exact_layout(self.sig_width, range(min(lo, -1), hi + 1))
            super().__init__({
                "code": In(self.code_width), "fmt": In(range(len(self.formats))),
                "o": Out(self.layout),
            })

    latency = 0

    def __init__(self, formats):
        super().__init__(self.Signature(formats))
        self.formats = self.signature.formats

    def _decode(self, m, fmt):
        o = self.o
        M, EB = fmt.man_bits, fmt.exp_bits
        code = self.code[:fmt.width]
        e, man = code[M:M + EB], code[:M]
        sub = e == 0
        top = (1 << EB) - 1
        m.d.comb += [
            o.sign.eq(code[fmt.width - 1]),
            o.sig.eq(Mux(sub, man, man | (1 << M))),
            o.exp.eq(Mux(sub, 1, e) - (fmt.bias + M)),
            o.is_zero.eq(sub & (man == 0)),
        ]
        if fmt.specials == "ieee":
            m.d.comb += [o.is_inf.eq((e == top) & (man == 0)),
                         o.is_nan.eq((e == top) & (man != 0))]
        elif fmt.specials == "fn":
            m.d.comb += o.is_nan.eq((e == top) & (man == (1 << M) - 1))

    def elaborate(self, platform):
        m = Module()
        if len(self.formats) == 1:
            self._decode(m, self.formats[0])
            return m
        # Several formats: the select only picks raw fields (the exponent field, the mantissa,
        # the sign, the hidden bit's place, the per-format constant and special-value tests of
        # the raw field); then one subtractor and one zero test serve every format (about three
        # quarters of the area of one full decoder per format behind a multiplexer, and one
        # ``case`` for a simulator). Bit for bit :meth:`_decode` of the selected format
        # (tests/test_fp_arith.py proves it).
        fs, o, n = self.formats, self.o, len(self.formats)
        sw = self.signature.sig_width
        e = Signal(max(f.exp_bits for f in fs))
        man = Signal(sw - 1)
        hidden = Signal(sw)
        const = Signal(range(max(f.bias + f.man_bits for f in fs) + 1))
        top, inf_ok, fn_nan = Signal(), Signal(), Signal()
        with m.Switch(self.fmt):
            for k, f in enumerate(fs):
                with (m.Case(k) if k < n - 1 else m.Default()):
                    M, EB = f.man_bits, f.exp_bits
                    m.d.comb += [
                        o.sign.eq(self.code[f.width - 1]),
                        e.eq(self.code[M:M + EB]),
                        man.eq(self.code[:M]),
                        hidden.eq(1 << M),
                        const.eq(f.bias + M),
                        top.eq(self.code[M:M + EB].all()),
                    ]
                    if f.specials == "ieee":
                        m.d.comb += inf_ok.eq(1)
                    elif f.specials == "fn":
                        m.d.comb += fn_nan.eq(self.code[:M].all())
        sub, man0 = e == 0, man == 0
        m.d.comb += [
            o.sig.eq(man | Mux(sub, 0, hidden)),
            o.exp.eq(Mux(sub, 1, e) - const),
            o.is_zero.eq(sub & man0),
            o.is_inf.eq(inf_ok & top & man0),
            o.is_nan.eq(top & ((inf_ok & ~man0) | fn_nan)),
        ]
        return m
