# SPDX-License-Identifier: Apache-2.0
"""``make sim``: the demo of everything that exists, with cycle counts."""

from rtl.config import preset_from_env
from tb import demo_formats


def main():
    cfg = preset_from_env()
    demo_formats.main(cfg)
    from tb import demo_tensor
    demo_tensor.main(cfg)
    from tb import demo_sparse
    demo_sparse.main(cfg)


if __name__ == "__main__":
    main()
