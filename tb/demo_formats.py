# SPDX-License-Identifier: Apache-2.0
"""``python -m tb.demo_formats``: number formats through the RTL, printed as a readable report."""

import json

from rtl.config import preset_from_env
from tb.fp import build as fp_build
from tb.fp.tb_fp_demo import demo_params


def _run(cfg, unit):
    """Build ``unit``, run its demo test case, return the JSON summary it wrote."""
    params = demo_params(cfg, unit)
    sim = fp_build.sim(unit, cfg, params)
    out = sim.build_dir / f"demo_{unit}.json"
    sim.run("tb.fp.tb_fp_demo", testcase=f"{unit}_demo", params={**params, "out": str(out)})
    return json.loads(out.read_text())


def main(cfg=None):
    cfg = cfg or preset_from_env()
    print(f"== Number formats through the RTL (preset '{cfg.name}') ==")
    r = _run(cfg, "convert")
    print(f"\nFP32 -> narrow conversion, round to nearest even (ConvertFromFP32, "
          f"latency {r['latency']} cycles):")
    print("  " + f"{'fp32 input':>14}" + "".join(f"{row['format']:>14}" for row in r["rows"]))
    for i, v in enumerate(r["values"]):
        print("  " + f"{v:>14.7g}" + "".join(f"{row['rne'][i]:>14.7g}" for row in r["rows"]))
    s = r["sr"]
    print(f"\nStochastic rounding of 1/3 to {s['format']}, {s['draws']} draws (XORWOW, seed "
          f"{cfg.sr_seed:#x}): values {s['distinct']}, mean {s['mean']:.7f} "
          f"(RNE gives {s['rne']:.7f}, exact 0.3333333); {s['draws']} conversions in "
          f"{s['cycles']} cycles")
    print(f"  bit-exact against golden: {'yes' if r['bit_exact'] else 'NO'}")

    r = _run(cfg, "fma")
    print(f"\nFused MAC c + a*b (one rounding), {r['format']} inputs, FP32 accumulate: "
          f"{r['ops']} ops in {r['cycles']} cycles (latency {r['latency']}, "
          f"{r['ops'] / r['cycles']:.2f} ops/cycle); bit-exact against golden: "
          f"{'yes' if r['bit_exact'] else 'NO'}")


if __name__ == "__main__":
    main()
