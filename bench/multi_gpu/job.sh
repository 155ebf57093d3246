#!/usr/bin/env bash
# Truths and gpuscope runs of four two-GPU cases, in one call of at most
# BUDGET seconds (default 440):
#
#   bash bench/multi_gpu/job.sh OUT
#
# Needs two GPUs, torchrun, transformers and `gpuscope` on PATH. Cases:
#   ddp-exposed  ddp.py --exposed --no-ranges  (one 1 GB bucket after a short backward)
#   ddp-overlap  ddp.py --no-ranges            (25 MB buckets under a long backward)
#   ddp-uneven   ddp.py --uneven --no-ranges   (rank 1's sequences twice as long)
#   fsdp         fsdp.py                       (FSDP2 Llama ~0.37 B, no ranges)
# For each: the truth first, without gpuscope (torchrun, and the single-GPU
# `alone` runs), stdout to OUT/CASE.plain*.txt, stderr to OUT/CASE.plain*.stderr;
# then `gpuscope run -o OUT/CASE-{rank}.json -- torchrun ...` (stdout and stderr
# to OUT/CASE.gpuscope.txt) and `gpuscope report --merge` (OUT/CASE.merge.txt).
# OUT/expected.txt: what each case should be found to be, and the truths
# measured, appended after each case's plain runs. A summary ends the output.
# Every command runs under `timeout`, capped by what is left of BUDGET.
# CASES="ddp-uneven fsdp" runs only those; NPROC=4 runs each on four GPUs.

set -u
OUT=${1:?usage: bash bench/multi_gpu/job.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/../.." || exit 1 # the repository root

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-440}   # seconds for the whole job
RESERVE=8               # kept for the summary
STEPS_DDP=${STEPS_DDP:-45}   # 5 warm-up + 40 measured
STEPS_FSDP=${STEPS_FSDP:-35} # 5 warm-up + 30 measured
WARMUP=5
CASES=${CASES:-ddp-exposed ddp-overlap ddp-uneven fsdp}
START=$SECONDS
NPROC=${NPROC:-2}   # ranks (GPUs)
TORCHRUN=(torchrun --standalone --nproc_per_node "$NPROC")
DDP=bench/multi_gpu/ddp.py
FSDP=bench/multi_gpu/fsdp.py

elapsed() { echo $((SECONDS - START)); }

# step CAP STDOUT STDERR CMD...: CMD under timeout (CAP seconds, or less when
# the budget is short), one line of timing; STDERR "-" sends it with stdout.
step() {
    local cap=$1 out=$2 err=$3
    shift 3
    local left=$((BUDGET - RESERVE - $(elapsed)))
    if ((left < 15)); then
        echo "SKIPPED: out of budget ($(elapsed)s of ${BUDGET}s used): $*" | tee "$out"
        return 124
    fi
    ((cap > left)) && cap=$left
    local t=$SECONDS rc
    if [[ $err == - ]]; then
        timeout -k 5 "$cap" "$@" >"$out" 2>&1
    else
        timeout -k 5 "$cap" "$@" >"$out" 2>"$err"
    fi
    rc=$?
    printf '[t=%3ds] %3ds rc=%d (cap %ds) %s > %s\n' "$(elapsed)" $((SECONDS - t)) "$rc" "$cap" "$*" "${out#"$OUT"/}"
    if ((rc != 0)); then
        echo "    --- last lines:"
        tail -n 6 "$out" | sed 's/^/    | /'
        [[ $err != - ]] && tail -n 6 "$err" | sed 's/^/    | /'
    fi
    return $rc
}

# suite FILE...: each file's SUITE lines, as "file: rank r step_ms (n steps)".
suite() {
    python3 - "$@" <<'PY'
import json, os, re, sys
for path in sys.argv[1:]:
    rows = []
    try:
        for line in open(path, errors="replace"):
            m = re.search(r"SUITE (\{.*?\})", line)
            if m:
                try:
                    rows.append(json.loads(m.group(1)))
                except ValueError:
                    pass
    except OSError:
        pass
    name = os.path.basename(path)
    if not rows:
        print(f"  {name}: no SUITE line")
    for d in sorted(rows, key=lambda d: d.get("rank", -1)):
        print(f"  {name}: rank {d.get('rank')} step {d.get('step_ms')} ms ({d.get('steps')} steps)")
PY
}

# truth CASE: the case's measured truths, appended to expected.txt.
truth() {
    python3 - "$OUT" "$1" <<'PY' | tee -a "$OUT/expected.txt"
import json, os, re, sys
out, case = sys.argv[1], sys.argv[2]

def ms(name, rank=None):
    """step_ms of `rank` (any rank if None) in OUT/name, else None."""
    try:
        text = open(os.path.join(out, name), errors="replace").read()
    except OSError:
        return None
    for m in re.finditer(r"SUITE (\{.*?\})", text):
        try:
            d = json.loads(m.group(1))
        except ValueError:
            continue
        if rank is None or d.get("rank") == rank:
            return float(d["step_ms"])
    return None

def f(x):
    return "n/a" if x is None else f"{x:.2f} ms"

def minus(a, b):
    return None if a is None or b is None else a - b

j0, j1 = ms(f"{case}.plain.txt", 0), ms(f"{case}.plain.txt", 1)
print(f"{case} truth (plain, no gpuscope): together rank 0 {f(j0)}, rank 1 {f(j1)} per step")
if case == "ddp-uneven":
    a0, a1 = ms(f"{case}.plain-alone0.txt"), ms(f"{case}.plain-alone1.txt")
    print(f"  alone: rank 0's work {f(a0)}, rank 1's work {f(a1)} per step (ratio "
          + ("n/a" if not a0 or a1 is None else f"{a1 / a0:.2f}") + ")")
    w = minus(j0, a0)
    share = "n/a" if w is None or not j0 else f"{100 * w / j0:.0f}% of its step"
    print(f"  expected wait of rank 0 per step (together - rank 0 alone): {f(w)} ({share})")
    print(f"  rank 1's own excess (together - rank 1 alone: exposed all-reduce tail): {f(minus(j1, a1))}")
elif case == "fsdp":
    a = ms(f"{case}.plain-alone.txt")
    j = max([x for x in (j0, j1) if x is not None], default=None)
    print(f"  alone (unsharded on one GPU): {f(a)} per step")
    print(f"  what sharding adds per step (together - alone: exposed all-gather/reduce-scatter, copies, hooks): {f(minus(j, a))}")
else:
    a = ms(f"{case}.plain-alone0.txt")
    j = max([x for x in (j0, j1) if x is not None], default=None)
    print(f"  alone (rank 0's work on one GPU, no DDP): {f(a)} per step")
    d = minus(j, a)
    share = "n/a" if d is None or not j else f"{100 * d / j:.0f}% of the step"
    print(f"  exposed communication per step (together - alone): {f(d)} ({share})")
PY
}

cat >"$OUT/expected.txt" <<'TXT'
Expected answers (before the runs); measured truths are appended below each.

ddp-exposed (ddp.py --exposed --no-ranges): two Linear layers of ~268 M fp32
  parameters, batch 8: forward and backward are short (memory-bound reads of
  the weights), then ONE all-reduce of ~1.07 GB of gradients that can only start
  after backward. Bound by: communication, exposed (not overlapped with any
  compute); the ranks are balanced (neither waits for the other: the all-reduce
  is transfer time, not waiting). Exposed all-reduce per step ~= together - alone.
ddp-overlap (ddp.py --no-ranges): 24 fp32 layers of width 2048 (~100 M
  params), batch 8192: a long GEMM-bound backward; DDP's 25 MB buckets
  all-reduce under it. Bound by: compute (fp32 GEMMs); communication mostly
  hidden (only the last bucket's all-reduce, a ms or so, after backward);
  ranks balanced. together - alone should be small against the step.
ddp-uneven (ddp.py --uneven --no-ranges): 12 pre-norm encoder layers (~150 M
  params, bf16 autocast), 4 sequences per rank, rank 0 of 1024 tokens, rank 1
  of 2048. Bound by: rank 1's compute (the straggler); rank 0 finishes its
  backward early and waits for rank 1 inside the all-reduces (NCCL kernels
  spinning). Expected wait of rank 0 per step = together step - rank 0 alone
  (computed below); together ~= rank 1 alone + a small all-reduce tail.
fsdp (fsdp.py, no ranges): FSDP2 Llama ~0.37 B bf16 params, 1 x 512 tokens,
  AdamW, both ranks the same work (balanced, no straggler). Per layer an
  all-gather of its parameters (forward and again in backward) and a
  reduce-scatter of its gradients, prefetched on their own streams. With so
  few tokens per step the GPU work per layer is small: expect the step bound
  by the host (launches, FSDP hooks) and/or the per-layer collectives rather
  than by GEMMs; what sharding adds = together - alone (computed below).
TXT
echo >>"$OUT/expected.txt"

echo "== job.sh: OUT=$OUT budget ${BUDGET}s cases: $CASES"
nvidia-smi -L 2>/dev/null | head -4
python3 -c "import importlib.metadata as m; print('torch', m.version('torch'), 'transformers', m.version('transformers'))" 2>&1 | tail -1
if command -v gpuscope >/dev/null; then gpuscope --version 2>&1 | head -1; else echo "WARNING: gpuscope is not on PATH"; fi

# case NAME CAP_PLAIN CAP_ALONE CAP_GPUSCOPE ALONE_ARGS... -- PROGRAM ARGS...:
# ALONE_ARGS are "label=args" pairs for single-process runs of PROGRAM.
run_case() {
    local name=$1 cap_plain=$2 cap_alone=$3 cap_gs=$4
    shift 4
    local alone=()
    while [[ $1 != -- ]]; do alone+=("$1"); shift; done
    shift
    local prog=("$@") t=$SECONDS
    echo
    echo "== $name (t=$(elapsed)s)"
    step "$cap_plain" "$OUT/$name.plain.txt" "$OUT/$name.plain.stderr" "${TORCHRUN[@]}" "${prog[@]}"
    local a label args
    for a in "${alone[@]}"; do
        label=${a%%=*} args=${a#*=}
        # shellcheck disable=SC2086 # args is a list of words
        step "$cap_alone" "$OUT/$name.plain-$label.txt" "$OUT/$name.plain-$label.stderr" \
            env CUDA_VISIBLE_DEVICES=0 python3 "${prog[@]}" $args
    done
    truth "$name"
    echo >>"$OUT/expected.txt"
    rm -f "$OUT/$name"-*.json
    step "$cap_gs" "$OUT/$name.gpuscope.txt" - gpuscope run -o "$OUT/$name-{rank}.json" -- "${TORCHRUN[@]}" "${prog[@]}"
    local reports=("$OUT/$name"-*.json)
    if [[ -e ${reports[0]} ]]; then
        step 60 "$OUT/$name.merge.txt" - gpuscope report --merge "${reports[@]}"
    else
        echo "no report written for $name" | tee "$OUT/$name.merge.txt"
    fi
    echo "== $name done in $((SECONDS - t))s"
}

for c in $CASES; do
    case $c in
    ddp-exposed)
        run_case ddp-exposed 75 50 120 alone0="--alone-rank 0" -- \
            "$DDP" --exposed --no-ranges --steps "$STEPS_DDP" --warmup "$WARMUP" ;;
    ddp-overlap)
        run_case ddp-overlap 75 50 120 alone0="--alone-rank 0" -- \
            "$DDP" --no-ranges --steps "$STEPS_DDP" --warmup "$WARMUP" ;;
    ddp-uneven)
        run_case ddp-uneven 75 50 120 alone0="--alone-rank 0" alone1="--alone-rank 1" -- \
            "$DDP" --uneven --no-ranges --steps "$STEPS_DDP" --warmup "$WARMUP" ;;
    fsdp)
        run_case fsdp 100 70 150 alone="--alone" -- \
            "$FSDP" --steps "$STEPS_FSDP" --warmup "$WARMUP" ;;
    *) echo "unknown case $c" ;;
    esac
done

echo
echo "================ SUMMARY (t=$(elapsed)s) ================"
for c in $CASES; do
    echo
    echo "### $c"
    echo "truth, plain runs:"
    suite "$OUT/$c".plain.txt "$OUT/$c".plain-*.txt 2>/dev/null
    echo "under gpuscope:"
    suite "$OUT/$c.gpuscope.txt"
    echo "answer (gpuscope report --merge):"
    if grep -q '== Answer' "$OUT/$c.merge.txt" 2>/dev/null; then
        awk '/== Answer/ { on = 1 } on && n < 25 { print "  " $0; n++ }' "$OUT/$c.merge.txt"
    else
        echo "  no answer"
        tail -n 5 "$OUT/$c.merge.txt" 2>/dev/null | sed 's/^/  | /'
    fi
done
echo
echo "expected.txt:"
cat "$OUT/expected.txt"
echo "== job.sh done in $(elapsed)s"
