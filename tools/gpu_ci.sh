#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".whl"]): tests (GPU ones included), every notebook at full size, run
# and timed without Jupyter (tools/time_lessons.py --runner exec: the GPU image has no nbformat), spread over
# all the machine's GPUs, then the benchmark. Logs, the timings and the results record go to $OUT.
# Usage: bash tools/gpu_ci.sh [pytest args]
source tools/gpu_env.sh || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt"
start=$(date +%s)
python3 -m pytest -q -rs tests "$@" 2>&1 | tee "$OUT/pytest.log" | tail -25
echo "tests took $(( $(date +%s) - start )) s"
start=$(date +%s)
python3 tools/time_lessons.py --runner exec --gpus 0 --out "$OUT/timings" 2>&1 | tee "$OUT/notebooks.log" | tail -8
echo "notebooks took $(( $(date +%s) - start )) s"
python3 -m cudabook.results 2>&1 | tee "$OUT/bench.log" | tail -20
cp results/*.json "$OUT/" 2>/dev/null
