# %% [markdown]
# # Lab 08 · The gather: a warp sweeps its targets' rows
#
# In stage 08 a warp owns `nt` consecutive targets (at most `TPW`), and lane `i < nt` has already found target
# `i`'s interval. Everything before the gather is written. Each lane holds, for its own target:
#
# - `src`: where the lower of the two source rows starts in `f`, counted in vectors (`lo`'s row);
# - `dst32`: where the target's row of the output starts in `o`, counted in vectors;
# - `wt`: the weight, already clamped to [0, 1] (w = 0 gives the lower row, w = 1 the upper).
#
# Also in scope: `lane`, `nt`, `f` and `o` (the features and the output as `vec_t` pointers: 16 bytes a vector
# at D = 256), `VPR` (vectors in a row: `D / VEC`), `PPL` (vectors a lane moves from each row in one sweep: 2 by
# default, 1 when `VPR` is odd), `EPR = VPR / PPL` (slots in a row), `E = nt * EPR` (the warp's elements),
# `UNROLL`, and two helpers: `lerp_vec(a, c, w)` interpolates two vectors (`a` is the lower row), and
# `store_vec(p, v)` stores one.
#
# A row's `VPR` vectors are `EPR` **slots** of `PPL` vectors: slot `v` holds vectors `v`, `v + EPR`, ... (at
# D = 256 with `PPL` = 2: slot 3 is vectors 3 and 19). Write the loop that sweeps the warp's `E` elements, 32
# at a time (one per lane), with the slot fastest:
#
# 1. **Which element.** Element `e` is slot `e % EPR` of target `e / EPR`. In the last sweep some lanes get
#    an `e` at or past `E`, which belongs to no target. Clamp the target index to `nt - 1` anyway, so that every
#    shuffle reads from a lane that owns a target. The output does not need it: lanes `nt` and up already hold
#    the last target's values (the kernel gives lane `i` target `min(i, nt - 1)`), and a lane past `E` never uses
#    what it gets. The clamp keeps the shuffles tidy, and safe if the code before the gather changes.
# 2. **Ask the owning lane.** Get `src`, `dst32` and `wt` of the element's target from the lane that owns it,
#    with `__shfl_sync(0xffffffffu, value, owner)`, where `owner` is the owning lane's index (not `lane`, which
#    is this lane's own). The full mask means **all 32 lanes** must execute each
#    shuffle, the lanes with no element too: shuffle before any test of `e < E`, never inside one. A smaller
#    mask (`__activemask()`) inside the test does not help, because the lane you ask must take part as well.
#    Each element takes its own target's weight, not one weight for the whole warp.
# 3. **Load the two rows.** For each of the slot's `PPL` vectors, two `__ldg` loads: that vector of the lower
#    row and the same vector of the upper row. The slot's vectors are `EPR` apart, and the upper row is one
#    *row* further on: `VPR` vectors, not one. (A slot of vectors side by side would give right answers too,
#    if its stores matched; but then lanes side by side would read every other vector in each load, and the
#    grader checks answers, not speed.)
# 4. **Only the warp's elements.** Load, interpolate and store only when `e < E`. Then `lerp_vec` with the lower
#    row first, and `store_vec` to the same vectors of the target's output row.
#
# The grader runs every case twice: with the stage's defaults (`PPL` = 2 where `VPR` is even, `UNROLL` = 1), and
# again with `vectors_per_lane=1, unroll=2` (`PPL` = 1, `UNROLL` = 2); its PASS line lists both runs. You may
# ignore `UNROLL` if your loop steps 32 elements a sweep, one a lane: that is right at any `UNROLL`. The stage's
# own loop steps `32 * UNROLL` and loads `UNROLL` elements a lane before it uses any; try that once yours passes.
# A loop that steps `32 * UNROLL` but handles one element a lane fails the second run (its outputs never
# written). `PPL` is not optional: a loop that moves one vector a lane is right only where `PPL` is 1 (odd `VPR`),
# and the first run's cases include rows of an even number of vectors (34 in the simulator's "wide rows" case, 32
# in a GPU's first case). To take it in two steps, first pass
# `grade("08_fused_gather", GATHER, vectors_per_lane=1)` (both runs then at `PPL` = 1), then add the slot's
# second vector.
#
# Without a GPU that runs the stage (compute capability 8.0 or newer), the grader compiles your code for
# sm_90a and then runs it **on the CPU, in an emulator** (`cudabook.emulate`): every CUDA thread is a small
# coroutine, and a shuffle waits for every lane its mask names. A shuffle that some lanes never reach is
# reported as a deadlock, with the lanes that left, instead of hanging (on a GPU it is undefined behaviour, and
# may even give right answers). Its cases include odd D (one channel a vector, so a target's row ends partway
# through a sweep) and rows longer than one sweep. It cannot time anything: speed needs the GPU. If you are
# stuck, look at the lesson's picture of which lane does what in each sweep (08 · fused gather).

# %%
import cudabook
print(cudabook.where())
from cudabook.resample import grade

# %%
#! region resample/kernels/fused_gather.cu GATHER

# %%
grade("08_fused_gather", GATHER)

# %% [markdown]
# The lesson this lab belongs to: [08 · fused gather](../../notebooks/resample/08_fused_gather.ipynb).
