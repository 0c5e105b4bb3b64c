#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".whl"]): the GEMM track's tests, its benchmark (merged into
# results/<gpu>.json), the size sweep (tools/sweep_sizes.py: results/sizes/<gpu>_gemm.json), compute-sanitizer on
# the C++ rungs, and optionally its notebooks through nbval. Logs and records go to $OUT.
#   bash tools/gpu_gemm.sh            tests + sanitizers + benchmark + size sweep
#   bash tools/gpu_gemm.sh notebooks  the GEMM lessons, labs and solutions through nbval, at full size
source tools/gpu_env.sh || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# Name the commit measured: CUDABOOK_COMMIT=<short hash> bash tools/gpu_gemm.sh (the copy on the GPU machine may
# carry an older .git than its files; records keep a digest of the code, and a test checks it against this commit)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt"
if [ "$1" = notebooks ]; then
  python3 -m ipykernel install --prefix "$PWD/.jup" --name python3 > /dev/null && export JUPYTER_PATH=$PWD/.jup/share/jupyter
  t=$(date +%s)
  timeout 540 python3 -m pytest -q -rs --nbval-lax notebooks/gemm labs/gemm solutions/gemm 2>&1 | tee "$OUT/gemm_nbval.log" | tail -12
  echo "notebooks took $(( $(date +%s) - t )) s"
  exit 0
fi
t=$(date +%s)
timeout 250 python3 -m pytest -q -rs tests/gemm 2>&1 | tee "$OUT/gemm_pytest.log" | tail -15
echo "gemm tests took $(( $(date +%s) - t )) s"
t=$(date +%s)
timeout 120 python3 tools/sanitize.py --track gemm 2>&1 | tee "$OUT/gemm_sanitizers.log" | tail -14
echo "sanitizers took $(( $(date +%s) - t )) s"
t=$(date +%s)
timeout 190 python3 -m cudabook.results gemm 2>&1 | tee "$OUT/gemm_bench.log" | tail -32
cp results/*.json "$OUT/" 2>/dev/null
echo "benchmark took $(( $(date +%s) - t )) s"
[ "$1" = nosizes ] && exit 0
t=$(date +%s)
timeout 150 python3 tools/sweep_sizes.py --track gemm 2>&1 | tee "$OUT/gemm_sizes.log" | tail -16
cp results/sizes/*_gemm.json "$OUT/" 2>/dev/null
echo "size sweep took $(( $(date +%s) - t )) s"
