"""Summarises session_cost.py results by variant: the three measures the
README's always-on tables give, for files DIR/cost-VARIANT-ROUND.json.

    python3 bench/pytorch/ab_stats.py DIR none old new

Per variant: the median of the processes' block ratios, the median of the
processes' (median session step / median plain step), and the pooled ratio
(all session blocks but each first over all plain blocks) with a bootstrap
standard error over processes.
"""
import glob
import json
import random
import statistics as st
import sys


def pooled(runs):
    """All session blocks but each process's first (set-up) over all plain blocks."""
    plain = [b for r in runs for b in r["before"] + r["after"]]
    during = [b for r in runs for b in r["during"][1:]]
    return st.mean(during) / st.mean(plain)


def step_ratio(r):
    session = [t1 - t0 for block in r["session_steps"][1:] for t0, t1 in zip(block, block[1:])]
    return 1e3 * st.median(session) / st.median(r["plain_steps_ms"])


def main():
    folder, variants = sys.argv[1], sys.argv[2:]
    rng = random.Random(1)
    for v in variants:
        runs = [json.load(open(f)) for f in sorted(glob.glob(f"{folder}/cost-{v}-*.json"))]
        if not runs:
            print(f"{v}: no results")
            continue
        boots = [pooled([rng.choice(runs) for _ in runs]) for _ in range(2000)]
        print(f"{v:<8} processes {len(runs):>3}  median block ratio {st.median(r['ratio'] for r in runs):.3f}"
              f"  step medians {st.median(step_ratio(r) for r in runs):.3f}"
              f"  pooled {pooled(runs):.3f} ± {st.pstdev(boots):.3f}")


if __name__ == "__main__":
    main()
