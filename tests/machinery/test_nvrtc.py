"""cudabook.nvrtc: compiling CUDA C++ to cubins with no GPU, caching, readable compile errors, SASS."""
import pytest

from cudabook import device, nvrtc

TINY = r'''
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + 1.0f;
}
'''

BROKEN = '''extern "C" __global__ void broken(float* x) {
    int i = threadIdx.x;
    x[i] = undefined_name * 2.0f;
}
'''


def _needs_sass():
    try:
        nvrtc.cuobjdump_path()
        nvrtc._tool_path("nvdisasm") or pytest.skip("nvdisasm is not installed: pip install nvidia-cuda-nvdisasm")
    except nvrtc.ToolMissing as e:
        pytest.skip(str(e))


def test_compiles_to_a_hopper_cubin_without_a_gpu():
    cubin = nvrtc.compile(TINY, arch="sm_90a", disk_cache=False)
    assert cubin[:4] == b"\x7fELF"          # a cubin is an ELF file of machine code, not PTX text


def test_default_arch():
    arch = nvrtc.default_arch()
    if device.gpu() is None:
        assert arch == "sm_90a"
    else:
        major, minor = device.compute_capability()
        assert arch.startswith(f"sm_{major}{minor}")


def test_memory_cache_hit():
    source = TINY + "\n// memory cache test\n"
    before = dict(nvrtc.stats)
    a = nvrtc.compile(source, arch="sm_90a", disk_cache=False)
    b = nvrtc.compile(source, arch="sm_90a", disk_cache=False)
    assert a == b
    assert nvrtc.stats["compiled"] == before["compiled"] + 1
    assert nvrtc.stats["memory_hits"] == before["memory_hits"] + 1


def test_disk_cache_hit(tmp_path, monkeypatch):
    monkeypatch.setattr(nvrtc, "CACHE_DIR", tmp_path)
    source = TINY + "\n// disk cache test\n"
    a = nvrtc.compile(source, arch="sm_90a", disk_cache=True)
    assert list(tmp_path.glob("*.cubin"))
    nvrtc.clear_cache()
    before = nvrtc.stats["disk_hits"]
    b = nvrtc.compile(source, arch="sm_90a", disk_cache=True)
    assert a == b and nvrtc.stats["disk_hits"] == before + 1


def test_options_and_defines_change_the_key():
    a = nvrtc.compile(TINY, arch="sm_90a", disk_cache=False)
    b = nvrtc.compile(TINY, arch="sm_90a", options=["-lineinfo"], disk_cache=False)
    c = nvrtc.compile(TINY, arch="sm_80", disk_cache=False)
    assert a != c and len(b) >= len(a)
    with pytest.raises(ValueError, match="unknown option"):
        nvrtc.compile(TINY, options=["--no-such-flag"], disk_cache=False)


def test_compile_error_shows_the_offending_line():
    with pytest.raises(nvrtc.CompileError) as info:
        nvrtc.compile(BROKEN, arch="sm_90a", name="broken.cu", disk_cache=False)
    message = str(info.value)
    assert "broken.cu:3: error" in message
    assert ">>    3 |     x[i] = undefined_name * 2.0f;" in message     # the line, numbered and marked
    assert "^^^" in message
    assert info.value.errors == [("broken.cu", 3, 'identifier "undefined_name" is undefined')]


def test_headers_from_the_pip_wheels():
    src = '#include <cuda/std/cstdint>\nextern "C" __global__ void k(cuda::std::uint32_t* p) { p[0] = 7u; }\n'
    assert nvrtc.compile(src, arch="sm_90a", include_cccl=True, disk_cache=False)[:4] == b"\x7fELF"


def test_sass_finds_instructions():
    _needs_sass()
    cubin = nvrtc.compile(TINY, arch="sm_90a", disk_cache=False)
    assert nvrtc.sass_lines(cubin, r"^STG")                  # the store
    assert nvrtc.sass_lines(cubin, r"^FFMA")                 # a * x + 1 fused
    assert "scale" in nvrtc.sass(cubin, "scale")


def test_resource_usage():
    try:
        nvrtc.cuobjdump_path()
    except nvrtc.ToolMissing as e:
        pytest.skip(str(e))
    usage = nvrtc.resource_usage(nvrtc.compile(TINY, arch="sm_90a", disk_cache=False))
    assert usage["scale"]["registers"] > 0 and usage["scale"]["local"] == 0


@pytest.mark.gpu
def test_load_and_launch():
    import ctypes

    import numpy as np
    from numba import cuda
    x = cuda.to_device(np.arange(1000, dtype=np.float32))
    kernel = nvrtc.load(nvrtc.compile(TINY), "scale")
    kernel.launch((1000 + 127) // 128, 128, [x.device_ctypes_pointer.value, 2.0, 1000],
                  [ctypes.c_void_p, ctypes.c_float, ctypes.c_int])
    np.testing.assert_array_equal(x.copy_to_host(), 2 * np.arange(1000, dtype=np.float32) + 1)


def test_which_kernels_may_be_launched_with_pdl():
    # the host decides from the source which kernels wait (griddepcontrol.wait) for the kernel before them:
    # per kernel, not in comments, and for a prepass whose dependent reads the inputs unwaited, before its trigger
    from cudabook.resample import s07_tma as s07, s08_fused_gather as s08
    tma, fused = s07.SOURCE.read_text(), s08.SOURCE.read_text()
    wait = 'asm volatile("griddepcontrol.wait;" ::: "memory");'
    trigger = 'asm volatile("griddepcontrol.launch_dependents;");'
    assert nvrtc.waits_for_prerequisite(tma, s07.KERNEL) and nvrtc.waits_before_trigger(tma, s07.INTERVALS)
    assert nvrtc.waits_for_prerequisite(fused, s08.KERNEL) and nvrtc.waits_before_trigger(fused, s08.FIND)
    # the streaming kernel's wait gone: the prepass's still counts for the prepass alone
    main_only = tma.replace("            " + wait, "            ")
    assert main_only.count(wait) == tma.count(wait) - 1
    assert not nvrtc.waits_for_prerequisite(main_only, s07.KERNEL)
    assert nvrtc.waits_for_prerequisite(main_only) and nvrtc.waits_before_trigger(main_only, s07.INTERVALS)
    # a wait left only in a comment is no wait
    commented = tma.replace("            " + wait, "            // " + wait)
    assert not nvrtc.waits_for_prerequisite(commented, s07.KERNEL)
    assert not nvrtc.waits_for_prerequisite("/* griddepcontrol.wait; */ __global__ void k() { }", "k")
    # the prepass that lets the streaming kernel start before it waits: not launched with PDL
    swapped = tma.replace(wait + "\n    " + trigger, trigger + "\n    " + wait)
    assert swapped != tma and not nvrtc.waits_before_trigger(swapped, s07.INTERVALS)
    assert not nvrtc.waits_before_trigger(tma, "no_such_kernel")
    assert nvrtc.waits_before_trigger("__global__ void k(int a) { asm volatile(\"griddepcontrol.wait;\"); }", "k")


WAIT = 'asm volatile("griddepcontrol.wait;" ::: "memory");'
TRIGGER = 'asm volatile("griddepcontrol.launch_dependents;");'


@pytest.mark.parametrize("body, waits", [
    (WAIT, True),
    ("cudaGridDependencySynchronize();", True),
    ('asm volatile ( " griddepcontrol.wait ;" ::: "memory");', True),
    ("#if 0\nx();\n#else\n" + WAIT + "\n#endif", True),
    ("// " + WAIT, False),
    ("/* " + WAIT + " */", False),
    ("#if 0\n" + WAIT + "\n#endif", False),
    ("#if 0\n#if 1\n#endif\n" + WAIT + "\n#endif", False),
    ('printf("griddepcontrol.wait;");', False),
    ("char c = '\"'; // " + WAIT, False),
])
def test_a_wait_is_read_where_the_code_runs_it(body, waits):
    # what the host reads as a wait decides whether a kernel may start early: a wait that is not one is a race
    source = "__device__ void k2() { " + WAIT + " }\n__global__ void k(int a) {\n" + body + "\n}\n"
    assert nvrtc.waits_for_prerequisite(source, "k") is waits
    assert nvrtc.waits_for_prerequisite(source)                     # (k2's wait, anywhere in the file)


@pytest.mark.parametrize("body, first", [
    (WAIT + "\n" + TRIGGER, True),
    (WAIT, True),                                            # no trigger: the next kernel starts at the end
    (TRIGGER + "\n" + WAIT, False),
    ("cudaTriggerProgrammaticLaunchCompletion();\n" + WAIT, False),
    ('asm volatile("griddepcontrol.launch_dependents ;");\n' + WAIT, False),
    (TRIGGER, False),
])
def test_a_prepass_must_wait_before_it_triggers(body, first):
    assert nvrtc.waits_before_trigger("__global__ void k(int a) {\n" + body + "\n}\n", "k") is first


def test_builds_in_threads_land_in_the_cache_and_a_failure_is_returned_not_raised():
    defines = [{"SCALE_BY": n} for n in range(4)]
    before = nvrtc.stats["compiled"]
    got = nvrtc.in_threads([lambda d=d: nvrtc.compile(TINY, arch="sm_90a", defines=d, disk_cache=False)
                            for d in defines] + [lambda: nvrtc.compile(BROKEN, arch="sm_90a", disk_cache=False)])
    assert all(c[:4] == b"\x7fELF" for c in got[:4]) and len(set(got[:4])) >= 1
    assert isinstance(got[4], nvrtc.CompileError)
    compiled = nvrtc.stats["compiled"]
    assert compiled >= before + 4
    again = [nvrtc.compile(TINY, arch="sm_90a", defines=d, disk_cache=False) for d in defines]
    assert again == got[:4] and nvrtc.stats["compiled"] == compiled      # from the cache: nothing compiled again
    assert nvrtc.in_threads([]) == []


def test_the_same_build_asked_by_several_threads_at_once_is_compiled_once():
    before = nvrtc.stats["compiled"]
    text = TINY.replace("1.0f", "3.0f")                   # a source no other test compiles
    got = nvrtc.in_threads([lambda: nvrtc.compile(text, arch="sm_90a", disk_cache=False)] * 6)
    assert len(set(got)) == 1 and got[0][:4] == b"\x7fELF"
    assert nvrtc.stats["compiled"] == before + 1          # the others waited for it and took it from the cache
    assert not nvrtc._building
