# SPDX-License-Identifier: Apache-2.0
"""``make verilog``: write the generated Verilog of every registered block for one preset.

Blocks are listed once, in ``synth/blocks.py`` (the registry ``make synth`` reports); this writes
``build/<preset>/verilog/<block>.v`` for each (one file per variant) and ``config.json`` beside
them, the config the Verilog was generated from. Identical processing elements are emitted once
and instantiated by name, so even the 128x128 array stays a small file.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from rtl.config import parse_config, preset_from_env
from rtl.emit import write_if_changed

ROOT = Path(__file__).resolve().parent.parent


def generate(cfg, out_dir=None):
    """Emit every available block of ``cfg``; returns ``[(file, seconds)]``."""
    from rtl.emit import emit_verilog
    from synth.blocks import BLOCKS, is_available
    out_dir = Path(out_dir or ROOT / "build" / cfg.name / "verilog")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    written = []
    for block in BLOCKS:
        if not is_available(block):
            continue
        variants = block.variants(cfg) if block.variants else (None,)
        for v in variants:
            name = block.name if v is None else f"{block.name}_{v}"
            t0 = time.monotonic()
            text = emit_verilog(block.build(cfg, v), name)
            path = out_dir / f"{name}.v"
            write_if_changed(path, text)
            written.append((path, time.monotonic() - t0))
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", help="preset, preset:field=value,... or TOML file "
                    "(rtl.config.parse_config; default: $CONFIG or 'default')")
    args = ap.parse_args(argv)
    cfg = parse_config(args.config) if args.config else preset_from_env()
    for path, secs in generate(cfg):
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size / 1024:8.1f} KiB  "
              f"{secs:5.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
