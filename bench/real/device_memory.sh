# On the device: GPU memory figures against PyTorch's own, and their cost; logs to $1.
O=$1; mkdir -p $O
export PATH=$PWD/.gpu/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpu/lib PYTHONPATH=$PWD/python
cd bench/real
for i in 1 2; do
  for m in on off; do
    GPUSCOPE_QUIET=1 GPUSCOPE_DEVICE_MEMORY=$m timeout 150 gpuscope run -o $O/llama-$m-$i.json -- python3 torch_ranges.py train --steps 20 > $O/llama-$m-$i.txt 2>&1
  done
done
python3 - "$O" <<'PY'
import json, sys, glob
o = sys.argv[1]
for f in sorted(glob.glob(f"{o}/llama-*.json")):
    r = json.load(open(f))
    own = json.loads([l for l in open(f[:-5] + ".txt") if l.startswith("{")][-1])
    devs = r["memory"].get("devices", [])
    d = devs[0] if devs else {}
    print(f.split("/")[-1], "step_ms %.2f" % own["step_ms"], "reserved", own["max_memory_reserved"],
          "allocated", own["max_memory_allocated"], "gpuscope peak", d.get("peak_live_bytes"),
          "ratio %.4f" % (d.get("peak_live_bytes", 0) / own["max_memory_reserved"]),
          "allocs", d.get("allocations"), "releases", d.get("releases"), "end", d.get("live_at_end_bytes"),
          "points", len(d.get("timeline", [])), "total", r["devices"][0].get("memory_bytes"))
PY
gpuscope report $O/llama-on-1.json 2>&1 | grep -A2 "GPU 0 memory"
