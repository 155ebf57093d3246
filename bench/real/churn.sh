# On the device: the churn finding with and without empty_cache, and the cost of allocation records on it; logs to $1.
O=$1; mkdir -p $O
export PATH=$PWD/.gpu/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpu/lib PYTHONPATH=$PWD/python
cd bench/real
for e in "" "--empty-cache"; do
  n=${e:-keep}; n=${n#--}
  timeout 60 python3 churn.py $e > $O/plain-$n.txt 2>&1
  GPUSCOPE_QUIET=1 timeout 90 gpuscope run -o $O/churn-$n.json -- python3 churn.py $e > $O/churn-$n.txt 2>&1
  gpuscope report $O/churn-$n.json > $O/report-$n.txt 2>&1
  echo "== $n: plain $(grep '^{' $O/plain-$n.txt | tail -1)"; echo "   gpuscope $(grep '^{' $O/churn-$n.txt | tail -1)"
  grep -E "GPU 0 memory|allocator|released device memory" -A1 $O/report-$n.txt | head -6
done
for i in 1 2 3; do for m in on off; do
  GPUSCOPE_QUIET=1 GPUSCOPE_DEVICE_MEMORY=$m timeout 90 gpuscope run -o /tmp/c.json -- python3 churn.py --empty-cache > $O/cost-$m-$i.txt 2>&1
  echo "cost $m $i $(grep '^{' $O/cost-$m-$i.txt | tail -1)"
done; done
