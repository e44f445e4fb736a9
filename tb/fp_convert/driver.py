# SPDX-License-Identifier: Apache-2.0
"""The conversion testbenches' checker: stream fields through the unit, compare with golden."""

from tb.fp.build import DEPTH, signature
from tb.fp.driver import PipelineTB


class StreamChecker(PipelineTB):
    """A :class:`~tb.fp.driver.PipelineTB` of ``unit`` that compares ``out_field`` with golden.

    Parameters
    ----------
    dut : cocotb handle of the harness top.
    unit : ``"convert"`` or ``"widen"`` (see :mod:`tb.fp.build`).
    out_field : name of the output field compared.
    """

    def __init__(self, dut, unit, out_field):
        from tb import env
        p = env.params()
        super().__init__(dut, signature(unit, env.config(), p), unit,
                         depth=p.get("depth", DEPTH))
        self.formats = self.signature.formats
        self.out_field = out_field

    async def check(self, what, want, describe, bubbles=False, **fields):
        """Run one stream (``fields`` = numpy arrays per input field), compare with ``want``."""
        out = await self.stream(what, bubbles=bubbles, **fields)
        self.check_equal(f"{what} (bubbles={bubbles})", out[self.out_field], want, describe)
