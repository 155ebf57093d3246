"""Does switching CUPTI's kernel records off leave a cost behind? In one
process, cycles of blocks of training steps (the launch-bound loop of
session_cost.py) through raw CUPTI (cupti_floor.c):

  plain     CUPTI detached (before the first cycle, or after cuptiFinalize)
  attached  CUPTI attached, launch and copy callbacks that only count
  records   ... and kernel records on
  after     ... kernel records switched off again (CUPTI still attached):
            what gpuscope's trace windows do between windows
  plain     detached again (floor_stop: cuptiFinalize)
  flipped   attached, kernel records switched on and straight off before
            any launch

Each block's wall time over the mean of the cycle's two plain blocks; the
medians over cycles are printed. Everything is in one process, so the noise
between processes does not enter the comparison.

    python3 bench/pytorch/residue.py --floor libcupti_floor.so --cycles 12 --out r.json
"""
import argparse
import ctypes
import json
import os
import statistics as st
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
sys.path.insert(0, os.path.dirname(__file__))
from gpt_train import build  # noqa: E402
from harness import timer  # noqa: E402

KINDS = ("attached", "records", "after", "flipped")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--floor", required=True, help="libcupti_floor.so")
    ap.add_argument("--cycles", type=int, default=12)
    ap.add_argument("--steps", type=int, default=40, help="steps per block")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    fl = ctypes.CDLL(os.path.abspath(a.floor))
    step, _, _ = build()
    block = timer(step, a.steps)
    for _ in range(20):
        step()
    counts = [ctypes.c_uint64() for _ in range(3)]

    def call(name, *args):
        if getattr(fl, name)(*args) != 0:
            sys.exit(f"{name}{args} failed")

    def stop():
        fl.floor_stop(*(ctypes.byref(x) for x in counts))
        return counts[0].value

    cycles = []
    for _ in range(a.cycles):
        c = {"plain": [block()]}
        call("floor_start", 0, 7)
        c["attached"] = block()
        call("floor_kinds", 1)
        c["records"] = block()
        call("floor_kinds", 0)
        c["after"] = block()
        c["records_seen"] = stop()
        c["plain"].append(block())
        call("floor_start", 0, 7)
        call("floor_kinds", 1)
        call("floor_kinds", 0)
        c["flipped"] = block()
        stop()
        cycles.append(c)
    ratios = {k: [c[k] / st.mean(c["plain"]) for c in cycles] for k in KINDS}
    out = {"steps_per_block": a.steps, "cycles": cycles, "ratios": ratios,
           "plain_step_ms": 1e3 * st.median(b for c in cycles for b in c["plain"]) / a.steps}
    json.dump(out, open(a.out, "w"), indent=1)
    print(f"plain step {out['plain_step_ms']:.2f} ms; kernel records seen per cycle "
          f"{st.median(c['records_seen'] for c in cycles)}")
    for k in KINDS:
        r = ratios[k]
        print(f"{k:<9} median {st.median(r):.3f}  (min {min(r):.3f}, max {max(r):.3f}, {len(r)} cycles)")


if __name__ == "__main__":
    main()
