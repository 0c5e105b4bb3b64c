#!/usr/bin/env bash
# What a session's GPU time does on a card, in phases that each fit one device call (600 s, the machine's start
# included). Run from the repository root on the GPU machine (device tool), with the clean tree made here and
# carried (see tools/gpu_env.sh):
#     rm -rf .clean && git clone -q . .clean                  # here (history included), then carry [".whl", ".clean"]
#     source tools/gpu_env.sh; cd .clean && export PYTHONPATH=$PWD/../.site:$PWD CUDABOOK_COMMIT=<hash>
#     bash tools/gpu_session.sh PHASE
# First, here (no GPU): `python tools/stale_records.py --gpu <card>` lists the profiles and lesson sweeps of that
# card that no longer describe today's code, with the command that records each: a lesson measures those live.
# Each step has its own time limit and log under $OUT; results/ as it stands afterwards goes to $OUT/results.tar
# (untar it here and keep what the phase wrote: `git status results`). PHASE:
#   stale       first: what tools/stale_records.py lists for this card, recorded again (--record); where the
#               list is long (an H100 after many changes) it stops at its limit: run it again, it goes on
#               with what is still stale
#   bench-a     make bench for gemm and attention (about 3 min on an H200)
#   bench-b     make bench for resample and msda (about 4 min)
#   records     Nsight Compute records: msda and attention rungs, the GEMM and msda variants the lessons read,
#               then the occupancy test of the odd-warp blocks
#   readings    the clocks under cuBLAS, the resampling timelines, the TMA unit's box rate, the attention grid
#               probe
#   msda        the deformable-attention readings lesson 05 reads, in about 5 minutes: every msda stage's profile
#               (with its issue slots, pipes and L1 hit rate), rung 04's strided variant, rung 05's lesson sweeps,
#               and the L1 gather probe (from the L1, the L2 and shared memory; and with shuffles beside the
#               loads, whether the two share a unit). Its kernel edits' profiles
#               (python -m cudabook.profile --edit EDIT msda [--size ...]) need a copy with git history when the
#               edit names a BASE: carry a clone (git clone -q . .clean), not a git archive
#   msda-next   the experiments lesson 05 does not read yet (about 5 minutes): the head-pairs edit timed (10
#               rounds, 2 s back to back) and profiled against the rung on both workloads, and the reference
#               gather in both orders of its groups beside rung 05 (tools/probe_reference_gather.py)
#   timings     the lab solutions and the lessons the guide's table needs, timed (tools/time_lessons.py)
#   timings-1, timings-2, timings-3
#               every notebook timed, in three calls of at most 9 minutes each (the whole guide's table on a
#               card: resampling and attention lessons; GEMM and deformable-attention lessons; setup and the
#               lab solutions), each merged into results/timings/<gpu>.json (carry that file's latest copy)
#   timings-spread
#               every notebook timed in ONE call, spread over all the machine's GPUs (a 2-GPU kind: about 8
#               minutes on two H200s; the same device time as one GPU), merged the same way; the GUIDE says
#               the run was spread
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
phase=${1:?"usage: bash tools/gpu_session.sh stale|bench-a|bench-b|records|readings|msda|msda-next|timings|timings-1|timings-2|timings-3|timings-spread"}
step() {                       # step SECONDS NAME COMMAND...: run with a limit, log to $OUT/NAME.log, say how it went
  local limit=$1 name=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: rc $? in $(( $(date +%s) - t0 )) s"
}
case "$phase" in
  stale)
    step 540 stale python3 tools/stale_records.py --record --limit 240 \
      --gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" ;;
  bench-a)
    step 420 bench_gemm_attention python3 -m cudabook.results gemm attention ;;
  bench-b)
    step 480 bench_resample_msda python3 -m cudabook.results resample msda ;;
  records)
    step 200 profile_msda python3 -m cudabook.profile --record msda
    step 120 profile_attention python3 -m cudabook.profile --record attention 03 06
    for p in '{"multicast": 0}' '{"cluster": 1}' '{"tma_store": false}' '{"cluster": 1, "tma_store": false}' \
             '{"cluster": 4}'; do
      step 60 "variant_gemm07_$(echo "$p" | tr -dc 'a-z0-9')" python3 -m cudabook.profile --record gemm 07 --params "$p"
    done
    step 60 variant_gemm06_group_m1 python3 -m cudabook.profile --record gemm 06 --params '{"group_m": 1}'
    step 90 variant_msda04_strided python3 -m cudabook.profile --record msda 04 --params '{"strided": true}'
    step 90 occupancy python3 -m pytest -q -m hopper tests/machinery/test_occupancy.py ;;
  readings)
    step 150 clocks python3 tools/probe_clocks.py
    step 90 timeline_07 python3 tools/probe_timeline.py --track resample --stage 07_tma
    step 90 timeline_08 python3 tools/probe_timeline.py --track resample --stage 08_fused_gather
    step 120 tma_rate python3 tools/probe_tma_rate.py
    for c in "" "--causal"; do for d in 128 64; do
      for p in '{"persistent": false}' '{"persistent": true}' '{"persistent": true, "schedule": "dynamic"}'; do
        step 60 "attention_grid_d$d${c#--}_$(echo "$p" | tr -dc 'a-z')" python3 tools/probe_attention_waves.py \
          --d $d $c --heads 64 --params "$p" --out "$OUT/attention_grid_d$d${c#--}_$(echo "$p" | tr -dc 'a-z').json"
      done
    done; done ;;
  msda)
    step 200 profile_msda python3 -m cudabook.profile --record msda
    step 90 variant_msda04_strided python3 -m cudabook.profile --record msda 04 --params '{"strided": true}'
    step 120 sweeps_msda05 python3 tools/record_sweeps.py --track msda --only 05
    step 200 l1_gather python3 tools/probe_l1_gather.py
    step 60 l1_shuffles python3 tools/probe_l1_gather.py --pieces 64 64s --span l1 smem regs --shuffles 0 2 8 ;;
  msda-next)
    step 120 head_pairs python3 tools/probe_kernel_edit.py --edit tools/kernel_edits/msda05_head_pairs.py \
      --workloads all --rounds 10 --sustained 2
    step 60 head_pairs_profile python3 -m cudabook.profile --edit msda05_head_pairs msda
    uniform='{"N": 48, "Lq": 15420, "M": 8, "levels": [[100, 116], [50, 58], [25, 29], [13, 15]], "P": 8, "D": 32,
      "locations": "uniform"}'                        # the benchmark's second workload
    step 60 head_pairs_profile_uniform python3 -m cudabook.profile --edit msda05_head_pairs msda --size "$uniform"
    step 120 reference_order python3 tools/probe_reference_gather.py ;;
  timings)
    step 540 timings python3 tools/time_lessons.py --runner exec --out "$OUT/timings" solutions \
      notebooks/gemm/09_sizes.ipynb notebooks/msda ;;
  timings-1)
    export CUDABOOK_CELL_SECONDS=5       # the cells of 5 s or more kept in the record too (where the time goes)
    step 540 timings python3 tools/time_lessons.py --runner exec --out results/timings notebooks/resample \
      notebooks/attention ;;
  timings-2)
    export CUDABOOK_CELL_SECONDS=5
    step 540 timings python3 tools/time_lessons.py --runner exec --out results/timings notebooks/gemm notebooks/msda ;;
  timings-3)
    export CUDABOOK_CELL_SECONDS=5
    step 540 timings python3 tools/time_lessons.py --runner exec --out results/timings notebooks/00_setup.ipynb \
      notebooks/00_tracks.ipynb solutions ;;
  timings-spread)
    export CUDABOOK_CELL_SECONDS=5
    step 560 timings python3 tools/time_lessons.py --runner exec --gpus 0 --out results/timings ;;
  *) echo "unknown phase $phase"; exit 2 ;;
esac
tar -cf "$OUT/results.tar" results
tail -n 3 "$OUT"/*.log
