# On the device: the automatic-ranges checks, logs to $1.
set -x
O=$1; mkdir -p $O
export PATH=$PWD/.gpu/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpu/lib PYTHONPATH=$PWD/python GPUSCOPE_LIB=$PWD/.gpu/lib/libgpuscope.so
cd bench/real
timeout 100 python3 compiled_ranges_diag.py > $O/diag.txt 2>&1
timeout 200 python3 torch_ranges.py graphs --out $O > $O/graphs.txt 2>&1
for f in $O/graphs-*.json; do gpuscope report $f > ${f%.json}.txt 2>&1; done
timeout 60 python3 torch_ranges.py overhead mlp --steps 20 > $O/overhead-mlp.txt 2>&1
timeout 150 python3 torch_ranges.py overhead llama --steps 15 > $O/overhead-llama.txt 2>&1
timeout 100 python3 torch_ranges.py train > $O/plain.txt 2>&1
timeout 120 gpuscope run --torch-ranges --mode sampling -o $O/llama-sampling.json -- python3 torch_ranges.py train > $O/llama-sampling.txt 2>&1
