"""Scratch for the Numba GEMM rungs (01-03): compile for sm_90 with no GPU, look at PTX / SASS, and (on a GPU)
time the rungs against cuBLAS.

    python tools/gemm_numba_try.py ptx [bm=128 tm=8 ...]     no GPU needed: PTX + SASS resource usage of rung 03
    python tools/gemm_numba_try.py time                      GPU: rungs 01-03 and cuBLAS at 4096 (03 at 8192)
"""
import importlib.util
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def fake_gpu():
    """Import cudabook as if a GPU were present, so Numba compiles (for PTX) instead of simulating."""
    spec = importlib.util.spec_from_file_location("cudabook.device", os.path.join(ROOT, "cudabook", "device.py"))
    dev = importlib.util.module_from_spec(spec)
    sys.modules["cudabook.device"] = dev
    spec.loader.exec_module(dev)
    dev.has_gpu = lambda: True
    sys.modules["cudabook.device"] = dev


def ptx_and_sass(kernel, constants, sig="(uint16[:, ::1], uint16[:, ::1], uint16[:, ::1])", cc=(9, 0)):
    from numba import cuda
    from cudabook.gemm.s02_smem_tiles import python_function
    fn = python_function(kernel)
    g = dict(fn.__globals__, **constants)
    copy = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    ptx, _ = cuda.compile_ptx(copy, sig, cc=cc, lineinfo=False)
    sass, usage = None, None
    try:
        from cuda.bindings import nvjitlink
        arch = f"-arch=sm_{cc[0]}{cc[1]}"
        h = nvjitlink.create(2, [arch, "-O3"])
        data = ptx.encode()
        nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "k")
        nvjitlink.complete(h)
        size = nvjitlink.get_linked_cubin_size(h)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(h, cubin)
        ilog = bytearray(nvjitlink.get_info_log_size(h))
        nvjitlink.get_info_log(h, ilog)
        nvjitlink.destroy([h]) if False else None
        import subprocess
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(bytes(cubin))
        usage = subprocess.run(["cuobjdump", "-res-usage", f.name], capture_output=True, text=True).stdout
        sass = subprocess.run(["cuobjdump", "-sass", f.name], capture_output=True, text=True).stdout
    except Exception as e:  # noqa: BLE001 - scratch
        usage = f"(no SASS: {type(e).__name__}: {e})"
    return ptx, sass, usage


def count(text, words):
    return {w: text.count(w) for w in words}


def main_ptx(args):
    fake_gpu()
    from cudabook.gemm import s03_register_blocking as s03
    params = {k: int(v) for k, v in (a.split("=") for a in args if "=" in a)}
    vec = "novec" not in args
    const = s03.constants(**{k: params.get(k, s03.PARAMS[k]) for k in s03.PARAMS}, vec=vec)
    ptx, sass, usage = ptx_and_sass(s03.gemm_blocked, const)
    print(const)
    print("PTX:", count(ptx, [".local", "ld.local", "st.local", "ld.shared.v4", "ld.shared.f32", "ld.shared.v2",
                              "st.shared.v4", "st.shared.f32", "ld.global.v4", "ld.v4", "fma.rn.f32", "bar.sync"]))
    print(usage)
    if sass:
        print("SASS:", count(sass, ["LDL", "STL", "LDS.128", "LDS.64", "LDS ", "STS.128", "STS ", "FFMA", "LDG.E.128",
                                    "LD.E.128", "BAR"]))
    if "dump" in args:
        open("/tmp/s03.ptx", "w").write(ptx)
        open("/tmp/s03.sass", "w").write(sass or "")


def main_time(args):
    """GPU: rungs 01-03 and cuBLAS (bf16, and fp32 SGEMM with TF32 off) at 4096, rung 03 at 8192, one process."""
    import numpy as np
    import cudabook
    from cudabook import bench, device, gemm
    from cudabook.gemm import s01_naive, s02_smem_tiles, s03_register_blocking as s03
    from cudabook.gemm.s02_smem_tiles import specialise
    import torch
    g = device.gpu()
    print(f"GPU: {g.name}, cc {g.cc}, {g.sms} SMs, driver {g.driver_version}; torch {torch.__version__}")

    def sample_ok(c, a, b, rows):
        got = c[rows].astype(np.float64)
        ref, bound = gemm.reference_with_bound(a[rows], b)
        return gemm.compare(got.astype(c.dtype), ref, bound).ok

    for size in (4096, 8192):
        a, b = gemm.random_problem(size, size, size)
        rows = np.r_[0:48, size // 2:size // 2 + 16, size - 48:size]
        p = gemm.upload(a, b)
        flops = 2.0 * size ** 3
        ta = torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
        tb = torch.from_numpy(b.view(np.int16)).cuda().view(torch.bfloat16)
        fa, fb = ta.float(), tb.float()
        torch.backends.cuda.matmul.allow_tf32 = False
        peers = {}
        for name, fn in (("cuBLAS bf16", lambda: torch.matmul(ta, tb)), ("cuBLAS SGEMM fp32", lambda: torch.matmul(fa, fb))):
            out = fn().to(torch.bfloat16).view(torch.int16).cpu().numpy().view(np.uint16).view(a.dtype)
            ms = bench.time_ms(fn, repeats=20, batch=5)
            peers[name] = ms
            print(f"{size}: {name:24s} {ms * 1e3:10.1f} us {flops / ms / 1e9:7.1f} TFLOP/s  correct={sample_ok(out, a, b, rows)}")
        sg, bf = peers["cuBLAS SGEMM fp32"], peers["cuBLAS bf16"]
        runs = []
        if size == 4096:
            runs += [("01_naive", s01_naive.launch, {}, 3), ("02_smem_tiles", s02_smem_tiles.launch, {}, 5),
                     ("02_smem_tiles tile=16", s02_smem_tiles.launch, {"tile": 16}, 5)]
        runs += [("03_register_blocking", s03.launch, {}, 20)]
        if size == 4096 and "quick" not in args:
            const = s03.constants(vec=True)
            k1 = specialise(s03.gemm_blocked, **const, K_UNROLL=1)
            runs += [("03 bk=8", s03.launch, {"bk": 8}, 20), ("03 K_UNROLL=1", s03.launch, {"kernel": k1}, 20),
                     ("03 tm=8 tn=4 (bn=64)", s03.launch, {"tn": 4, "bn": 64}, 20)]
        for name, launch, kw, reps in runs:
            p.poison()
            launch(p, **kw)
            ok = sample_ok(p.result(), a, b, rows)
            ms = bench.time_ms(lambda: launch(p, **kw), warmup=1, repeats=reps)
            print(f"{size}: {name:24s} {ms * 1e3:10.1f} us {flops / ms / 1e9:7.1f} TFLOP/s  {100 * sg / ms:5.1f} % of SGEMM"
                  f"  {100 * bf / ms:5.1f} % of cuBLAS bf16  correct={ok}")
        if size == 4096:
            for vec in (True, False):
                k = specialise(s03.gemm_blocked, **s03.constants(vec=vec))
                if not vec:
                    q = gemm.upload(*gemm.random_problem(100, 100, 100))
                    s03.launch(q)
                for sig, regs in (k.get_regs_per_thread() if isinstance(k.get_regs_per_thread(), dict) else {None: k.get_regs_per_thread()}).items():
                    print(f"03 vec={vec}: registers {regs}, local memory {k.get_local_mem_per_thread()} bytes/thread")
                t = s03.ptx(vec=vec, cc=g.compute_capability)
                print(f"03 vec={vec} PTX: .local {'.local' in t}, ld.shared.v4.f32 {t.count('ld.shared.v4.f32')}, "
                      f"st.shared.v4.f32 {t.count('st.shared.v4.f32')}, fma.rn.f32 {t.count('fma.rn.f32')}, "
                      f"ld.global.v4.u32 {t.count('ld.global.v4.u32')}")
            k2 = specialise(s02_smem_tiles.gemm_tiled, TILE=32)
            print(f"02: registers {k2.get_regs_per_thread()}, local {k2.get_local_mem_per_thread()}")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "ptx"
    if cmd == "ptx":
        main_ptx(sys.argv[2:])
    elif cmd == "time":
        main_time(sys.argv[2:])
