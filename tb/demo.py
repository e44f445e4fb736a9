# SPDX-License-Identifier: Apache-2.0
"""``make sim``: kernels on the whole core (``tb/core/sim.py``), the data-parallel step on the
multi-core top (``tb/multicore/run_kernel.py``), then the blocks' demos (number
formats through the RTL, GEMMs on the tensor engine, sparsity), with cycle counts."""

from rtl.config import preset_from_env
from tb import demo_formats


def main():
    cfg = preset_from_env()
    from tb.core import sim as core
    core.main(cfg)
    from tb.multicore import run_kernel as multicore
    multicore.sim_main()            # small cores, whatever CONFIG
    demo_formats.main(cfg)
    from tb import demo_tensor
    demo_tensor.main(cfg)
    from tb import demo_sparse
    demo_sparse.main(cfg)


if __name__ == "__main__":
    main()
