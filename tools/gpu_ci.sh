#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".whl"]): tests (GPU ones included), notebooks through nbval at full
# size, then the benchmark. Logs and the results record go to $OUT. Usage: bash tools/gpu_ci.sh [pytest args]
source tools/gpu_env.sh || exit 1
python3 -m ipykernel install --prefix "$PWD/.jup" --name python3 > /dev/null && export JUPYTER_PATH=$PWD/.jup/share/jupyter
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt"
start=$(date +%s)
python3 -m pytest -q -rs tests "$@" 2>&1 | tee "$OUT/pytest.log" | tail -25
echo "tests took $(( $(date +%s) - start )) s"
start=$(date +%s)
python3 -m pytest -q --nbval-lax notebooks solutions labs 2>&1 | tee "$OUT/nbval.log" | tail -8
echo "notebooks took $(( $(date +%s) - start )) s"
python3 -m cudabook.results 2>&1 | tee "$OUT/bench.log" | tail -20
cp results/*.json "$OUT/" 2>/dev/null
