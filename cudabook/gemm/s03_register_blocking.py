"""03 register blocking: each thread computes a TM x TN block of C in registers.

Stage 02 reads two values from shared memory for every multiply-add, so shared memory, not arithmetic, limits
it. Here a block of THREADS threads computes a BM x BN tile of C, and each thread a TM x TN block of it (8 x 8:
64 accumulators in registers). At each step k of a tile a thread reads TM values of A and TN values of B from
shared memory (four 16-byte loads) and does TM * TN = 64 multiply-adds with them.

The pieces, all in one kernel:
- Block tile BM x BN = 128 x 128, stepping along K by BK = 16. THREADS = (BM / TM) * (BN / TN) = 256.
- Global loads are 16 bytes (8 bf16) per thread: the A tile (128 rows x 16) and the B tile (16 rows x 128)
  are 256 vectors each, one per thread. They are widened to float32 once, when stored to shared memory.
- The A tile is stored transposed, As[k, m]: then the TM values of A a thread needs at step k are
  consecutive in shared memory, like the TN values of B, and both are read with 16-byte shared loads.
- A thread's TM rows are two runs of TM / 2, BM / 2 apart (and its TN columns two runs of TN / 2): the 8
  threads of a quarter warp then read 128 consecutive bytes of B, without bank conflicts.
- Two shared buffers: the loads of tile t go out before the block computes tile t - 1 and stay in flight,
  in registers, meanwhile; then they are stored to the other buffer. One barrier per tile is enough.
- The accumulators are `cuda.local.array`s, but they live in registers: every index into them is a
  compile-time constant once LLVM has fully unrolled the loops over TM, TN and the loads (their trip counts
  are the module's constants). An index known only at run time would put them in (slow) local memory.
- The loop over the BK steps of a tile is too long for LLVM to unroll; two nested loops (BK / 2 times 2)
  get the inner one unrolled, which halves the loop overhead.

Ragged shapes: when K and N are multiples of 8 (every row 16-byte aligned) the loads are 16-byte vectors,
guarded per vector (a vector is wholly inside or wholly outside); otherwise the same kernel compiled with
VEC = False loads element by element, each guarded. Past the edges the tiles get zeros. C is stored a word
(two bf16) at a time, element by element at the ragged edge.

Where Numba stops: the constants are fixed at compile time through globals (see s02's `specialise`); there
is no way to ask for a loop to be unrolled other than by the shape of the code (LLVM decides), and registers can
only be capped (launch_bounds, which `launch` sets, or max_registers), not allotted; there is no `ldmatrix`,
`mma`, `cp.async` or TMA, so no tensor cores: a bf16 GEMM on an H100 is a tensor-core job, and the next rung is
CUDA C++.
"""
import numpy as np
from numba import cuda, float32, uint32

from .. import SIMULATOR
from ..bits import bf16_to_f32, f32_to_bf16
from ..kit.params import check_params
from ..kit.numba_rung import positive_int, python_function, specialise
from ..vectors import loader

NAME = "03_register_blocking"
TITLE = "2-D register blocking"

# The kernel's own constants (the GPU's defaults; tiny in the simulator, where every thread is a Python thread).
BM, BN, BK = (32, 32, 8) if SIMULATOR else (128, 128, 16)   # the block's tile of C, and its step along K
TM, TN = 8, 8                          # the thread's block of C
THREADS = (BM // TM) * (BN // TN)      # threads a block
A_VECS, B_VECS = BM * BK // 8, BK * BN // 8    # 16-byte vectors in the A tile and in the B tile
A_LOADS = -(-A_VECS // THREADS)        # vectors of the A tile each thread loads (the last round may be partial)
B_LOADS = -(-B_VECS // THREADS)        # ... and of the B tile
A_WORDS, B_WORDS = 4 * A_LOADS, 4 * B_LOADS     # registers (uint32) that hold them (a shape must be a constant)
TN_WORDS = TN // 2                     # a row of the thread's block of C as words of two bf16
K_UNROLL = 2                           # steps k of a tile per loop iteration (see the kernel)
VEC = True                             # K and N multiples of 8: 16-byte loads (else element by element)

PARAMS = {
    "bm": BM,     # rows of C a block computes
    "bn": BN,     # columns of C a block computes
    "bk": BK,     # step along K (a multiple of 8)
    "tm": TM,     # rows of C a thread computes (even)
    "tn": TN,     # columns of C a thread computes (a multiple of 4)
}

# ----------------------------------------------------------------------------------------------------------
# Wide accesses: 8 bf16 (16 bytes) loaded as four uint32 words, 2 bf16 stored as one word (a word holds two
# bf16, the lower address in the low half), and 4 float32 (16 bytes) loaded from shared memory. On the GPU
# one instruction each (ld.global.v4.u32, st.global.u32, ld.shared.v4.f32); the caller guarantees the
# alignment (16-byte rows, col a multiple of 8, resp. 2, resp. 4). In the simulator, plain Python.
# Shared stores of 4 float32 (16 bytes) likewise. The shared-memory load is cudabook.vectors'.
# ----------------------------------------------------------------------------------------------------------
if SIMULATOR:
    def _word(x, y):
        return np.uint32(np.uint32(x) | (np.uint32(y) << np.uint32(16)))

    from ..simalign import check as _aligned16

    def load_bf16x8(a, r, col):
        """a[r, col:col+8] as four uint32 words."""
        _aligned16(a, (r, col), 16, "load")
        return (_word(a[r, col], a[r, col + 1]), _word(a[r, col + 2], a[r, col + 3]),
                _word(a[r, col + 4], a[r, col + 5]), _word(a[r, col + 6], a[r, col + 7]))

    def store_bf16x2(c, r, col, w):
        """c[r, col:col+2] = the two bf16 in word w."""
        c[r, col] = np.uint16(w & np.uint32(0xFFFF))
        c[r, col + 1] = np.uint16(w >> np.uint32(16))

    def store_f32x4(x, s, k, i, v0, v1, v2, v3):
        """x[s, k, i:i+4] = v0, v1, v2, v3 in a float32 shared array."""
        _aligned16(x, (s, k, i), 16, "shared-memory store")
        x[s, k, i] = v0
        x[s, k, i + 1] = v1
        x[s, k, i + 2] = v2
        x[s, k, i + 3] = v3
else:  # pragma: no cover - GPU only
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    def _vector_pointer(context, builder, array_type, array, indices, words):
        ary = context.make_array(array_type)(context, builder, array)
        ptr = cgutils.get_item_pointer(context, builder, array_type, ary, indices, wraparound=False)
        return builder.bitcast(ptr, ir.VectorType(ir.IntType(32), words).as_pointer())

    @intrinsic
    def load_bf16x8(typingctx, a, r, col):
        sig = types.UniTuple(types.uint32, 4)(a, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            ptr = _vector_pointer(context, builder, signature.args[0], args[0], args[1:], 4)
            vec = builder.load(ptr, align=16)
            words = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, words)
        return sig, codegen

    @intrinsic
    def store_bf16x2(typingctx, c, r, col, w):
        sig = types.void(c, types.intp, types.intp, types.uint32)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, args[1:3], wraparound=False)
            builder.store(args[3], builder.bitcast(ptr, ir.IntType(32).as_pointer()), align=4)
            return context.get_dummy_value()
        return sig, codegen

    @intrinsic
    def store_f32x4(typingctx, x, s, k, i, v0, v1, v2, v3):
        f = types.float32
        sig = types.void(x, types.intp, types.intp, types.intp, f, f, f, f)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, args[1:4], wraparound=False)
            vec = ir.Constant(ir.VectorType(ir.FloatType(), 4), ir.Undefined)
            for n in range(4):
                vec = builder.insert_element(vec, args[4 + n], ir.Constant(ir.IntType(32), n))
            builder.store(vec, builder.bitcast(ptr, ir.VectorType(ir.FloatType(), 4).as_pointer()), align=16)
            return context.get_dummy_value()
        return sig, codegen


load_f32x4 = loader(4, 3, "shared-memory load", "float32")      # x[s, k, i:i+4] of a float32 shared array


@cuda.jit(device=True, forceinline=True)
def low_f32(w):
    """The bf16 in the low half of a word, as float32."""
    return bf16_to_f32(w & np.uint32(0xFFFF))


@cuda.jit(device=True, forceinline=True)
def high_f32(w):
    """The bf16 in the high half of a word, as float32."""
    return bf16_to_f32(w >> np.uint32(16))


@cuda.jit(device=True, forceinline=True)
def pack_bf16x2(x, y):
    """Two float32, rounded to bf16, packed in a word (x in the low half)."""
    return np.uint32(np.uint32(f32_to_bf16(x)) | (np.uint32(f32_to_bf16(y)) << np.uint32(16)))


@cuda.jit(device=True, forceinline=True)
def load_run(dst, off, src, s, k, start, n):
    """dst[off:off+n] = src[s, k, start:start+n]: 16-byte shared loads when n is a multiple of 4."""
    if n % 4 == 0:
        for i in range(0, n, 4):
            x0, x1, x2, x3 = load_f32x4(src, s, k, start + i)
            dst[off + i] = x0
            dst[off + i + 1] = x1
            dst[off + i + 2] = x2
            dst[off + i + 3] = x3
    else:
        for i in range(n):
            dst[off + i] = src[s, k, start + i]


@cuda.jit(device=True, forceinline=True)
def guarded_word(a, r, col, cols):
    """a[r, col:col+2] as one word (col in the low half), each element zero where its column >= cols."""
    w = np.uint32(0)
    if col < cols:
        w = np.uint32(a[r, col])
    if col + 1 < cols:
        w |= np.uint32(a[r, col + 1]) << np.uint32(16)
    return w


@cuda.jit(device=True, forceinline=True)
def load_bf16x8_guarded(a, r, col, rows, cols):
    """a[r, col:col+8] as four words, element by element: zero where r >= rows or the column >= cols."""
    w0 = w1 = w2 = w3 = np.uint32(0)
    if r < rows:
        w0 = guarded_word(a, r, col, cols)
        w1 = guarded_word(a, r, col + 2, cols)
        w2 = guarded_word(a, r, col + 4, cols)
        w3 = guarded_word(a, r, col + 6, cols)
    return w0, w1, w2, w3


@cuda.jit(device=True, forceinline=True)
def load_vector(regs, l, a, r, col, rows, cols, vec):
    """regs[4 l : 4 l + 4] = a[r, col:col+8] as four words, zero where r >= rows or the column >= cols: one
    16-byte load when `vec` (the kernel's VEC: cols a multiple of 8, so a vector is wholly inside or wholly
    outside), else element by element."""
    if vec:
        w0 = w1 = w2 = w3 = np.uint32(0)
        if r < rows and col < cols:
            w0, w1, w2, w3 = load_bf16x8(a, r, col)
    else:
        w0, w1, w2, w3 = load_bf16x8_guarded(a, r, col, rows, cols)
    regs[4 * l] = w0
    regs[4 * l + 1] = w1
    regs[4 * l + 2] = w2
    regs[4 * l + 3] = w3


@cuda.jit
def gemm_blocked(a, b, c):
    As = cuda.shared.array((2, BK, BM), float32)    # two buffers; A transposed: As[s, k, m] = A[m0 + m, k0 + k]
    Bs = cuda.shared.array((2, BK, BN), float32)    # Bs[s, k, n] = B[k0 + k, n0 + n]
    acc = cuda.local.array((TM, TN), float32)       # the thread's block of C: registers (constant indices)
    af = cuda.local.array(TM, float32)              # A values for one step k
    bf = cuda.local.array(TN, float32)              # B values for one step k
    ra = cuda.local.array(A_WORDS, uint32)          # the next tile's A vectors, on their way to shared memory
    rb = cuda.local.array(B_WORDS, uint32)          # ... and B's
    M, K = a.shape
    N = b.shape[1]
    tid = cuda.threadIdx.x
    tx = tid % (BN // TN)                           # this thread's columns: tx * TN/2 + j, and BN/2 further
    ty = tid // (BN // TN)                          # this thread's rows: ty * TM/2 + i, and BM/2 further
    m0 = cuda.blockIdx.y * BM
    n0 = cuda.blockIdx.x * BN
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = float32(0.0)

    # One pass per tile t, plus one: (1) issue the global loads of tile t into registers, (2) compute on tile
    # t - 1 from shared memory while those loads are in flight, (3) store tile t into buffer t % 2, barrier.
    # One barrier per tile is enough: buffer t % 2 was last read in pass t - 1 (tile t - 2), and a thread
    # can only store in pass t after every thread has passed the barrier that ends pass t - 1.
    n_tiles = (K + BK - 1) // BK
    for t in range(n_tiles + 1):
        if t < n_tiles:
            # (1) Vector v of the A tile: row v // (BK/8), columns 8 (v % (BK/8)) + 0..7; of the B tile: row
            # v // (BN/8), columns 8 (v % (BN/8)) + 0..7. Neighbouring threads read neighbouring 16 bytes.
            k0 = t * BK
            for l in range(A_LOADS):
                v = tid + l * THREADS
                if A_VECS % THREADS == 0 or v < A_VECS:
                    load_vector(ra, l, a, m0 + v // (BK // 8), k0 + (v % (BK // 8)) * 8, M, K, VEC)
            for l in range(B_LOADS):
                v = tid + l * THREADS
                if B_VECS % THREADS == 0 or v < B_VECS:
                    load_vector(rb, l, b, k0 + v // (BN // 8), n0 + (v % (BN // 8)) * 8, K, N, VEC)

        if t > 0:
            # (2) Tile t - 1: at each step k, TM values of A and TN of B from shared memory, TM x TN FMAs.
            s = (t - 1) % 2
            for k0 in range(0, BK, K_UNROLL):       # the inner loop has a constant trip count: LLVM unrolls it
                for k in range(k0, k0 + K_UNROLL):
                    load_run(af, 0, As, s, k, ty * (TM // 2), TM // 2)                 # rows ty * TM/2 + i
                    load_run(af, TM // 2, As, s, k, BM // 2 + ty * (TM // 2), TM // 2)  # and BM/2 further
                    load_run(bf, 0, Bs, s, k, tx * (TN // 2), TN // 2)
                    load_run(bf, TN // 2, Bs, s, k, BN // 2 + tx * (TN // 2), TN // 2)
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += af[i] * bf[j]

        if t < n_tiles:
            # (3) Tile t from registers to buffer t % 2, widened to float32; A transposed.
            s = t % 2
            for l in range(A_LOADS):
                v = tid + l * THREADS
                if A_VECS % THREADS == 0 or v < A_VECS:
                    r = v // (BK // 8)
                    col = (v % (BK // 8)) * 8
                    for w in range(4):
                        As[s, col + 2 * w, r] = low_f32(ra[4 * l + w])
                        As[s, col + 2 * w + 1, r] = high_f32(ra[4 * l + w])
            for l in range(B_LOADS):
                v = tid + l * THREADS
                if B_VECS % THREADS == 0 or v < B_VECS:
                    r = v // (BN // 8)
                    col = (v % (BN // 8)) * 8
                    for w in range(0, 4, 2):                # 16-byte shared stores: 4 floats each
                        store_f32x4(Bs, s, r, col + 2 * w, low_f32(rb[4 * l + w]), high_f32(rb[4 * l + w]),
                                    low_f32(rb[4 * l + w + 1]), high_f32(rb[4 * l + w + 1]))
            cuda.syncthreads()                      # buffer t % 2 is complete

    # Round once: pairs of neighbouring columns into words of two bf16. (Two loops rather than one: LLVM
    # unrolls each fully, so every index into acc stays a constant and acc stays in registers.)
    cw = cuda.local.array((TM, TN_WORDS), uint32)
    for i in range(TM):
        for j in range(TN_WORDS):
            cw[i, j] = pack_bf16x2(acc[i, 2 * j], acc[i, 2 * j + 1])
    # Store. Row i of the thread's block is C row m0 + (i // (TM/2)) * BM/2 + ty * TM/2 + i % (TM/2); word j
    # holds columns n0 + (j // (TN/4)) * BN/2 + tx * TN/2 + 2 (j % (TN/4)) and the next one.
    for i in range(TM):
        row = m0 + (i // (TM // 2)) * (BM // 2) + ty * (TM // 2) + i % (TM // 2)
        if row < M:
            for j in range(TN_WORDS):
                col = n0 + (j // (TN // 4)) * (BN // 2) + tx * (TN // 2) + 2 * (j % (TN // 4))
                if VEC and col + 1 < N:
                    store_bf16x2(c, row, col, cw[i, j])             # 4 bytes (col even, N % 8 == 0)
                else:                                               # the ragged edge: element by element
                    if col < N:
                        c[row, col] = np.uint16(cw[i, j] & np.uint32(0xFFFF))
                    if col + 1 < N:
                        c[row, col + 1] = np.uint16(cw[i, j] >> np.uint32(16))


# ----------------------------------------------------------------------------------------------------------
def constants(bm=BM, bn=BN, bk=BK, tm=TM, tn=TN, vec=VEC):
    """The kernel's compile-time constants for these launch parameters; ValueError naming a rule broken."""
    bm, bn, bk = positive_int("bm", bm), positive_int("bn", bn), positive_int("bk", bk)
    tm, tn = positive_int("tm", tm), positive_int("tn", tn)
    if tm % 2 or tn % 4:
        raise ValueError(f"tm must be even and tn a multiple of 4 (a thread's rows and columns are two runs of "
                         f"tm/2 and tn/2, and columns are stored in pairs), got tm={tm}, tn={tn}")
    if bm % tm or bn % tn:
        raise ValueError(f"bm must be a multiple of tm and bn of tn, got bm={bm}, tm={tm}, bn={bn}, tn={tn}")
    if bk % 8 or bn % 8:
        raise ValueError(f"bk and bn must be multiples of 8 (tiles are loaded 8 bf16 at a time), got bk={bk}, bn={bn}")
    threads = (bm // tm) * (bn // tn)
    if threads > 1024:
        raise ValueError(f"(bm / tm) * (bn / tn) = {threads} threads a block: at most 1024")
    smem = 2 * bk * (bm + bn) * 4
    if smem > 48 * 1024:
        raise ValueError(f"2 buffers x bk x (bm + bn) x 4 bytes = {smem} bytes of shared memory: at most 49152 "
                         f"(Numba's static shared arrays)")
    a_loads, b_loads = -(-(bm * bk // 8) // threads), -(-(bk * bn // 8) // threads)
    return dict(BM=bm, BN=bn, BK=bk, TM=tm, TN=tn, THREADS=threads, A_VECS=bm * bk // 8, B_VECS=bk * bn // 8,
                A_LOADS=a_loads, B_LOADS=b_loads, A_WORDS=4 * a_loads, B_WORDS=4 * b_loads, TN_WORDS=tn // 2,
                VEC=bool(vec))


def vector_ok(p):
    """16-byte loads need every row of A and B to start 16-byte aligned: K and N multiples of 8."""
    M, N, K = p.shape
    aligned = SIMULATOR or all(x.device_ctypes_pointer.value % 16 == 0 for x in (p.a, p.b, p.c))
    return K % 8 == 0 and N % 8 == 0 and aligned


def launch(p, kernel=None, **params):
    check_params(params, PARAMS)
    const = constants(**{k: params.get(k, PARAMS[k]) for k in PARAMS}, vec=vector_ok(p))
    kernel = specialise(kernel or gemm_blocked, launch_bounds=const["THREADS"], **const)
    M, N, K = p.shape
    grid = ((N + const["BN"] - 1) // const["BN"], (M + const["BM"] - 1) // const["BM"])
    kernel[grid, const["THREADS"]](p.a, p.b, p.c)



def ptx(vec=True, cc=(9, 0), **params):
    """The kernel's PTX for these launch parameters. Look for `.local` (local memory: it should not be
    there), `ld.shared.v4.f32` and `ld.global.v4.u32`.

    Numba's compiler needs no GPU, only NVVM: in the simulator this runs in a fresh Python process that
    imports cudabook as if a GPU were there (the simulator itself compiles nothing)."""
    check_params(params, PARAMS)
    const = constants(**{k: params.get(k, PARAMS[k]) for k in PARAMS}, vec=vec)
    if SIMULATOR:
        return _ptx_elsewhere(vec, cc, params)
    import types as pytypes

    fn = python_function(gemm_blocked)
    copy = pytypes.FunctionType(fn.__code__, dict(fn.__globals__, **const), fn.__name__)
    text, _ = cuda.compile_ptx(copy, "(uint16[:, ::1], uint16[:, ::1], uint16[:, ::1])", cc=tuple(cc))
    return text


_CHILD = """
import importlib.util, os, sys
sys.path.insert(0, {root!r})
spec = importlib.util.spec_from_file_location("cudabook.device", os.path.join({root!r}, "cudabook", "device.py"))
dev = importlib.util.module_from_spec(spec)
sys.modules["cudabook.device"] = dev
spec.loader.exec_module(dev)
dev.has_gpu = lambda: True               # compile as for a GPU: Numba's compiler, not its simulator
from cudabook.gemm import s03_register_blocking as s03
sys.stdout.write(s03.ptx(vec={vec!r}, cc={cc!r}, **{params!r}))
"""


def _ptx_elsewhere(vec, cc, params):
    import os
    import pathlib
    import subprocess
    import sys
    root = str(pathlib.Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDABOOK_SET_CUDASIM")}
    env["CUDABOOK_COMPILE_ONLY"] = "1"      # the child decides "no simulator" when device is imported, not after
    done = subprocess.run([sys.executable, "-c", _CHILD.format(root=root, vec=vec, cc=tuple(cc), params=params)],
                          capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise RuntimeError("could not compile to PTX without a GPU (Numba needs NVVM, from the nvidia-nvvm "
                           "package): " + (done.stderr.strip().splitlines() or ["no message"])[-1])
    return done.stdout
