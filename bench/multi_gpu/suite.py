"""Per-step timing shared by the multi-GPU programs: each step's time, and
the SUITE line job.sh reads (the median of the steps after warm-up)."""

import json
import statistics
import time


def record(rank: int, step: int, t0: float, times: list) -> None:
    """Appends the step begun at `t0` (time.perf_counter) and prints it."""
    ms = 1e3 * (time.perf_counter() - t0)
    times.append(ms)
    print(f"rank {rank} step {step} {ms:.2f} ms", flush=True)


def finish(rank: int, times: list, warmup: int, dist) -> None:
    """Prints the SUITE line and ends the process group, if any."""
    measured = times[warmup:] or times
    suite = {"rank": rank, "step_ms": round(statistics.median(measured), 3), "steps": len(measured)}
    print("SUITE " + json.dumps(suite), flush=True)
    if dist is not None:
        dist.destroy_process_group()
