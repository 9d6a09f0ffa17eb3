OUT=$OUT STEPS='^nodes-(suite|suite4|agp|agp4|agp-refused|plan|kill)$' bash scripts/gpu-suite.sh 2 2>&1 | grep -E "^== .*exit|FAIL|rror" | head -30
for r in 1 2; do for hc in 1 0; do
echo "== round $r LUACOLL_HOST_COPY=$hc"
LUACOLL_HOST_COPY=$hc timeout 200 bin/luacoll bench allgather -n 2 --nodes 2 --device cuda --gpus 0,0 --vs nccl -b 1K -e 64K -f 8 --iters 50 -w 5 2>&1 | grep -E "^ +[0-9]+ |rror"
done; done
echo "== graph"; timeout 200 bin/luacoll bench allgather -n 2 --nodes 2 --device cuda --gpus 0,0 --graph --vs nccl -b 1K -e 64K -f 8 --iters 50 -w 5 2>&1 | grep -E "^ +[0-9]+ |rror"
