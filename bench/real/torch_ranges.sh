# On the device: the automatic-ranges checks, logs to $1.
set -x
O=$1; mkdir -p $O
export PATH=$PWD/.gpu/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpu/lib PYTHONPATH=$PWD/python GPUSCOPE_LIB=$PWD/.gpu/lib/libgpuscope.so
cd bench/real
timeout 120 python3 torch_ranges.py train > $O/plain.txt 2>&1
timeout 150 gpuscope run --torch-ranges -o $O/llama-trace.json -- python3 torch_ranges.py train > $O/llama-trace.txt 2>&1
timeout 150 gpuscope run --torch-ranges --mode sampling -o $O/llama-sampling.json -- python3 torch_ranges.py train > $O/llama-sampling.txt 2>&1
timeout 120 python3 torch_ranges.py overhead mlp > $O/overhead-mlp.txt 2>&1
timeout 150 python3 torch_ranges.py overhead llama > $O/overhead-llama.txt 2>&1
timeout 150 python3 torch_ranges.py graphs --out $O > $O/graphs.txt 2>&1
for f in $O/graphs-*.json; do gpuscope report $f > ${f%.json}.txt 2>&1; done
