"""Per-kernel GPU durations (CUPTI, through torch.profiler) of torch.compile, stage 07 and stage 05 at the
benchmark size, on one data set: which kernels each launches and how long each one runs, without the gaps
between them. On the GPU machine:

    source tools/gpu_env.sh; python3 tools/profile_peers.py       # OUT=dir also keeps inductor's Triton code

What it showed on an H200 (2026-11-26): torch.compile runs two kernels, a searchsorted (about 6 us) and a fused
gather (about 59 us); 07 runs resample_intervals (about 5 us) and resample_tma (68-70 us); 05 runs
find_intervals (about 11 us) and resample_in_flight (62-66 us). The stage timings of cudabook.bench add the
gaps between back-to-back kernels (about 1-2 us each).
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cudabook  # noqa
import numpy as np
import torch
from torch.profiler import profile, ProfilerActivity
from numba import cuda
from cudabook.resample import peers
from cudabook.resample import inputs, upload, s05_double_buffered as s05, s07_tma as s07

B, S, T, D = 64, 4096, 4096, 256
st, sf, tt = inputs.random_problem(B, S, T, D, rng=np.random.default_rng(0))
dev = torch.device("cuda")
times = torch.from_numpy(st).to(dev)
feats = torch.from_numpy(sf.view(np.uint16).astype(np.int16)).to(dev).view(torch.bfloat16)
targets = torch.from_numpy(tt).to(dev)
f = torch.compile(peers.resample_torch)
for _ in range(3):
    f(times, feats, targets)
p = upload(st, sf, tt)
for _ in range(3):
    s07.launch(p); s05.launch(p)
torch.cuda.synchronize(); cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(10):
        f(times, feats, targets)
    torch.cuda.synchronize()
    for _ in range(10):
        s07.launch(p)
    cuda.synchronize()
    for _ in range(10):
        s05.launch(p)
    cuda.synchronize()
evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15))
evs.sort(key=lambda e: e.time_range.start)
for e in evs[:6] + evs[20:26] + evs[40:46]:   # a few of each: torch.compile, 07, 05
    print(f"{e.time_range.start:14.1f} {e.time_range.end - e.time_range.start:8.2f} us  {e.name[:90]}")
if os.environ.get("OUT"):
    import glob, shutil
    for path in glob.glob("/tmp/torchinductor_*/**/*.py", recursive=True):
        txt = open(path).read()
        if "searchsorted" in txt or "bucketize" in txt or "triton_" in txt:
            shutil.copy(path, os.path.join(os.environ["OUT"], os.path.basename(path)))
