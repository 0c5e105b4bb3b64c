#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".whl"]): record Nsight Compute profiles into results/profiles/
# (<gpu>_<track>.json), copied to $OUT with the logs. Each stage is saved as soon as it is measured, so a
# timeout keeps what was done; the stages the lessons show come first.
#   CUDABOOK_COMMIT=<short hash> bash tools/gpu_profile.sh         resampling 01 03 05 07, then 02 04 (about 3 min)
#   CUDABOOK_COMMIT=<short hash> bash tools/gpu_profile.sh msda    the deformable-attention rungs (about 2 min)
source tools/gpu_env.sh || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ncu=$(python3 -c "from cudabook.profile import find_ncu; print(find_ncu() or '')" 2>/dev/null)
echo "ncu: ${ncu:-not found} $([ -n "$ncu" ] && "$ncu" --version | tail -1)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt"
record() {   # seconds, log name, then the arguments of --record
  local limit=$1 log=$2 t=$(date +%s); shift 2
  timeout "$limit" python3 -m cudabook.profile --record "$@" > "$OUT/$log.log" 2>&1
  echo "--record $*: exit $?, $(( $(date +%s) - t )) s"
}
if [ "$1" = msda ]; then
  record 150 profile_msda msda
else
  record 110 profile_resample resample 01 03 05 07
  record 50 profile_resample_more resample 02 04
fi
cp results/profiles/*.json "$OUT/" 2>/dev/null
python3 -m cudabook.profile --show resample | cut -c1-200
[ "$1" = msda ] && python3 -m cudabook.profile --show msda | cut -c1-200
grep -h "does not know\|ERROR\|Error" "$OUT"/profile_*.log | head -20
true
