# SPDX-License-Identifier: Apache-2.0
"""The kernel builder's dependency tracking: the semaphore waits and posts inferred from what
each operation reads and writes, hand-made instructions and descriptors, and the build."""

from __future__ import annotations

from golden import dma as gdma
from golden.asm import format_instr
from golden.kernel.checks import operation
from golden.kernel.types import ENGINE_OF, DramRect, DramTensor, KernelProgram, Tile
from rtl.isa import ENGINES, Instr, encode

__all__ = ["Dependencies"]


class Dependencies:
    """Dependency tracking and the build of :class:`golden.kernel.Kernel`."""

    @staticmethod
    def _res(x):
        if isinstance(x, DramTensor):
            return ("dram", x.name)
        if isinstance(x, Tile):
            return ("tile", x.uid)
        return ("key", x)

    def _keys(self, x):
        """The resource keys an access to ``x`` touches. A DRAM tensor is tracked by the
        rectangles loads and stores touch (a whole-tensor access is its full rectangle): an
        access touches its own rectangle's key and every overlapping one's, so stores of
        disjoint output tiles do not wait for one another, and anything that overlaps still
        does."""
        if isinstance(x, DramTensor):
            x = DramRect(x, 0, 0, *x.shape)
        if isinstance(x, DramRect):
            name, r = x.tensor.name, (x.row0, x.col0, x.row0 + x.rows, x.col0 + x.cols)
            rects = self._dram_rects.setdefault(name, {})
            rects[r] = None
            return [("dram", name) + q for q in rects
                    if q[0] < r[2] and r[0] < q[2] and q[1] < r[3] and r[1] < q[3]]
        return [self._res(x)]

    def _emit(self, issuer, stream, reads, writes, make):
        """Record one operation: waits from its dependencies, then ``make(wait, post)`` gives
        what is appended to ``issuer``'s program."""
        deps = {}

        def need(dep):
            if dep and dep[0] != stream:
                deps[dep[0]] = max(deps.get(dep[0], 0), dep[1])
        reads = [r for x in reads for r in self._keys(x)]
        writes = [r for x in writes for r in self._keys(x)]
        for r in reads:
            need(self._writer.get(r))
        for r in writes:
            need(self._writer.get(r))
            for s, k in self._readers.get(r, {}).items():
                need((s, k))
        waited = self._waited[issuer]
        waits = [(s, k) for s, k in sorted(deps.items(), key=str) if waited.get(s, 0) < k]
        for s, k in deps.items():
            waited[s] = max(waited.get(s, 0), k)
        for s, k in waits:
            if isinstance(s, str):              # that engine instruction must post
                self._posting.setdefault(s, set()).add(k)
        label = self._op_label or "instruction"
        for w in waits[:-1]:
            self._ops[issuer].append((None, w, None, label))
        self._count[stream] = self._count.get(stream, 0) + 1
        me = (stream, self._count[stream])
        self._ops[issuer].append((make, waits[-1] if waits else None, me, label))
        for r in writes:
            self._writer[r] = me
            self._readers[r] = {}
        for r in reads:
            self._readers.setdefault(r, {})[stream] = self._count[stream]

    def _wait_value(self, dep):
        """``(semaphore, value)`` of a dependency ``(stream, k)``: an engine posts only the
        instructions someone waits for, so ``k`` becomes the number of its posting
        instructions up to and including its ``k``-th (which posts); a DMA queue posts every
        descriptor."""
        if dep is None:
            return None
        s, k = dep
        if isinstance(s, str):
            return self._sem(s), sum(1 for j in self._posting.get(s, ()) if j <= k)
        return self._sem(s), k

    def _post_of(self, me):
        """The post of the operation ``me = (stream, k)``: ``(sem, 1)`` for every descriptor
        and for an engine instruction some later operation waits for, else ``None``."""
        s, k = me
        if isinstance(s, str) and k not in self._posting.get(s, ()):
            return None
        return self._sem(s), 1

    def _sem(self, stream):
        if isinstance(stream, str):
            return ENGINES.index(stream)
        e, q = stream
        return len(ENGINES) + e * self.cfg.dma_queues + q


    @operation("instr")
    def instr(self, ins, reads=(), writes=(), engine=None):
        """Append a ready-made :class:`rtl.isa.Instr` (its ``wait`` and ``post`` are replaced)
        to ``engine``'s program (default: the opcode's engine), with the resources it reads and
        writes: tiles, DRAM tensors, or any hashable key (e.g. ``("sbuf", region)``) for
        hand-written APs. ``dma_start`` is not accepted here (use :meth:`descriptor`)."""
        eng = engine or ENGINE_OF.get(ins.op)
        if ins.op == "load_stationary":
            self._pe_loaded = None
        if eng not in ENGINES or ins.op == "dma_start" or \
                ENGINE_OF.get(ins.op) not in (None, eng):
            raise ValueError(f"instr: {ins.op} cannot be issued on engine {eng!r} here")
        self._emit(eng, eng, list(reads), list(writes),
                   lambda w, p: Instr(op=ins.op, flags=ins.flags, wait=w, post=p, irq=ins.irq,
                                      aps=dict(ins.aps), imm=dict(ins.imm)))

    @operation("descriptor")
    def descriptor(self, desc, reads=(), writes=(), queue=None):
        """One hand-made DMA descriptor (its ``post``, ``sem`` and ``inc`` are replaced) through
        ``dma_start`` on the sync engine, with the resources it reads and writes."""
        eq = self._queue(queue)

        def make(wait, post):
            kw = {f: getattr(desc, f) for f in ("src", "dst", "src_space", "dst_space", "dims",
                                                "op", "src_dtype", "dst_dtype", "rounding",
                                                "reserved")}
            return ("dma", gdma.Descriptor(**kw, post=True, sem=post[0], inc=1), eq, wait)
        self._emit("sp", eq, list(reads), list(writes), make)

    def output(self, name, where):
        """Name where a result lives (a :class:`DramTensor` or a dict of tiles)."""
        self.outputs[name] = where

    # --- build -------------------------------------------------------------------------------
    def emitted(self):
        """``{engine: instructions emitted so far}`` (each operation and each extra wait is one
        instruction of its engine's program)."""
        return {e: len(lst) for e, lst in self._ops.items()}

    def build(self):
        """The :class:`KernelProgram`: descriptors placed after the tensors, every engine's
        program encoded."""
        img = bytearray(self.dram)
        top = -(-self._dram_top // gdma.DESC_BYTES) * gdma.DESC_BYTES
        programs, listing, labels = {}, {}, {}
        for e, lst in self._ops.items():
            enc = []
            labels[e] = []
            for make, dep, me, label in lst:
                labels[e].append(label)
                wait = self._wait_value(dep)
                x = Instr(op="nop", wait=wait) if make is None else make(wait, self._post_of(me))
                if isinstance(x, tuple):
                    _, desc, (de, q), wait = x
                    labels.setdefault(f"dma{de}.q{q}", []).append(label)
                    if top + gdma.DESC_BYTES > len(img):
                        raise ValueError(f"descriptors do not fit in dram_bytes = {len(img)}")
                    img[top:top + gdma.DESC_BYTES] = desc.pack()
                    x = Instr(op="dma_start", wait=wait, imm={
                        "engine": de, "queue": q, "count": 1,
                        "desc_addr": self.dram_base + top})
                    top += gdma.DESC_BYTES
                enc.append(x)
            programs[e] = b"".join(encode(i) for i in enc)
            listing[e] = "\n".join(format_instr(i) for i in enc)
        return KernelProgram(programs, img, self.dram_base, dict(self.tensors),
                             dict(self.outputs), listing, top, labels)

