#!/usr/bin/env python3
"""Runs a program under `gpuscope run --prometheus ADDR` and scrapes
http://ADDR/metrics every second while it runs, printing per scrape its
time, the kernel launches so far and a range path's calls so far.

    python3 scripts/prometheus_scrape.py --range step -- python3 examples/python/gpt_train.py
"""

import argparse
import subprocess
import sys
import time
import urllib.request


def total(body, prefix, must=""):
    return sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith(prefix) and must in l)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="127.0.0.1:9400")
    ap.add_argument("--range", default="step", help="range path whose calls are printed")
    ap.add_argument("--every", type=float, default=1.0, help="seconds between scrapes")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    proc = subprocess.Popen(["gpuscope", "run", "--prometheus", a.addr, "--"] + cmd, stdout=subprocess.DEVNULL)
    n = 0
    while proc.poll() is None:
        time.sleep(a.every)
        try:
            t0 = time.time()
            body = urllib.request.urlopen(f"http://{a.addr}/metrics", timeout=10).read().decode()
        except OSError as e:
            print(f"scrape failed: {type(e).__name__}")
            continue
        ms = (time.time() - t0) * 1000
        launches = total(body, "gpuscope_kernel_launches_total{")
        calls = total(body, "gpuscope_range_calls_total{", f'path="{a.range}"')
        print(f"scrape {n}: {ms:.1f} ms, session {total(body, 'gpuscope_session_seconds'):.1f} s, "
              f"launches {launches:.0f}, {a.range} calls {calls:.0f}")
        n += 1
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
