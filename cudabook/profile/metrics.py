"""What a profile reads: the quantities of the table and the ncu metrics that give them, the stall reasons and
what each means, the table's columns; and which metric names to ask this ncu for."""
from __future__ import annotations

import re


# Each quantity of the table, with the ncu metric names that give it, preferred first (names change between
# Nsight Compute versions: dram__bytes_read became dram__bytes_op_read in recent ones).
METRICS = {
    "duration": ["gpu__time_duration.sum"],
    "dram_pct": ["dram__throughput.avg.pct_of_peak_sustained_elapsed",
                 "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_bytes": ["dram__bytes.sum"],
    "dram_per_second": ["dram__bytes.sum.per_second"],
    "dram_read": ["dram__bytes_read.sum", "dram__bytes_op_read.sum"],
    "dram_write": ["dram__bytes_write.sum", "dram__bytes_op_write.sum"],
    "load_sectors": ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
    "load_requests": ["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
    # of the 32-byte sectors global loads touch at L1, the share it already held (a gather's reuse)
    "l1_hit": ["l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct"],
    "l2_hit": ["lts__t_sector_hit_rate.pct"],
    # how busy the L1's data pipe was (its wavefronts, % of peak): a gather whose loads hit can run into it
    "l1_pipe": ["l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed"],
    "occupancy": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "theoretical_occupancy": ["sm__maximum_warps_per_active_cycle_pct"],
    "registers": ["launch__registers_per_thread"],
    # how busy the schedulers' issue slots were, and each pipe (warp instructions executed on it, % of its peak):
    # a kernel that computes more than it moves runs into one of these before any memory limit
    "issue": ["smsp__issue_active.avg.pct_of_peak_sustained_active"],
    "pipe_alu": ["sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"],
    "pipe_fma": ["sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"],
    "pipe_fmaheavy": ["sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active"],
    "pipe_lsu": ["sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"],
    "pipe_xu": ["sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"],
}
PIPES = ("alu", "fma", "fmaheavy", "lsu", "xu")     # the pipes whose share the table's "busiest pipe" compares

# The stall breakdown: one metric per reason. The first family gives the share of the warps' cycles spent
# stalled for each reason; the second (older Nsight Compute) the cycles per issued instruction.
STALL_FAMILIES = [
    ("smsp__warp_issue_stalled_{}_per_warp_active.pct", "% of warp cycles"),
    ("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", "cycles per issued instruction"),
]
STALL_REASONS = ("long_scoreboard", "lg_throttle", "short_scoreboard", "mio_throttle", "barrier", "membar",
                 "wait", "not_selected", "selected", "math_pipe_throttle", "no_instruction", "branch_resolving",
                 "dispatch_stall", "drain", "imc_miss", "tex_throttle", "sleeping", "misc")

STALLS = {
    "long_scoreboard": "waiting for a load from global (or local) memory whose value the next instruction needs",
    "lg_throttle": "waiting for room in the queue of global/local memory instructions: too many in flight",
    "short_scoreboard": "waiting for shared memory (or a shuffle, or a special function) to deliver a value",
    "mio_throttle": "waiting for room in the queue of shared-memory, shuffle and special-function instructions",
    "barrier": "waiting at a block barrier (__syncthreads) for the block's other warps",
    "membar": "waiting at a memory fence",
    "wait": "a fixed, compiler-scheduled wait for a short-latency result",
    "not_selected": "ready to issue, but the scheduler picked another warp",
    "selected": "issuing an instruction (not a stall)",
    "math_pipe_throttle": "waiting for a busy arithmetic pipe",
    "no_instruction": "waiting for instructions to be fetched (an instruction-cache miss, or after a jump)",
    "branch_resolving": "waiting for a branch's target to be computed",
    "dispatch_stall": "its instruction held back by the dispatcher",
    "drain": "exiting: waiting for its last stores to leave",
    "imc_miss": "waiting for a constant missing from the constant cache",
    "tex_throttle": "waiting for room in the texture unit's queue",
    "sleeping": "asleep: all its threads blocked, yielded or in nanosleep",
    "misc": "other reasons",
}

COLUMNS = [  # (heading, row key, format)
    ("stage", "stage", "{}"), ("kernel", "kernel", "{}"), ("µs", "duration_us", "{:,.1f}"),
    ("DRAM % of peak", "dram_pct", "{:.1f}"), ("DRAM GB/s", "dram_GBps", "{:,.0f}"),
    ("MB read", "dram_read_MB", "{:,.1f}"), ("MB written", "dram_write_MB", "{:,.1f}"),
    ("load requests", "load_requests", "{:,.0f}"), ("sectors/request", "sectors_per_request", "{:.2f}"),
    ("L1 hit %", "l1_hit_pct", "{:.1f}"), ("L1 pipe %", "l1_pipe_pct", "{:.1f}"), ("L2 hit %", "l2_hit_pct", "{:.1f}"),
    ("occupancy %", "occupancy_pct", "{:.1f}"),
    ("limit %", "theoretical_occupancy_pct", "{:.0f}"), ("registers", "registers", "{:.0f}"),
    ("issue %", "issue_pct", "{:.1f}"), ("busiest pipe %", "busiest_pipe", "{}"),
]
COLUMN_NOTES = ("MB read, MB written: DRAM traffic. Load requests: warp-wide global load instructions at L1; "
                "sectors/request: 32-byte sectors each one touches at L1 (hits included). Occupancy: warp slots "
                "filled on average (achieved) and at most (limit).")
L1_NOTES = ("L1 hit %: the share of the global loads' sectors that L1 already held; L1 pipe %: how busy its data "
            "pipe was (wavefronts, % of peak).")
PIPE_NOTES = ("Issue: the schedulers' issue slots busy; busiest pipe: the arithmetic or load/store pipe with the "
              "largest share of its peak (alu: integer and logic; fma, fmaheavy: float multiply-adds and integer "
              "multiplies; lsu: memory; xu: special functions, conversions).")


def _base(metric: str) -> str:
    return metric.split(".", 1)[0]


def metric_names(available: set | None = None) -> list[str]:
    """The metrics to ask for: for each quantity the first name this GPU offers (the first name if unknown),
    and the stall reasons of the first stall family it offers."""
    names = []
    for candidates in METRICS.values():
        known = [c for c in candidates if available is None or _base(c) in available]
        names.append((known or candidates)[0])
    for family, _ in STALL_FAMILIES:
        pattern = re.compile("^" + re.escape(_base(family)).replace(r"\{\}", r"([a-z_]+?)") + "$")
        reasons = sorted(m.group(1) for m in map(pattern.match, available or ()) if m)
        if reasons:
            return names + [family.format(r) for r in reasons]
    return names + [STALL_FAMILIES[0][0].format(r) for r in STALL_REASONS]   # unknown: ask, drop what fails
