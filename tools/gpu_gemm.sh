#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".whl"]): the GEMM track's tests, its notebooks through nbval, its
# benchmark (merged into results/<gpu>.json), the size sweep, and compute-sanitizer on the C++ rungs.
# Logs and records go to $OUT. Usage: bash tools/gpu_gemm.sh [quick]
source tools/gpu_env.sh || exit 1
python3 -m ipykernel install --prefix "$PWD/.jup" --name python3 > /dev/null && export JUPYTER_PATH=$PWD/.jup/share/jupyter
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt"
t=$(date +%s)
python3 -m pytest -q -rs tests/test_gemm_*.py 2>&1 | tee "$OUT/gemm_pytest.log" | tail -15
echo "gemm tests took $(( $(date +%s) - t )) s"
[ "$1" = quick ] && exit 0
t=$(date +%s)
python3 tools/sanitize_gemm.py 2>&1 | tee "$OUT/gemm_sanitizers.log" | tail -12
echo "sanitizers took $(( $(date +%s) - t )) s"
t=$(date +%s)
python3 -m cudabook.results gemm 2>&1 | tee "$OUT/gemm_bench.log" | tail -30
cp results/*.json "$OUT/" 2>/dev/null
python3 -m cudabook.gemm.sizes 2>&1 | tee "$OUT/gemm_sizes.log" | tail -8
cp results/sweeps/*.json "$OUT/" 2>/dev/null
echo "benchmark took $(( $(date +%s) - t )) s"
