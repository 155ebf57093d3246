"""Memory of a long profiled run: trains the GPT loop of
examples/python/gpt_train.py for --seconds and writes the process's
resident memory (VmRSS, which includes gpuscope's buffers and tables when
it is preloaded) every --every seconds, with the steps done so far.

    gpuscope run --mode sampling -o r.json -- \\
        python3 bench/pytorch/memory.py --seconds 600 --csv rss.csv

"Flat" means: after the first minute, the last reading is within a few MB
of the smallest (the summary line says by how much it grew).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
from gpt_train import build  # noqa: E402


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--every", type=float, default=15)
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    step, _, _ = build()
    t0 = time.monotonic()
    rows, steps, next_at = [], 0, 0.0
    with open(a.csv, "w") as out:
        out.write("seconds,steps,rss_mb\n")
        while True:
            t = time.monotonic() - t0
            if t >= next_at:
                rows.append((t, steps, rss_kb() / 1024))
                out.write("%.1f,%d,%.1f\n" % rows[-1])
                out.flush()
                next_at += a.every
            if t >= a.seconds:
                break
            step()
            steps += 1
    after_warmup = [r for r in rows if r[0] >= 60] or rows
    low = min(r[2] for r in after_warmup)
    print(f"{steps} steps in {rows[-1][0]:.0f} s; RSS after the first minute: min {low:.1f} MB, "
          f"last {rows[-1][2]:.1f} MB (+{rows[-1][2] - low:.1f}), max {max(r[2] for r in after_warmup):.1f} MB")


if __name__ == "__main__":
    main()
