# On the device: GPU tests, then the overhead and CUDA graph checks; logs to $1.
O=$1; mkdir -p $O
bash .gpu/run tests > $O/tests.txt 2>&1; echo "tests rc=$?" >> $O/tests.txt
export PATH=$PWD/.gpu/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpu/lib PYTHONPATH=$PWD/python GPUSCOPE_LIB=$PWD/.gpu/lib/libgpuscope.so
cd bench/real
timeout 100 python3 torch_ranges.py overhead mlp > $O/overhead-mlp.txt 2>&1
timeout 150 python3 torch_ranges.py overhead llama > $O/overhead-llama.txt 2>&1
timeout 150 python3 torch_ranges.py graphs --out $O > $O/graphs.txt 2>&1
for f in $O/graphs-*.json; do gpuscope report $f > ${f%.json}.txt 2>&1; done
