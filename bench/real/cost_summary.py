"""The cost table from bench/real/cost.sh's runs: per loop and
configuration, the processes' ratios (median settled session block over
median plain block, in one process), their median, the pooled ratio (mean
of every settled session block over the mean of every plain block) with a
bootstrap 95% interval over processes, each against no session, and the
settled ratio: the session's second half of blocks only (a device's
sampling set-up runs on gpuscope's thread for up to ~2 s after the session
starts, and slows launches meanwhile), median over processes.

    python3 bench/real/cost_summary.py OUT
"""
import glob
import json
import os
import random
import statistics as st
import sys


def pooled(runs):
    plain = [b for r in runs for b in r["before"] + r["after"]]
    during = [b for r in runs for b in r["during"][1:]]
    return st.mean(during) / st.mean(plain)


def interval(runs, rounds=2000, seed=1):
    rng = random.Random(seed)
    v = sorted(pooled([rng.choice(runs) for _ in runs]) for _ in range(rounds))
    return v[int(0.025 * rounds)], v[int(0.975 * rounds)]


def late(r):
    during = r["during"][len(r["during"]) // 2:]
    return st.median(during) / st.median(r["before"] + r["after"])


def main():
    out = sys.argv[1]
    runs = {}
    for f in sorted(glob.glob(os.path.join(out, "cost-*.json"))):
        r = json.load(open(f))
        runs.setdefault((r["loop"], r["config"]), []).append(r)
    print("| loop | configuration | processes | plain step | median ratio (min-max) | pooled ratio [95%] | against none "
          "| settled (second half) |")
    print("|---|---|---|---|---|---|---|---|")
    for loop in ("launch", "gpu"):
        none = runs.get((loop, "none"))
        for (l, c), rs in sorted(runs.items()):
            if l != loop:
                continue
            ratios = [r["ratio"] for r in rs]
            lo, hi = interval(rs)
            against = f"{pooled(rs) / pooled(none):.3f}" if none and c != "none" else ""
            print(f"| {loop} | {c} | {len(rs)} | {st.median(r['plain_step_ms'] for r in rs):.3f} ms "
                  f"| {st.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) "
                  f"| {pooled(rs):.3f} [{lo:.3f}, {hi:.3f}] | {against} | {st.median(late(r) for r in rs):.3f} |")


if __name__ == "__main__":
    main()
