# SPDX-License-Identifier: Apache-2.0
"""The ScalarDecoder (rtl/core/engine_decode.py) on act instructions from the assembler: every
field the ScalarEngine needs, for activation with a per-partition scale and for
act_table_load (only ap1 and func; its unused APs are not checked, the AP flags are 0)."""

from amaranth.sim import Simulator

from golden.asm import parse_instr
from rtl import isa
from rtl.config import get_preset
from rtl.core.engine_decode import ScalarDecoder

CFG = get_preset("small")


def _decode(text):
    dut = ScalarDecoder(CFG)
    res = {}

    async def bench(ctx):
        ctx.set(dut.issue.payload.raw, int.from_bytes(isa.encode(parse_instr(text)), "little"))
        ctx.set(dut.issue.valid, 1)
        ctx.set(dut.instr.ready, 1)
        ctx.set(dut.done.ready, 1)
        res["valid"] = ctx.get(dut.instr.valid)
        res["instr"] = ctx.get(dut.instr.payload)
        await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return res["valid"], res["instr"]


def test_activation_scale_ap():
    ok, i = _decode("activation ap0=sbuf.fp32[0:2]@0x40{1x8} ap1=sbuf.bf16[0:2]@0x80{1x8} "
                    "ap2=psum.bf16[0:2]@0x10{1x1} func=3 reduce_cmd=2 scale_ap=1 bias=0.5")
    assert ok
    assert (i.opcode, i.func, i.reduce_cmd, i.scale_src, i.bias_src) == (0x30, 3, 2, 1, 0)
    assert (i.scale_ap.mem, i.scale_ap.offset, i.scale_ap.count, i.scale_dtype) == (2, 0x10, 2, 2)
    assert (i.dst_dtype, i.src_dtype, i.bias) == (0, 2, 0x3F000000)


def test_act_table_load():
    ok, i = _decode("act_table_load ap1=sbuf.fp32[1:1]@0x100{1x201} func=2")
    assert ok
    assert (i.opcode, i.func, i.scale_src, i.bias_src) == (0x31, 2, 0, 0)
    assert (i.src.mem, i.src.start, i.src.count, i.src.offset, i.src_dtype) == (1, 1, 1, 0x100, 0)
    assert (i.src.dims[0].step, i.src.dims[0].num) == (1, 201)
