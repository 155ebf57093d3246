# On the device: gpuscope's device memory figures on a HF Llama loop at
# several batch sizes (each one's headroom prediction against the real peak,
# or out-of-memory, of twice the batch), the churn finding (CHURN=1), and the
# cost of allocation records in one process; logs to $1.
O=$1; mkdir -p $O
export PATH=$PWD/.gpu/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpu/lib PYTHONPATH=$PWD/python GPUSCOPE_LIB=$PWD/.gpu/lib/libgpuscope.so
cd bench/real
BATCHES=${BATCHES:-32 64 128 256 72 144}
for b in $BATCHES; do
  GPUSCOPE_QUIET=1 timeout 150 gpuscope run --torch-ranges -o $O/llama-$b.json -- python3 memory.py train --batch $b > $O/llama-$b.txt 2>&1
  gpuscope report $O/llama-$b.json > $O/report-$b.txt 2>&1
  echo "== batch $b: $(grep '^{' $O/llama-$b.txt | tail -1)"
  grep -E "GPU 0 memory|held at the peak|by the library|device memory by range|^  (step|forward|backward|optimizer|step/)" -A0 $O/report-$b.txt | cut -c1-400
  grep -E "memory-headroom|near-capacity|peaked at" -A3 $O/report-$b.txt | head -8
done
python3 - "$O" "$BATCHES" <<'PY'
import json, sys
o = sys.argv[1]
for b in map(int, sys.argv[2].split()):
    r = json.load(open(f"{o}/llama-{b}.json"))
    own = json.loads([l for l in open(f"{o}/llama-{b}.txt") if l.startswith("{")][-1])
    d = r["memory"]["devices"][0]
    if own.get("oom"):
        print(f"batch {b}: out of memory (torch max_reserved {own['max_memory_reserved']}, gpuscope peak {d['peak_live_bytes']})")
    libs = {h["library"]: h["bytes"] for h in d.get("held_at_peak_by_library", [])}
    torch_b = libs.get("PyTorch", 0)
    other = sum(v for k, v in libs.items() if k != "PyTorch")
    print(f"batch {b}: gpuscope peak {d['peak_live_bytes']} torch max_reserved {own['max_memory_reserved']} "
          f"non-PyTorch at peak {other} -> peak/(reserved+other) {d['peak_live_bytes'] / (own['max_memory_reserved'] + other):.4f}; "
          f"PyTorch's at peak {torch_b}; libs {libs}; static {d.get('static_peak_bytes')}")
    for g in r["ranges"]:
        m = g.get("memory")
        name = "/".join(f["name"] for f in g["path"]["frames"])
        if m and name.count("/") <= 1:
            print("   ", name, json.dumps(m))
    for f in r.get("findings", []):
        if f["kind"] in ("memory-headroom", "near-capacity", "allocator-churn"):
            print("   finding", f["kind"], f["message"])
PY
[ -n "$CHURN" ] && (cd ../.. && bash bench/real/churn.sh $O/churn 2>&1 | head -20)
for loop in ${COST_LOOPS-mlp churn}; do timeout 250 python3 memory.py cost $loop --rounds ${ROUNDS:-8} --steps 300 2>&1 | tail -1; done
