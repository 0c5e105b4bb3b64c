"""Which kernels a track's peers launch (GPU): the library's own choice, read from PyTorch's profiler.

For each workload of the track's benchmark (or the first, by default), each peer of its HEAD_TO_HEAD pairs,
called through the track's peer_calls on fresh inputs: a few calls to warm up, then CALLS calls under
torch.profiler, and every GPU activity they caused, with its count and mean time. A library's kernel name is
its own (cuBLAS's nvjet and sm90_xmma names, cuDNN's, Triton's from torch.compile) and not documented; a lesson
may read the tile shape or the cluster a name suggests, saying so. Written to
results/readings/<gpu>_<track>_<stage>_peer_kernels.json for the rung each peer is set against (--out: another
folder), which cudabook.results.readings(track, stage, "peer_kernels") reads.

    python tools/probe_peer_kernels.py --track gemm --workloads all
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudabook import device, peers, results  # noqa: E402  (decides simulator or GPU before numba is imported)
from cudabook import track as tracks  # noqa: E402

WARMUP, CALLS = 3, 5


def kernels_of(call) -> list[dict]:
    """The GPU activities of CALLS calls of `call` (after WARMUP more): [{name, count, mean_us}], the longest
    first; count is per call."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(WARMUP):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            call()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        if getattr(e.device_type, "name", "") != "CUDA" or not e.count:
            continue
        total = getattr(e, "device_time_total", None)
        if total is None:
            total = e.cuda_time_total
        rows.append({"name": e.key, "count": round(e.count / CALLS, 2), "mean_us": round(total / e.count, 2)})
    return sorted(rows, key=lambda r: -r["mean_us"] * r["count"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--track", required=True, choices=tracks.TRACKS)
    ap.add_argument("--workloads", choices=("first", "all"), default="first")
    ap.add_argument("--out", help="the folder to write to (default results/readings/)")
    a = ap.parse_args(argv)
    t = tracks.get(a.track)
    pairs = getattr(t.bench, "HEAD_TO_HEAD", ())
    if not pairs or not hasattr(t.bench, "peer_calls"):
        print(f"{t.NAME}: its benchmark names no HEAD_TO_HEAD peers to read")
        return 1
    why = peers.available()
    if why:
        print(f"the peers cannot run here: {why}")
        return 1
    import torch
    gpu = device.gpu().name
    records = {}
    for stage, _ in pairs:
        records.setdefault(stage, {
            "track": t.NAME, "stage": stage, "kind": "the kernels the peers set against this rung launch "
            "(tools/probe_peer_kernels.py, torch.profiler)", "gpu": gpu, "commit": results._commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "workloads": []})
    sizes = t.bench.WORKLOADS if a.workloads == "all" else t.bench.WORKLOADS[:1]
    for size in sizes:
        name = t.bench.workload_name(**size)
        args, problem = t.bench.prepare(size)
        with t.bench.peer_calls(args, problem) as calls:
            for stage, peer in pairs:
                if peer not in calls:
                    continue
                got = kernels_of(calls[peer])
                records[stage]["workloads"].append({"workload": name, "peer": peer, "kernels": got})
                top = got[0] if got else {"name": "(none)", "mean_us": 0}
                print(f"{name} · {peer}: {top['name']} ({top['mean_us']:,.1f} µs)"
                      + (f" and {len(got) - 1} more" if len(got) > 1 else ""), flush=True)
        del problem
    for record in records.values():
        print(f"wrote {results.write_reading(record, 'peer_kernels', a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
