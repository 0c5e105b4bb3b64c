"""Ask the driver for its verdict on every worked tensor-map description (cudabook.tma.CASES and PROBES) and
record them in results/tma/driver_verdicts.json, with the GPU and driver that gave them. A CPU test then
checks cudabook.tma.check_tiled against these recorded verdicts, not against its own expectations.

    python tools/record_tma_verdicts.py            (on a GPU of compute capability 9.0 or newer)
"""
import json
import pathlib
import sys

from cudabook import device, tma

OUT = pathlib.Path(__file__).resolve().parents[1] / "results" / "tma" / "driver_verdicts.json"


def verdict(kwargs, base):
    """'accepts' or 'rejects' (CUDA_ERROR_INVALID_VALUE, or a value the bindings refuse to pass)."""
    try:
        tma.encode_tiled(**dict(kwargs, address=base + kwargs.get("address", 0)), validate=False)
    except tma.TensorMapError as e:
        if e.rule == "driver" and e.driver_error == "CUDA_ERROR_INVALID_VALUE":
            return "rejects"
        raise
    except (ValueError, TypeError):
        return "rejects"
    return "accepts"


def main():
    gpu = device.gpu()
    if gpu is None or gpu.compute_capability < (9, 0):
        sys.exit(f"needs a GPU of compute capability 9.0+: {device.why_no_gpu() or gpu.cc}")
    from cuda.bindings import driver as drv
    from cuda.core import Device
    Device(0).set_current()
    err, base = drv.cuMemAlloc(1 << 20)
    assert err == drv.CUresult.CUDA_SUCCESS, err
    try:
        base = int(base)
        cases = {d: verdict(kw, base) for d, kw, _ in tma.CASES if _ not in tma.HOST_ONLY_RULES}
        probes = {d: verdict(kw, base) for d, kw, _ in tma.PROBES}
    finally:
        drv.cuMemFree(base)
    info = device.describe()
    record = {"gpu": gpu.name, "driver": gpu.driver_version, "cuda_bindings": info["packages"]["cuda-bindings"],
              "note": "the driver's verdict on each description of cudabook.tma.CASES (host-only rules left out) "
                      "and PROBES; written by tools/record_tma_verdicts.py",
              "cases": cases, "probes": probes}
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(cases)} cases and {len(probes)} probes recorded in {OUT} ({gpu.name}, driver {gpu.driver_version})")


if __name__ == "__main__":
    main()
