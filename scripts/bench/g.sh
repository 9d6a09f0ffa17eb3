export NCCL_NVLS_ENABLE=0
bin/kernels.test -test.run 'TestNames|TestLoad' 2>&1 | tail -2
OUT=${OUT:-/tmp/x} STEPS='^nodes-(agp|agp4|agp-refused|kill)$' bash scripts/gpu-suite.sh 2 2>&1 | grep -E "^== .*exit|FAIL|rror|graph" | head -30
ag="bin/luacoll bench allgather -n 2 --nodes 2 --device cuda --gpus 0,0 --vs nccl"
for r in 1 2; do echo "== graph round $r"; timeout 200 $ag --graph -b 1K -e 64K -f 8 --iters 50 -w 5 2>&1 | grep -E "^ +[0-9]+ |rror|graph_nodes"; done
echo "== graph large"; timeout 200 $ag --graph -b 512K -e 32M -f 4 --iters 10 -w 2 2>&1 | grep -E "^ +[0-9]+ |rror"
