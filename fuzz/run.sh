#!/usr/bin/env bash
# Builds the cargo-fuzz targets and runs each for SECONDS (default 20).
# A crash or an input running over 10 s fails the run; the input is kept
# under fuzz/artifacts/TARGET/
# (replay: RUSTC_BOOTSTRAP=1 cargo fuzz run -s none TARGET FILE).
#   fuzz/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
# Installed under target/ci-tools (not ~/.cargo) when missing.
tools="${CI_TOOLS:-$PWD/target/ci-tools}"
export PATH="$tools/bin:$PATH"
command -v cargo-fuzz >/dev/null || cargo install --root "$tools" cargo-fuzz --version 0.13.2 --locked
# cargo-fuzz passes -Z flags to rustc; without a sanitizer (-s none) a
# stable toolchain accepts them under RUSTC_BOOTSTRAP. Coverage-guided
# libFuzzer still runs; Rust's own checks catch bad indexing and, with -a
# (debug assertions on in the optimised build), integer overflow.
export RUSTC_BOOTSTRAP=1
for t in $(cargo fuzz list); do
  log=$(mktemp)
  if ! cargo fuzz run -s none -O -a "$t" -- -max_total_time="$secs" -timeout=10 -print_final_stats=1 > "$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: $t found a crash (input under fuzz/artifacts/$t/)" >&2
    exit 1
  fi
  echo "fuzz: $t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log"), $(grep -o 'cov: [0-9]*' "$log" | tail -1)"
  rm -f "$log"
done
