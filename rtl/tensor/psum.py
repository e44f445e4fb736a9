# SPDX-License-Identifier: Apache-2.0
"""PSUM: banks of FP32 accumulators with overwrite / accumulate writes and a read-out port."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Signal, Mux, Cat, Instance, ClockSignal, ResetSignal
from amaranth.lib import data, memory
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.fp.adder import FP32Adder
from rtl.mem.arbiter import BankArbiter
from rtl.mem.port import PSUM as MEM_PSUM, RowPort
from rtl.pipeline import Pipeline, PipelineSignature
from rtl.tensor.layouts import config_tag

__all__ = ["PsumUnit", "psum_adder_module_name", "ENGINE_ROW_PORTS"]

#: PSUM row ports the tensor engine exposes (members ``psum_<name>``): the vector and scalar
#: engines' read/write access (docs/architecture.md §4.2).
ENGINE_ROW_PORTS = ("vector", "scalar")
#: Member names a row port may not take.
_RESERVED = ("i", "rd", "busy", "we")


def psum_adder_module_name(cfg: CoreConfig) -> str:
    """Verilog module name of the separately converted PSUM :class:`FP32Adder`."""
    return f"nc_psadd_{config_tag(cfg)}"


class PsumUnit(Pipeline):
    """``psum_banks x psum_bank_fp32`` entries of ``pe_cols`` FP32 lanes (lane m = partition m).

    One result beat (all lanes of one ``n``) is accepted per cycle. Pipeline: cycle 0 accepts
    the beat and reads the old entry (synchronous read); cycle 1 feeds ``pe_cols``
    :class:`~rtl.fp.adder.FP32Adder` (``add_fp32(old, new)``, RNE, canonical NaN); cycle
    ``1 + adder latency`` writes either the sum (``acc``) or the new value (overwrite) into the
    lanes selected by ``mask`` (lanes ``m >= M`` are never written). Every beat takes the same
    path, so writes land in arrival order.

    A read-after-write hazard (an accumulating beat whose address is still in the pipeline) holds
    ``i.ready`` low until that write has landed; nothing else ever stalls the input.

    Storage: one :class:`amaranth.lib.memory.Memory` per bank (``bank<b>``, ``psum_bank_fp32``
    entries of ``pe_cols`` x 32 bits, byte-enabled), each with the accumulate read port, the
    write port and the read-out port ``rd``.

    **Row ports** (docs/memory.md §6; one per name in ``row_ports``, e.g. the vector and scalar
    engines): :class:`~rtl.mem.port.RowPort` ``"psum"`` requests (``addr`` = FP32 entry index
    ``bank * psum_bank_fp32 + entry``; lane p = partition p, lanes ``p >= pe_cols`` read 0 and
    are not written) that share the bank's accumulate read port and write port with the tensor
    engine. **The tensor engine wins:** a row request to bank b is granted only in a cycle in
    which no tensor beat for bank b is offered on ``i`` or in the pipeline; row ports requesting
    the same free bank are served round-robin; different banks in the same cycle. A row read
    granted in cycle *t* has its data on ``rsp`` in cycle *t* + ``row_latency`` (1); a row write
    lands at the end of its grant cycle.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        True (default): the lane adders are ``Instance(psum_adder_module_name(cfg))`` of one
        separately converted :class:`FP32Adder`; False: Amaranth submodules.
    row_ports : tuple of str
        Names of the row ports (members ``<name>``); none by default.

    Members
    -------
    i : In(stream.Signature(in_layout))
        Write beats: ``addr`` (``bank * psum_bank_fp32 + n``), ``acc``, ``mask`` (``pe_cols``
        bits), ``value`` (``ArrayLayout(32, pe_cols)``). A beat is taken in a cycle with
        ``i.valid & i.ready``; ``i.ready`` is combinational from registers and the payload and
        never depends on ``i.valid``.
    rd : Out(memory.ReadPort.Signature(addr_width, ArrayLayout(32, pe_cols)))
        Read-out port, as a synchronous memory read port: ``rd.data`` shows the entry at
        ``rd.addr`` one cycle after a cycle with ``rd.en`` (and holds while ``rd.en`` is low).
    busy : Out(1)
        A beat is in the pipeline (not yet written).
    we : Out(1)
        A write lands this cycle (for benchmarks).
    <name> : In(RowPort.Signature(cfg, "psum"))
        One per row port.
    """

    class Signature(PipelineSignature):
        """Layouts and write latency of a :class:`PsumUnit` (attributes ``depth``, ``lanes``,
        ``in_layout``, ``latency``: cycles from an accepted beat to its write, which lands at
        the end of that cycle; ``row_ports`` and ``row_latency``: row read grant -> data)."""

        def __init__(self, cfg: CoreConfig, *, row_ports=()):
            check_config(cfg, "PsumUnit")
            C = cfg.pe_cols
            self.depth = cfg.psum_banks * cfg.psum_bank_fp32
            self.lanes = data.ArrayLayout(32, C)
            for n in row_ports:
                if not isinstance(n, str) or not n.isidentifier() or n in _RESERVED:
                    raise ValueError(f"PsumUnit row port names must be identifiers other than "
                                     f"{_RESERVED!r}, not {n!r}")
            if len(set(row_ports)) != len(row_ports):
                raise ValueError(f"PsumUnit row port names must be unique, not {row_ports!r}")
            self.row_ports = tuple(row_ports)
            self.row_latency = 1
            #: An accumulating beat is not accepted (``i.ready`` low) while a beat with its
            #: address, accepted in one of the last ``hazard_window`` cycles, is still in the
            #: pipeline (the read-after-write hazard).
            self.hazard_window = 1 + FP32Adder.Signature(cfg).latency
            in_layout = data.StructLayout({"addr": range(self.depth), "acc": 1, "mask": C,
                                           "value": self.lanes})
            rd = memory.ReadPort.Signature(addr_width=(self.depth - 1).bit_length(),
                                           shape=self.lanes)
            members = {"rd": Out(rd), "busy": Out(1), "we": Out(1)}
            members.update({n: In(RowPort.Signature(cfg, MEM_PSUM)) for n in row_ports})
            super().__init__(in_layout, None, ready=True,
                             latency=1 + FP32Adder.Signature(cfg).latency, members=members)

    def __init__(self, cfg: CoreConfig, *, use_instances=True, row_ports=()):
        super().__init__(self.Signature(cfg, row_ports=row_ports))
        self.use_instances = use_instances
        self.cfg = cfg
        self.depth = self.signature.depth
        self.lanes = self.signature.lanes

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        C, P, NB, B = cfg.pe_cols, cfg.partitions, cfg.psum_banks, cfg.psum_bank_fp32
        EB = (B - 1).bit_length()                  # entry bits inside a bank

        def bank_of(a):
            return a[EB:] if NB > 1 else 0

        def entry_of(a):
            return a[:EB] if EB else 0

        A = FP32Adder.Signature(cfg).latency
        i = self.i.payload

        fire = Signal()
        m.d.comb += fire.eq(self.i.valid & self.i.ready)
        st = Signal(self.in_layout, name="s1")
        sv = Signal(name="s1_valid")
        m.d.sync += [st.eq(i), sv.eq(fire)]
        stages = [(sv, st)]
        for j in range(A):
            r, rv = Signal(self.in_layout, name=f"d{j}"), Signal(name=f"d{j}_valid")
            m.d.sync += [r.eq(stages[-1][1]), rv.eq(stages[-1][0])]
            stages.append((rv, r))
        wv, ws = stages[-1]

        # --- row ports: round-robin per bank, only while the tensor leaves the bank alone ----
        rows = [getattr(self, n) for n in self.signature.row_ports]
        rgrant = [[] for _ in rows]                # rgrant[j][b]
        tensor_on = []
        for b in range(NB):
            on = Signal(name=f"tensor_on{b}")
            m.d.comb += on.eq((self.i.valid & (bank_of(i.addr) == b))
                              | Cat(*[v & (bank_of(s.addr) == b) for v, s in stages]).any())
            tensor_on.append(on)
            if rows:
                arb = BankArbiter(0, len(rows), 1)
                _, g = arb.build(m, [], [r.req.valid & (bank_of(r.req.payload.addr) == b)
                                         for r in rows], name=f"psum_bank{b}", hold=on)
                for j in range(len(rows)):
                    rgrant[j].append(g[j])
        for j, r in enumerate(rows):
            m.d.comb += r.req.ready.eq(Cat(*rgrant[j]).any())

        # --- the banks ----------------------------------------------------------------------
        res = [Signal(32, name=f"sum_{c}") for c in range(C)]
        acc_data, out_data = [], []
        for b in range(NB):
            mem = memory.Memory(shape=32 * C, depth=B, init=[])
            m.submodules[f"bank{b}"] = mem
            rp = mem.read_port(domain="sync")      # accumulate read / row reads
            op = mem.read_port(domain="sync")      # read-out (rd)
            wp = mem.write_port(granularity=8)
            acc_data.append(rp.data)
            out_data.append(op.data)
            t_rd = self.i.valid & (bank_of(i.addr) == b)
            t_wr = wv & (bank_of(ws.addr) == b)
            r_addr, r_en, w_en, w_data = entry_of(i.addr), t_rd, 0, 0
            for j, r in enumerate(rows):
                g, q = rgrant[j][b], r.req.payload
                r_addr = Mux(g, entry_of(q.addr), r_addr)
                r_en = r_en | (g & ~q.we)
                be = Cat(*[Mux(q.mask[c], q.be, 0) for c in range(C)])
                w_en = w_en | Mux(g & q.we, be, 0)
                w_data = w_data | Mux(g, Cat(*[q.wdata[c] for c in range(C)]), 0)
            sums = [Mux(ws.acc, res[c], ws.value[c]) for c in range(C)]
            t_en = Cat(*[Mux(ws.mask[c], 0xF, 0) for c in range(C)])
            m.d.comb += [
                rp.addr.eq(r_addr), rp.en.eq(r_en),
                wp.addr.eq(Mux(t_wr, entry_of(ws.addr), r_addr)),
                wp.data.eq(Mux(t_wr, Cat(*sums), w_data)),
                wp.en.eq(Mux(t_wr, t_en, w_en)),
                op.addr.eq(entry_of(self.rd.addr)),
                op.en.eq(self.rd.en & (bank_of(self.rd.addr) == b)),
            ]

        # the old entry of the beat in stage 1 (read from its bank in the cycle it was taken)
        s1_bank = Signal(range(max(2, NB)), name="s1_bank")
        m.d.sync += s1_bank.eq(bank_of(i.addr))
        old = data.View(self.lanes, Array(acc_data)[s1_bank] if NB > 1 else acc_data[0])
        self._adders(m, old, st, sv, res)
        rd_bank = Signal(range(max(2, NB)), name="rd_bank")
        with m.If(self.rd.en):
            m.d.sync += rd_bank.eq(bank_of(self.rd.addr))
        m.d.comb += self.rd.data.eq(Array(out_data)[rd_bank] if NB > 1 else out_data[0])

        # row read responses (latency 1)
        for j, r in enumerate(rows):
            rv = Signal(name=f"row{j}_rv")
            rb = Signal(range(max(2, NB)), name=f"row{j}_rbank")
            m.d.sync += [rv.eq(r.req.valid & r.req.ready & ~r.req.payload.we),
                         rb.eq(bank_of(r.req.payload.addr))]
            word = data.View(self.lanes, Array(acc_data)[rb] if NB > 1 else acc_data[0])
            m.d.comb += r.rsp.valid.eq(rv)
            m.d.comb += [r.rsp.payload[p].eq(word[p] if p < C else 0) for p in range(P)]

        m.d.comb += self.we.eq(wv)
        hazard = Signal()
        m.d.comb += hazard.eq(i.acc & Cat(*[v & (s.addr == i.addr)
                                            for v, s in stages]).any())
        m.d.comb += [
            self.i.ready.eq(~hazard),
            self.busy.eq(Cat(*[v for v, _ in stages]).any()),
        ]
        return m

    def _adders(self, m, old, st, sv, sums):
        """The ``pe_cols`` lane adders ``sums[c] = old[c] + new[c]`` of the beat in stage 1."""
        for c, res in enumerate(sums):
            if self.use_instances:
                m.submodules[f"add_{c}"] = Instance(
                    psum_adder_module_name(self.cfg), i_clk=ClockSignal(), i_rst=ResetSignal(),
                    i_i__valid=sv, i_i__payload=Cat(old[c], st.value[c]), o_o__payload=res)
            else:
                add = FP32Adder(self.cfg)
                m.submodules[f"add_{c}"] = add
                m.d.comb += [add.i.valid.eq(sv), add.i.payload.a.eq(old[c]),
                             add.i.payload.b.eq(st.value[c]), res.eq(add.o.payload.result)]
