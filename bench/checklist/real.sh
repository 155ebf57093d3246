#!/usr/bin/env bash
# The kernel checklist on a real program (bench/checklist/gpt2_fp32.py):
# gpuscope's checklist on the first launch of every kernel, then ncu --set
# full on the first launch of each of the top N kernels gpuscope found,
# side by side (top_kernels.py).
#   bench/checklist/real.sh OUT [N]
# NCU=0 skips ncu (the table then shows gpuscope's side only).
set -uo pipefail
shopt -s nullglob
here=$(cd "$(dirname "$0")" && pwd); out=$(mkdir -p "$1" && cd "$1" && pwd); n=${2:-6}
prog=(python3 "$here/gpt2_fp32.py" --steps 2)
rm -f "$out"/ncu-*.txt
/usr/bin/time -f "gpuscope %e s" -o "$out/time.txt" gpuscope run --mode metrics --metrics checklist --launch-count 1 \
  -o "$out/gpuscope.json" -- "${prog[@]}" > "$out/gpuscope.txt" 2>&1
cat "$out/time.txt"
i=0
for k in $([ "${NCU:-1}" = 0 ] || python3 "$here/top_kernels.py" "$out/gpuscope.json" "$n"); do
  i=$((i + 1))
  timeout 300 ncu --clock-control none --set full --kernel-name "regex:^${k}\$" --launch-count 1 "${prog[@]}" \
    > "$out/ncu-$i.txt" 2>&1
done
python3 "$here/top_kernels.py" "$out/gpuscope.json" "$n" "$out"/ncu-*.txt /dev/null | tee "$out/top.txt"
