// runtime.cpp: the scheduler, barriers, asynchronous copies and the inline-PTX interpreter behind runtime.h.
// Compiled once (cudabook/emulate caches the object) and linked with each emulated kernel.
#include "runtime.h"

#include <algorithm>
#include <array>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

namespace emu {

// ------------------------------------------------------------------------------------ errors
void cannot(const char* what);

// ------------------------------------------------------------------------------------ threads and block
enum State { RUNNABLE, BLOCKED, DONE };

// What a thread knows has completed, for the ordering of a stage's refill after the wgmmas that read it: entry
// 8 r + w (block rank r of the cluster, warpgroup w) counts the wgmmas of that warpgroup known to be done (a
// wgmma.wait_group that covers them, by a thread of the warpgroup, then passed on through the barriers: an
// mbarrier's arrive -> a wait that sees the phase, bar.sync, the cluster barrier). Empty: nothing yet.
typedef std::vector<u32> Know;
const int KNOW = 16 * 8;
inline void know_merge(Know& into, const Know& from) {
    if (from.empty()) return;
    if (into.empty()) into.assign(KNOW, 0);
    for (int i = 0; i < KNOW; ++i) into[i] = into[i] > from[i] ? into[i] : from[i];
}

struct Copy { u32 dst; const unsigned char* src; u32 bytes; u32 src_bytes; };            // cp.async

// An arrival on an mbarrier, by whom: block rank << 16 | thread.
inline u32 arriver(int rank, int thread) { return (u32)rank << 16 | (u32)thread; }

// The mbarrier phase a thread last saw complete (its latest successful try_wait) and the arrivals that completed
// it: what let a producer go on and refill a stage, for the message when the refill comes too early.
struct Admission {
    int rank = -1;                  // the barrier's block (rank in the cluster); -1: none yet
    u32 bar = 0, phase = 0;         // its address, and how many phases it had completed then
    std::vector<u32> by;            // the arrivals of that phase (arriver())
};

// A TMA box on its way: a load (into the shared memory of the cluster's block `cta`, completing on its mbarrier
// `bar`) or a store (from the issuing block's shared memory; `seen` is what the box held at issue, `written` whether
// global memory already has it).
struct TmaOp {
    unsigned char map[128]; int coords[5]; int rank; u32 smem; u32 bar; int store; u64 bytes; int phase;
    int cta = 0; int issuer = -1; bool written = false; std::vector<unsigned char> seen;
    Know know;                      // (a load) what its issuer knew had completed when it issued it
    u64 readers_before = 0;         // (a load) the wgmma reads recorded in the destination block before it
    int issuer_rank = 0;            // (a load) the issuer's block, and the phase its issuer last waited for
    Admission admitted;
};

// What the emulator knows of one accumulator register of a thread's wgmmas (one map lookup a register a wgmma).
struct AccReg {
    bool named = false;             // a wgmma has named it (issued on it): left holds what the emulator left there
    u32 left = 0;
    bool fenced = false;            // a wgmma.fence has seen it since: at_fence holds its bits then
    u32 at_fence = 0;
    int inflight = 0;               // wgmmas issued on it, not landed
    u32 value = 0;                  // the last landed wgmma's result
};

// One thread's share of a wgmma.mma_async (warpgroup MMA): what the asynchronous tensor core does for it.
struct WgmmaOp {
    int n = 0;                      // the shape's N (m64nNk16, or m64nNk32 for e4m3)
    bool e4m3 = false;              // e4m3 inputs, k32 (else bf16, k16): either way 32 bytes of a row a k step
    u32 gen = 0;                    // which wgmma of its warpgroup (they count them together)
    u64 desc_a = 0, desc_b = 0;
    bool a_regs = false;            // A from registers (the rows this thread needs, captured at issue)
    uint16_t a[2][16];              // the bits of A's two rows this thread needs (registers or shared memory): 16
                                    // bf16, or 32 e4m3 as byte pairs (element 2 i in the low byte of a[.][i])
    uint16_t b[64][16];             // of B's n / 4 columns it needs, as read at issue (the same way)
    int tnsp_a = 0, tnsp_b = 0;
    float scale_a = 1.f, scale_b = 1.f;
    bool scale_d = true;
    float* d[128];                  // the thread's accumulator registers (n / 2 of them)
    AccReg* reg[128];               // what the emulator knows of each (Thread::wg_regs' nodes: they never move)
    u32 c_in[128];                  // their values at issue
    bool chained[128];              // another wgmma was in flight on that register at issue: its result is the input
};

// What a blocked thread waits at, kept as numbers and written out (wait_text) only for a deadlock report: a thread
// blocks at every warp operation and barrier, and formatting each of those was a tenth of an emulated kernel's time.
enum WaitKind { WAIT_NONE, WAIT_WARP, WAIT_BAR, WAIT_MBAR, WAIT_CLUSTER, WAIT_WGMMA };
struct WaitNote { WaitKind kind = WAIT_NONE; const char* op = nullptr; long long v[8] = {0}; };

struct Thread {
    ucontext_t ctx;
    uint3 idx;
    int linear, warp, lane;
    State state = RUNNABLE;
    const char* waiting = "";       // what it waits on, for the deadlock report
    WaitNote note;                  // ... in detail (wait_text writes it out into wait_detail)
    jmp_buf jb;                     // where it resumes (switch_to_scheduler); its first entry is through ctx
    bool started = false;
    char wait_detail[160] = {0};
    std::vector<Copy> open;         // cp.async copies since the last commit
    std::deque<std::vector<Copy>> groups;
    std::vector<TmaOp> bulk_open;   // TMA stores since the last bulk commit
    std::deque<std::vector<TmaOp>> bulk_groups;
    std::vector<WgmmaOp> wg_open;              // wgmma.mma_async issued since the last commit_group
    std::deque<std::vector<WgmmaOp>> wg_groups;
    bool wg_fenced = false;         // a wgmma.fence executed (the first wgmma needs one before it)
    std::unordered_map<const void*, AccReg> wg_regs;  // what the emulator knows of each accumulator register
    int cl_arrivals = 0, cl_waits = 0;  // barrier.cluster.arrive / completed barrier.cluster.wait, so far
    const void* spin = nullptr;     // the mbarrier it polls (it stopped at a try_wait that said not yet)
    u32 spin_parity = 0;            // the parity it polls for
    Know know;
    Admission waited;               // the mbarrier phase it last saw complete (its arrivals: see admission())
    std::vector<std::pair<u32, u32>> generic_writes;  // shared ranges it wrote (st.shared, stmatrix) since its last
                                                      // fence.proxy.async: [offset, end)
};

struct Warp { u32 arrived = 0, mask = 0, gen = 0; u64 vals[2][32]; const char* op = ""; std::vector<int> waiters; };

struct Bar { int arrived = 0, count = 0; std::vector<int> waiters; Know know, released; };

struct WarpGroup { int arrived = 0; u32 gen = 0; int first = -1; u32 a[2][128][4];
                   const std::string* op = nullptr; u64 fields[8] = {0};   // the first thread's wgmma (wgmma_key)
                   u32 refilled_below = 0;   // wgmmas before this one had their operands refilled by a TMA load
                                             // ordered after their completion
                   std::vector<int> waiters; };

struct Mbar {
    bool inited = false;
    u32 count = 0, pending = 0, phase = 0;
    int ready = 0;                  // the cluster-barrier phase that publishes its init to the other blocks
    Know know;                      // what the threads arriving in the current phase knew
    Know released;                  // ... in the phase that completed last: what a waiter for it learns (not
                                    // what arrivals already made for the next phase knew)
    i64 tx = 0, expected = 0, issued = 0;
    std::vector<TmaOp> copies;      // lazy: issued, not landed
    std::vector<u32> arrivals;      // who arrived in the current phase (arriver(), at most 64 kept)
    std::vector<u32> completed_by;  // ... and in the phase that completed last
};

struct Svc { int kind = 0; TmaOp op; };   // a request the scheduler serves on the host stack

typedef int (*TmaHandler)(int store, const unsigned char* map, const int* coords, int rank, unsigned char* smem,
                          u64 bytes, u32 smem_address, char* err, int errlen);

struct Block {
    uint3 idx{0, 0, 0};
    int rank = 0;                   // %cluster_ctarank
    std::vector<Thread> threads;
    std::vector<Warp> warps;
    std::map<int, Bar> bars;
    std::map<u32, Mbar> mbars;
    std::vector<WarpGroup> wgroups;
    unsigned char* smem = nullptr;
    u64 smem_size = 0;
    int live = 0;
    std::vector<uint16_t> unfenced;   // per shared byte: 1 + the thread that wrote it through the generic proxy
                                      // (st.shared, stmatrix) with no fence.proxy.async since (empty: none yet)
    struct Reader { int wg; u32 gen; u32 lo, hi; u64 seq; };
    std::deque<Reader> readers;       // the latest wgmmas' shared-memory operands: [lo, hi) a wgmma (warpgroup, gen)
    u64 reader_count = 0;             // reads (seq numbers them)
    std::vector<int> warp_regs;       // setmaxnreg: each warp's registers a thread since its last one (0: none yet)
    std::vector<std::vector<int>> warp_setmaxnreg;   // and the counts it asked for (.dec negative), in order
};

// The blocks of one thread-block cluster (a launch without clusters: clusters of one block), run together.
struct Cluster {
    std::vector<Block*> ctas;       // by %cluster_ctarank
    uint3 dim{1, 1, 1}, id{0, 0, 0};
    int arrived = 0;                // barrier.cluster arrivals in the current phase
    int phase = 0;                  // the cluster barrier's completed phases
    std::vector<std::pair<Block*, int>> waiters;
    Know know, released;
    int live() const { int n = 0; for (Block* b : ctas) n += b->live; return n; }
};

extern Block* B;
extern Cluster* CL;
extern Thread* cur;
extern u64 events;
extern int lazy;
extern Svc svc;
extern ucontext_t sched;

const u32 SMEM_BASE = 0x400;        // shared addresses start above a reserved area, as on Hopper

u32 to_shared(const void* p) {
    const unsigned char* q = (const unsigned char*)p;
    if (q < B->smem || q > B->smem + B->smem_size)
        fail("__cvta_generic_to_shared of an address that is not in the block's dynamic shared memory "
             "(static __shared__ arrays cannot be used with async copies here)");
    return SMEM_BASE + (u32)(q - B->smem);
}
// Distributed shared memory: mapa gives the address of the same offset in another block of the cluster as
// (rank + 1) << 24 | offset (the shared::cluster window); an address below 1 << 24 is the executing block's own
// (the shared::cta window lies inside the shared::cluster one).
const u32 CLUSTER_BIT = 24;

inline unsigned char* in_block(Block* b, u32 a, u64 bytes, const char* what) {
    if (a < SMEM_BASE || (u64)(a - SMEM_BASE) + bytes > b->smem_size)
        fail("%s at shared address 0x%x (%llu bytes) is outside the block's %llu bytes of shared memory", what, a,
             (unsigned long long)bytes, (unsigned long long)b->smem_size);
    return b->smem + (a - SMEM_BASE);
}
inline unsigned char* from_shared(u32 a, u64 bytes, const char* what) {
    if (a >> CLUSTER_BIT)
        fail("%s at shared address 0x%x: an address of another block's shared memory (a shared::cluster address "
             "from mapa), where only the block's own (shared::cta) is allowed", what, a);
    return in_block(B, a, bytes, what);
}
// A shared::cluster address: the block it is in (sets *blk) and its offset there.
u32 cluster_target(u32 a, Block** blk, const char* what);

void yield();                                   // back to the scheduler, still runnable
void block(const char* what);                   // back to the scheduler until woken
void wake(int t);
void serve(int kind, const TmaOp& op);          // run a host request (TMA fill) on the scheduler's stack

// ------------------------------------------------------------------------------------ warp operations
u64 collective(const char* op, u32 mask, u64 value) {
    Thread* t = cur;
    Warp& w = B->warps[t->warp];
    if (!(mask >> t->lane & 1))
        fail("thread %d calls %s with a mask (0x%08x) that leaves out its own lane %d", t->linear, op, mask, t->lane);
    const u32 slot = w.gen & 1, gen = w.gen;
    if (w.arrived == 0) { w.mask = mask; w.op = op; }
    else if (w.mask != mask || std::strcmp(w.op, op) != 0)
        fail("the lanes of warp %d meet at different warp operations (%s with mask 0x%08x, %s with mask 0x%08x): "
             "every lane in the mask must call the same one", t->warp, w.op, w.mask, op, mask);
    w.vals[slot][t->lane] = value;
    w.arrived |= 1u << t->lane;
    events++;
    if ((w.arrived & mask) == mask) {
        w.arrived = 0;
        w.gen++;
        events++;
        for (int i : w.waiters) wake(i);
        w.waiters.clear();
    } else {
        w.waiters.push_back(t->linear);
        t->note = {WAIT_WARP, op, {(long long)mask, t->warp}};
        while (w.gen == gen) block("a warp operation");
    }
    (void)slot;
    return 0;
}
u64 lane_value(int lane) { Warp& w = B->warps[cur->warp]; return w.vals[(w.gen - 1) & 1][lane]; }
const uint3& thread_idx() { return cur->idx; }
int lane_id() { return cur->lane; }
unsigned char* dynamic_smem() { return B->smem; }


}  // namespace emu


namespace emu {

Block* B = nullptr;
Cluster* CL = nullptr;
Thread* cur = nullptr;
uint3 block_idx, grid_dim;
dim3 block_dim;
u64 events = 0;
int lazy = 1;
Svc svc;
ucontext_t sched;
// Switching between the scheduler and a thread: the first entry into a thread goes through its ucontext (onto
// its own stack); every switch after that through _setjmp / _longjmp, which, unlike swapcontext, leave the signal
// mask alone and so make no system call (swapcontext's two were about a fifth of an emulated kernel's time).
// (The runtime is built without _FORTIFY_SOURCE: its longjmp check takes a jump onto another stack for a bug.)
static jmp_buf sched_jb;

static void switch_to_scheduler(Thread* t) {      // resumes here when the scheduler switches back
    if (_setjmp(t->jb) == 0) _longjmp(sched_jb, 1);
}
static char errbuf[4096];
static int failed = 0;
static int explicit_cluster = 0;     // the launch named a cluster shape (__cluster_dims__ or the launch's own)
static sigjmp_buf escape;
static TmaHandler tma_handler = nullptr;
static long long clock_now = 0;

void fail(const char* fmt, ...) {
    if (!failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, sizeof errbuf, fmt, ap);
        va_end(ap);
        failed = 1;
    }
    if (cur) _longjmp(sched_jb, 1);     // (the thread is never resumed)
    siglongjmp(escape, 1);              // (a failure on the scheduler's own stack)
}

void cannot(const char* what) {
    fail("CANNOT EMULATE: %s", what);
}

void yield() {
    switch_to_scheduler(cur);
}

void block(const char* what) {
    Thread* t = cur;
    t->state = BLOCKED;
    t->waiting = what;
    switch_to_scheduler(t);
}

void wake(int i) {
    Thread& t = B->threads[i];
    if (t.state == BLOCKED) t.state = RUNNABLE;
}

void serve(int kind, const TmaOp& op) {
    svc.kind = kind;
    svc.op = op;
    yield();                              // the scheduler serves it, then resumes this thread
}

// ------------------------------------------------------------------------------------ barriers
static void check_bar0();

// bar.arrive: an arrival on a named barrier that does not wait (a producer signalling consumers that bar.sync
// on it); the barrier completes, and its waiters go on, when the count is reached either way.
static void bar_arrive(int id, int count) {
    if (count <= 0) fail("bar.arrive %d needs a thread count", id);
    Bar& b = B->bars[id];
    if (b.arrived == 0) b.count = count;
    else if (b.count != count)
        fail("barrier %d is used with two thread counts (%d and %d)", id, b.count, count);
    b.arrived++;
    know_merge(b.know, cur->know);
    events++;
    if (b.arrived >= count) {
        b.arrived = 0;
        b.released.swap(b.know);
        b.know.clear();
        events++;
        for (int i : b.waiters) wake(i);
        b.waiters.clear();
    }
}

static void bar_sync(int id, int count) {
    Thread* t = cur;
    Bar& b = B->bars[id];
    if (b.arrived == 0) b.count = count;
    else if (b.count != count)
        fail("barrier %d is used with two thread counts (%d and %d)", id, b.count, count);
    b.arrived++;
    know_merge(b.know, t->know);
    events++;                             // an arrival is progress (the deadlock check counts events)
    const int need = count > 0 ? count : B->live;
    if (b.arrived >= need) {
        b.arrived = 0;
        b.released.swap(b.know);
        b.know.clear();
        know_merge(t->know, b.released);
        events++;
        for (int i : b.waiters) wake(i);
        b.waiters.clear();
        return;
    }
    b.waiters.push_back(t->linear);
    t->note = {WAIT_BAR, nullptr, {id, count}};
    block("a barrier");
    know_merge(t->know, B->bars[id].released);
}

static void check_bar0() {   // a thread left: __syncthreads counts the threads still running
    auto it = B->bars.find(0);
    if (it == B->bars.end() || it->second.arrived == 0 || it->second.count > 0) return;
    if (it->second.arrived >= B->live) {
        it->second.arrived = 0;
        it->second.released.swap(it->second.know);
        it->second.know.clear();
        events++;
        for (int i : it->second.waiters) wake(i);
        it->second.waiters.clear();
    }
}

// ------------------------------------------------------------------------------------ copies
static void land_copy(const Copy& c) {
    unsigned char* dst = from_shared(c.dst, c.bytes, "a cp.async destination");
    std::memcpy(dst, c.src, c.src_bytes);
    if (c.bytes > c.src_bytes) std::memset(dst + c.src_bytes, 0, c.bytes - c.src_bytes);
    events++;
}

static u64 box_bytes(const unsigned char* map) {
    u32 magic, rank, elem;
    std::memcpy(&magic, map, 4);
    if (magic != 0x4d54454du)   // "EMTM"
        fail("a TMA copy was given something that is not a tensor map made by cudabook.tma.encode_tiled "
             "(the address of the __grid_constant__ CUtensorMap parameter is what it needs)");
    std::memcpy(&rank, map + 4, 4);
    std::memcpy(&elem, map + 8, 4);
    u64 n = elem;
    for (u32 i = 0; i < rank; ++i) {
        u32 box, es;
        std::memcpy(&box, map + 56 + 4 * i, 4);
        std::memcpy(&es, map + 76 + 4 * i, 4);
        n *= (box + es - 1) / es;
    }
    return n;
}

// Who let a load's issuer go on, in words, for check_refill's message: the phase it last saw complete and the
// arrivals that completed it, and what they say: none from the warpgroup still reading (the phase completed
// without its release), or a thread that arrived twice (one of its arrivals stood in for another thread's).
static std::string admission_story(const TmaOp& op, const Block* reader, int wg) {
    const Admission& a = op.admitted;
    if (a.rank < 0 || a.by.empty()) return "";
    std::vector<std::pair<u32, int>> who;              // arriver, arrivals, in the order they first came
    for (u32 x : a.by) {
        auto it = std::find_if(who.begin(), who.end(), [&](const std::pair<u32, int>& w) { return w.first == x; });
        if (it == who.end()) who.push_back({x, 1}); else it->second++;
    }
    std::string list;
    bool twice = false, from_reader = false;
    for (size_t i = 0; i < who.size(); ++i) {
        const int rank = (int)(who[i].first >> 16), thread = (int)(who[i].first & 0xFFFF);
        char one[96], times[32] = "";
        if (who[i].second > 1) snprintf(times, sizeof times, " (%d arrivals)", who[i].second);
        snprintf(one, sizeof one, "%sthread %d of block %u%s", i == 0 ? "" : i + 1 == who.size() ? " and " : ", ",
                 thread, CL->ctas[rank]->idx.x, times);
        list += one;
        twice |= who[i].second > 1;
        from_reader |= rank == reader->rank && thread / 128 == wg;
    }
    char head[512];
    snprintf(head, sizeof head, " Thread %d of block %u issued the load after its wait on the mbarrier at 0x%x of "
             "block %u saw its phase %u complete, by the arrivals of %s.", op.issuer, CL->ctas[op.issuer_rank]->idx.x,
             a.bar, CL->ctas[a.rank]->idx.x, a.phase - 1, list.c_str());
    std::string s = head;
    if (!from_reader)
        snprintf(head, sizeof head, " None came from warpgroup %d of block %u, whose wgmma still reads the stage: the "
                 "phase completed without its release.", wg, reader->idx.x);
    else
        snprintf(head, sizeof head, " Warpgroup %d of block %u, whose wgmma still reads the stage, arrived too, but "
                 "before a wgmma_wait that covers that wgmma (or with an arrival meant for another stage).", wg,
                 reader->idx.x);
    s += head;
    if (twice)
        s += " A thread that arrives twice in one phase stands in for one that has not arrived yet: one of its "
             "arrivals was meant for another stage, or for this stage's next use (the stage to release computed, from "
             "a k-tile counter say, rather than carried with the ring's slot?).";
    return s;
}

// A TMA load overwrites shared memory that wgmmas issued before it read: each such wgmma must be known complete
// to the thread that issued the load (a wgmma_wait that covers it, in its warpgroup, ordered before the load by
// the barriers between), whenever the load happens to land: else, on a GPU, the tensor core may still be reading.
static void check_refill(const TmaOp& op) {
    Block* b = CL->ctas[op.cta];
    const u32 lo = op.smem, hi = op.smem + (u32)op.bytes;
    for (const Block::Reader& r : b->readers) {
        if (r.seq >= op.readers_before) break;
        if (r.hi <= lo || r.lo >= hi) continue;
        const u32 known = op.know.empty() ? 0 : op.know[8 * b->rank + r.wg];
        if (known <= r.gen)
            fail("the shared memory a wgmma reads changed between its issue and the wgmma_wait that covers it: a TMA "
                 "load (issued by thread %d of block %u) refills 0x%x..0x%x of block %u, which a wgmma of warpgroup "
                 "%d issued before it reads, and nothing orders the load after that wgmma's completion, so the tensor "
                 "core may still be reading the stage when the new data lands: the stage was released too early. A "
                 "consumer releases a stage (its arrive on the \"empty\" barrier the producer waits for) only after a "
                 "wgmma_wait that covers every wgmma reading it, and only the stage those wgmmas read.%s", op.issuer,
                 CL->ctas[op.issuer_rank]->idx.x, lo, hi, b->idx.x, r.wg, admission_story(op, b, r.wg).c_str());
        u32& below = b->wgroups[r.wg].refilled_below;
        if (below < known) below = known;
    }
}

static void run_tma(const TmaOp& op) {     // on the scheduler's stack: the host fills or stores the box
    Block* b = CL->ctas[op.cta];
    if (!op.store) check_refill(op);
    unsigned char* smem = in_block(b, op.smem, op.bytes, op.store ? "a TMA store's source" : "a TMA load's destination");
    char err[1024] = {0};
    if (!tma_handler) fail("no TMA handler was installed");
    if (tma_handler(op.store, op.map, op.coords, op.rank, smem, op.bytes, op.smem, err, sizeof err) < 0)
        fail("%s", err);
    events++;
}

static Mbar& mbar_in(Block* b, u32 a, const char* what) {
    in_block(b, a, 8, what);
    if (a % 8) fail("%s: the mbarrier address 0x%x is not 8-byte aligned", what, a);
    Mbar& m = b->mbars[a];
    if (!m.inited) {
        if (b != B)
            fail("%s on the mbarrier at shared address 0x%x of block rank %d of the cluster, which was never "
                 "initialised with mbarrier.init (yet: a block uses its peers' barriers only after a cluster barrier, "
                 "cluster_sync(), that follows their init)", what, a, b->rank);
        fail("%s on an mbarrier (shared address 0x%x) that was never initialised with mbarrier.init", what, a);
    }
    return m;
}
static Mbar& mbar_at(u32 a, const char* what) {
    from_shared(a, 8, what);
    return mbar_in(B, a, what);
}

// Another block of the cluster touches mbarrier `m` of block `b` (a remote arrive, a multicast's complete_tx):
// its init must have been published to the cluster, by a cluster barrier the initialising thread arrived at after
// the init and this thread waited for; and the block must still be running.
static void remote_ok(Block* b, u32 a, const Mbar& m, const char* what) {
    if (b == B) return;
    if (b->live == 0)
        fail("%s on the mbarrier at 0x%x of block rank %d of the cluster, which has already ended (all its threads "
             "returned): its shared memory is gone. A block whose shared memory its peers still use must wait for "
             "them before it ends (cluster_sync(): barrier.cluster.arrive + wait, by every thread)", what, a,
             b->rank);
    if (cur->cl_waits < m.ready)
        fail("%s (thread %d of block rank %d) on the mbarrier at 0x%x of block rank %d of the cluster, with no "
             "cluster barrier between that barrier's mbarrier.init and this: the init may not be visible to the "
             "other blocks yet. After initialising the barriers: fence.mbarrier_init.release.cluster, then "
             "cluster_sync() (barrier.cluster.arrive.release + barrier.cluster.wait.acquire) in every block before "
             "any block uses a peer's barriers", what, cur->linear, B->rank, a, b->rank);
}

// Landing "eager" runs everything as early as the program allows: when an mbarrier phase completes, the threads
// polling that barrier go on before anyone else (the thread that completed it yields; the scheduler runs them).
static const void* urgent = nullptr;

static void mbar_complete_if_done(u32 a, Mbar& m) {
    if (m.pending == 0 && m.tx == 0) {
        if (m.issued != m.expected)
            fail("an mbarrier phase (shared address 0x%x) completed with the wrong transaction count: expect_tx "
                 "says %lld bytes, the copies issued on it deliver %lld. Announce exactly the bytes the boxes "
                 "bring (each box brings all its bytes, the zero-filled ones past the edges too).",
                 a, (long long)m.expected, (long long)m.issued);
        m.phase++;
        m.pending = m.count;
        m.expected = m.issued = 0;
        m.completed_by.swap(m.arrivals);
        m.arrivals.clear();
        m.released.swap(m.know);
        m.know.clear();
        events++;
        if (!lazy) urgent = &m;
    }
}

static void mbar_tx(u32 a, Mbar& m, i64 bytes) {   // complete_tx
    m.tx -= bytes;
    mbar_complete_if_done(a, m);
}

static void land_pending(u32 a) {                  // the copies queued on the executing block's mbarrier at a
    Mbar& m = B->mbars[a];
    std::vector<TmaOp> ops;
    ops.swap(m.copies);
    for (const TmaOp& op : ops) {
        if (op.phase != (int)m.phase)
            fail("a TMA copy landed after the mbarrier phase it was issued in had completed: that phase's "
                 "expect_tx announced fewer bytes than its copies deliver (or none at all)");
        serve(1, op);
        Mbar& mm = B->mbars[a];
        mbar_tx(a, mm, (i64)op.bytes);
    }
}

// The phase `t` last saw complete, with the arrivals that completed it (while it is still the barrier's latest).
static Admission admission(const Thread* t) {
    Admission a = t->waited;
    if (a.rank < 0) return a;
    const auto& bars = CL->ctas[a.rank]->mbars;
    auto it = bars.find(a.bar);
    if (it != bars.end() && it->second.phase == a.phase) a.by = it->second.completed_by;
    return a;
}

// cp.async.bulk.tensor global -> shared: the box into shared memory at `dst`, completing on the mbarrier `bar` of
// the same block. With a CTA mask (.multicast::cluster) the box lands at dst's offset in every block of the mask,
// and complete_tx reaches each one's mbarrier at bar's offset (PTX ISA, cp.async.bulk.tensor).
static void tma_load(u32 dst, const unsigned char* map, const int* coords, int rank, u32 bar, int multicast,
                     u32 mask) {
    TmaOp op;
    std::memcpy(op.map, map, 128);
    u32 mrank;
    std::memcpy(&mrank, map + 4, 4);
    op.bytes = box_bytes(map);
    if ((int)mrank != rank)
        fail("cp.async.bulk.tensor.%dd on a tensor map of rank %u: give as many coordinates as the map has "
             "dimensions", rank, mrank);
    for (int i = 0; i < rank; ++i) op.coords[i] = coords[i];
    op.rank = rank;
    op.store = 0;
    op.issuer = cur->linear;
    Block *dblk = B, *bblk = B;
    const u32 d = cluster_target(dst, &dblk, "a TMA load's destination");
    const u32 b = cluster_target(bar, &bblk, "cp.async.bulk.tensor's mbarrier");
    if (d % 128) fail("a TMA load's destination (shared address 0x%x) must be 128-byte aligned", d);
    std::vector<Block*> targets;
    if (!multicast) {
        if (dblk != bblk)
            fail("cp.async.bulk.tensor: the destination (block rank %d) and the mbarrier (block rank %d) must be in "
                 "the same block", dblk->rank, bblk->rank);
        targets.push_back(dblk);
    } else {
        const int n = (int)CL->ctas.size();
        if (mask == 0) fail("cp.async.bulk.tensor .multicast::cluster with a CTA mask of 0: the box goes nowhere");
        if (mask >> n)
            fail("cp.async.bulk.tensor .multicast::cluster with the CTA mask 0x%x: bit i is the block of rank i, and "
                 "this cluster has %d block%s (ranks 0..%d)", mask, n, n == 1 ? "" : "s", n - 1);
        for (int r = 0; r < n; ++r)
            if (mask >> r & 1) targets.push_back(CL->ctas[r]);
    }
    for (Block* t : targets) in_block(t, d, op.bytes, "a TMA load's destination");
    for (Block* t : targets) {
        Mbar& m = mbar_in(t, b, "cp.async.bulk.tensor's mbarrier");
        remote_ok(t, b, m, "a multicast TMA load's complete_tx");
        op.cta = t->rank;
        op.smem = d;
        op.bar = b;
        op.phase = (int)m.phase;
        op.know = cur->know;
        op.readers_before = t->reader_count;
        op.issuer_rank = B->rank;
        op.admitted = admission(cur);
        m.issued += (i64)op.bytes;
        if (lazy) {
            m.copies.push_back(op);
        } else {
            serve(1, op);
            Mbar& mm = t->mbars[b];
            mbar_tx(b, mm, (i64)op.bytes);
        }
    }
}

// (Landing "lazy": a multicast box waits in each destination block's barrier queue, and lands there when a thread of
// that block waits on the barrier with every arrival in: land_pending.)

// ------------------------------------------------------------------------------------ inline PTX interpreter
struct Arg { int kind; int reg; long long imm; std::string name; std::vector<Arg> list; };
// kind: 0 operand %N, 1 immediate, 2 [address], 3 {list}, 4 named register, 5 sink "_", 6 special register
struct Insn { std::string op; std::vector<Arg> args; };

static std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\n"), b = s.find_last_not_of(" \t\n");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

static Arg parse_arg(std::string s) {
    s = trim(s);
    Arg a{1, -1, 0, "", {}};
    if (s.empty()) fail("inline PTX: an empty operand");
    if (s[0] == '[') {
        std::string in = trim(s.substr(1, s.rfind(']') - 1));
        a.kind = 2;
        size_t comma = in.find(',');
        if (comma != std::string::npos) {          // [map, {c0, c1, ...}]
            a.list.push_back(parse_arg(in.substr(0, comma)));
            a.list.push_back(parse_arg(in.substr(comma + 1)));
        } else {
            size_t plus = in.find_first_of("+-", 1);   // [reg+imm], [reg-imm]
            if (plus != std::string::npos) {
                a.imm = strtoll(trim(in.substr(plus + 1)).c_str(), nullptr, 0) * (in[plus] == '-' ? -1 : 1);
                in = trim(in.substr(0, plus));
            } else {
                a.imm = 0;
            }
            a.list.push_back(parse_arg(in));
        }
        return a;
    }
    if (s[0] == '{') {
        a.kind = 3;
        std::string in = s.substr(1, s.rfind('}') - 1);
        size_t p = 0;
        while (p <= in.size()) {
            size_t q = in.find(',', p);
            if (q == std::string::npos) q = in.size();
            if (!trim(in.substr(p, q - p)).empty()) a.list.push_back(parse_arg(in.substr(p, q - p)));
            p = q + 1;
        }
        return a;
    }
    if (s[0] == '%' && s.size() > 1 && isdigit((unsigned char)s[1])) { a.kind = 0; a.reg = atoi(s.c_str() + 1); return a; }
    if (s[0] == '%') { a.kind = 6; a.name = s.substr(1); return a; }
    if (s == "_") { a.kind = 5; return a; }
    if (isdigit((unsigned char)s[0]) || s[0] == '-') { a.kind = 1; a.imm = strtoll(s.c_str(), nullptr, 0); return a; }
    a.kind = 4;
    a.name = s;
    return a;
}

static std::vector<std::string> split_args(const std::string& s) {
    std::vector<std::string> out;
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '[' || c == '{') depth++;
        else if (c == ']' || c == '}') depth--;
        else if (c == ',' && depth == 0) { out.push_back(s.substr(start, i - start)); start = i + 1; }
    }
    if (!trim(s.substr(start)).empty()) out.push_back(s.substr(start));
    return out;
}

static std::vector<Insn> parse(const char* text) {
    std::string t;
    for (const char* p = text; *p; ++p) {            // "%%" is a literal %, comments dropped
        if (p[0] == '%' && p[1] == '%') { t += '%'; ++p; continue; }
        if (p[0] == '/' && p[1] == '/') { while (*p && *p != '\n') ++p; if (!*p) break; continue; }
        t += *p;
    }
    std::vector<Insn> out;
    size_t p = 0;
    while (p < t.size()) {
        size_t q = t.find(';', p);
        if (q == std::string::npos) q = t.size();
        std::string s = trim(t.substr(p, q - p));
        p = q + 1;
        while (!s.empty() && (s[0] == '{' || s[0] == '}')) s = trim(s.substr(1));
        if (s.empty() || s[0] == '.') continue;       // .reg declarations
        size_t sp = s.find_first_of(" \t\n");
        Insn in;
        in.op = s.substr(0, sp);
        if (sp != std::string::npos)
            for (auto& a : split_args(s.substr(sp + 1))) in.args.push_back(parse_arg(a));
        out.push_back(in);
    }
    return out;
}

struct Ctx {
    const Operand* ops;
    size_t nops;
    std::map<std::string, u64> regs;
};

static u64 value(Ctx& c, const Arg& a) {
    switch (a.kind) {
    case 0:
        if ((size_t)a.reg >= c.nops) fail("inline PTX names %%%d, but only %zu operands are given", a.reg, c.nops);
        return c.ops[a.reg].value;
    case 1: return (u64)a.imm;
    case 4: return c.regs[a.name];
    case 6:
        if (a.name == "dynamic_smem_size") return B->smem_size;
        if (a.name == "laneid") return (u64)cur->lane;
        if (a.name == "warpid") return (u64)cur->warp;
        if (a.name == "tid.x") return threadIdx.x;
        if (a.name == "tid.y") return threadIdx.y;
        if (a.name == "tid.z") return threadIdx.z;
        if (a.name == "ntid.x") return block_dim.x;
        if (a.name == "ntid.y") return block_dim.y;
        if (a.name == "ntid.z") return block_dim.z;
        if (a.name == "ctaid.x") return block_idx.x;
        if (a.name == "ctaid.y") return block_idx.y;
        if (a.name == "ctaid.z") return block_idx.z;
        if (a.name == "nctaid.x") return grid_dim.x;
        if (a.name == "nctaid.y") return grid_dim.y;
        if (a.name == "nctaid.z") return grid_dim.z;
        if (a.name == "cluster_ctarank") return (u64)B->rank;
        if (a.name == "cluster_nctarank") return (u64)CL->ctas.size();
        if (a.name == "cluster_ctaid.x") return block_idx.x % CL->dim.x;
        if (a.name == "cluster_ctaid.y") return block_idx.y % CL->dim.y;
        if (a.name == "cluster_ctaid.z") return block_idx.z % CL->dim.z;
        if (a.name == "cluster_nctaid.x") return CL->dim.x;
        if (a.name == "cluster_nctaid.y") return CL->dim.y;
        if (a.name == "cluster_nctaid.z") return CL->dim.z;
        if (a.name == "clusterid.x") return CL->id.x;
        if (a.name == "clusterid.y") return CL->id.y;
        if (a.name == "clusterid.z") return CL->id.z;
        if (a.name == "nclusterid.x") return grid_dim.x / CL->dim.x;
        if (a.name == "nclusterid.y") return grid_dim.y / CL->dim.y;
        if (a.name == "nclusterid.z") return grid_dim.z / CL->dim.z;
        if (a.name == "is_explicit_cluster") return explicit_cluster;
        if (a.name == "globaltimer") { timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return (u64)ts.tv_sec * 1000000000ull + ts.tv_nsec; }
        if (a.name == "clock64" || a.name == "clock") return (u64)(clock_now += 1000);
        fail("inline PTX reads the special register %%%s, which this emulator does not know", a.name.c_str());
    default: fail("inline PTX: an operand that is not a value");
    }
}

static void store(Ctx& c, const Arg& a, u64 v) {
    if (a.kind == 5) return;
    if (a.kind == 4) { c.regs[a.name] = v; return; }
    if (a.kind != 0 || (size_t)a.reg >= c.nops || !c.ops[a.reg].out)
        fail("inline PTX writes an operand that is not an output");
    std::memcpy(c.ops[a.reg].out, &v, c.ops[a.reg].size);
}

static u64 addr(Ctx& c, const Arg& a) {
    if (a.kind != 2) fail("inline PTX: expected an [address]");
    return value(c, a.list[0]) + (u64)a.imm;
}

static bool has(const std::string& op, const char* part) { return op.find(part) != std::string::npos; }

static u32 bf16_rn(float x) {
    if (x != x) return 0x7FFFu;
    u32 b = __float_as_uint(x);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return b >> 16;
}

static void mbar_wait_once(Ctx& c, const Insn& in) {   // try_wait / test_wait with .parity: pred = done
    const u32 a = (u32)addr(c, in.args[1]);
    const u32 parity = (u32)value(c, in.args[2]) & 1;
    Mbar& m = mbar_at(a, "mbarrier.try_wait");
    bool done = (m.phase & 1) != parity;
    if (!done && lazy && m.pending == 0 && !m.copies.empty()) {
        land_pending(a);                             // the latest moment: a thread waits and every arrival is in
        done = (B->mbars[a].phase & 1) != parity;
    }
    store(c, in.args[0], done ? 1 : 0);
    cur->spin = done ? nullptr : &B->mbars[a];
    cur->spin_parity = parity;
    if (done) {
        know_merge(cur->know, B->mbars[a].released);
        cur->waited = Admission{B->rank, a, B->mbars[a].phase, {}};
    }
    if (!done) {
        Mbar& mm = B->mbars[a];
        cur->note = {WAIT_MBAR, nullptr, {(long long)a, (long long)parity, (long long)mm.phase,
                                          (long long)mm.pending, (long long)mm.count, (long long)mm.tx,
                                          (long long)mm.expected, (long long)mm.issued}};
        cur->waiting = "an mbarrier";
        yield();                                      // spin: let the others run
    }
}

static void land_groups(std::deque<std::vector<Copy>>& groups, size_t keep) {
    while (groups.size() > keep) {
        for (const Copy& cp : groups.front()) land_copy(cp);
        groups.pop_front();
    }
}

// cp.async.bulk.wait_group(.read) N: the stores of all but the newest N bulk groups have read their source (and
// written global memory). Each source must still hold what it held at the store: TMA may read it any time until
// this wait.
static void land_bulk(std::deque<std::vector<TmaOp>>& groups, size_t keep) {
    while (groups.size() > keep) {
        std::vector<TmaOp> g;
        g.swap(groups.front());
        groups.pop_front();
        for (const TmaOp& op : g) {
            const unsigned char* now = in_block(CL->ctas[op.cta], op.smem, op.bytes, "a TMA store's source");
            for (u64 i = 0; i < op.bytes; ++i)
                if (now[i] != op.seen[i])
                    fail("the shared memory a TMA store reads changed between the store (thread %d of block %u) and "
                         "the cp.async.bulk.wait_group.read that covers it (shared address 0x%x was 0x%02x at the "
                         "store and is 0x%02x now). TMA reads the source any time until that wait: wait for it "
                         "(bulk_wait_read<N>) before the buffer is written again", op.issuer, block_idx.x,
                         (u32)(op.smem + i), op.seen[i], now[i]);
            if (!op.written) serve(2, op);
        }
    }
}


// ------------------------------------------------------------------------------------ warp-wide matrix work
// mma.sync and ldmatrix are warp operations: every lane brings its part, and each lane's result depends on
// the others'. Each lane publishes a pointer to its part (kept on its own stack, inside this call), computes
// its own result from everyone's, and waits at a second meeting until every lane has read what it needs, so
// no part is gone before it was read. All 32 lanes must take part (.aligned).
static float bf16_float(u32 bits16) { return __uint_as_float(bits16 << 16); }

struct MmaPart { u32 a[4], b[2]; float c[4]; };

static void mma_m16n8k16(Ctx& c, const Insn& in) {
    const std::string& op = in.op;
    if (!has(op, ".row.col") || !has(op, ".f32.bf16.bf16.f32"))
        cannot(("`" + op + "`: of mma.sync only m16n8k16.row.col with bf16 inputs and float32 accumulators is "
                "emulated").c_str());
    if (in.args.size() != 4 || in.args[0].list.size() != 4 || in.args[1].list.size() != 4 ||
        in.args[2].list.size() != 2 || in.args[3].list.size() != 4)
        fail("mma.sync.m16n8k16 takes {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}");
    MmaPart mine;
    for (int i = 0; i < 4; ++i) mine.a[i] = (u32)value(c, in.args[1].list[i]);
    for (int i = 0; i < 2; ++i) mine.b[i] = (u32)value(c, in.args[2].list[i]);
    for (int i = 0; i < 4; ++i) mine.c[i] = __uint_as_float((u32)value(c, in.args[3].list[i]));
    collective("mma.sync", 0xffffffffu, (u64)(uintptr_t)&mine);
    // PTX ISA, "Matrix Fragments for mma.m16n8k16": with g = lane / 4, t = lane % 4,
    //   A[r][k]: lane (r % 8) * 4 + (k % 8) / 2, register (r / 8) + 2 (k / 8), half k % 2
    //   B[k][n]: lane n * 4 + (k % 8) / 2, register k / 8, half k % 2
    //   C[r][n]: lane (r % 8) * 4 + n / 2, register 2 (r / 8) + n % 2
    auto part = [](int lane) { return (const MmaPart*)(uintptr_t)lane_value(lane); };
    auto half = [](u32 word, int h) { return bf16_float(h ? word >> 16 : word & 0xFFFFu); };
    const int g = cur->lane / 4, tq = cur->lane % 4;
    float d[4];
    for (int e = 0; e < 4; ++e) {
        const int r = g + 8 * (e / 2), n = 2 * tq + e % 2;
        double sum = 0.0;                               // exact products, one rounding (tensor cores keep at
        for (int k = 0; k < 16; ++k) {                  // least float32's precision)
            const float a = half(part((r % 8) * 4 + (k % 8) / 2)->a[(r / 8) + 2 * (k / 8)], k % 2);
            const float b = half(part(n * 4 + (k % 8) / 2)->b[k / 8], k % 2);
            sum += (double)a * (double)b;
        }
        d[e] = (float)(sum + (double)mine.c[e]);
    }
    collective("mma.sync (every lane has read)", 0xffffffffu, 0);
    for (int e = 0; e < 4; ++e) store(c, in.args[0].list[e], __float_as_uint(d[e]));
}

static void ldmatrix(Ctx& c, const Insn& in) {
    const std::string& op = in.op;
    if (!has(op, ".m8n8") || !has(op, ".b16") || !has(op, ".shared"))
        cannot(("`" + op + "`: of ldmatrix only .m8n8 .shared .b16 is emulated").c_str());
    const int n = has(op, ".x4") ? 4 : has(op, ".x2") ? 2 : 1;
    const bool trans = has(op, ".trans");
    if (in.args.size() != 2 || (int)in.args[0].list.size() != n)
        fail("%s takes {%d registers} and an [address]", op.c_str(), n);
    const u32 a = (u32)addr(c, in.args[1]);
    if (cur->lane < 8 * n) {                           // the lanes that give row addresses
        if (a % 16) fail("ldmatrix: lane %d's row address 0x%x is not 16-byte aligned", cur->lane, a);
        from_shared(a, 16, "an ldmatrix row");
    }
    collective("ldmatrix", 0xffffffffu, a);
    // Matrix i's row r is 16 bytes at the address lane 8 i + r gave. Lane l receives, of each matrix, row l / 4
    // elements 2 (l % 4) and 2 (l % 4) + 1; with .trans, column l / 4 of rows 2 (l % 4) and 2 (l % 4) + 1.
    const int g = cur->lane / 4, tq = cur->lane % 4;
    u32 r[4];
    for (int i = 0; i < n; ++i) {
        if (!trans) {
            std::memcpy(&r[i], from_shared((u32)lane_value(8 * i + g) + 4 * tq, 4, "an ldmatrix row"), 4);
        } else {
            uint16_t lo, hi;
            std::memcpy(&lo, from_shared((u32)lane_value(8 * i + 2 * tq) + 2 * g, 2, "an ldmatrix row"), 2);
            std::memcpy(&hi, from_shared((u32)lane_value(8 * i + 2 * tq + 1) + 2 * g, 2, "an ldmatrix row"), 2);
            r[i] = (u32)lo | (u32)hi << 16;
        }
    }
    collective("ldmatrix (every lane has read)", 0xffffffffu, 0);
    for (int i = 0; i < n; ++i) store(c, in.args[0].list[i], r[i]);
}

// ------------------------------------------------------------------------------------ stmatrix
// stmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 [p], {r0, ...}: the inverse of ldmatrix. Lane 8 i + r
// gives the address of row r of matrix i (16 bytes); lane l's register i holds, of matrix i, row l / 4 elements
// 2 (l % 4) and 2 (l % 4) + 1 (with .trans: column l / 4 of rows 2 (l % 4) and 2 (l % 4) + 1), the low half first.
// Every lane publishes its part, every lane writes its own registers, and nobody goes on before all have written.
static void generic_write(Block* b, u32 a, u32 n);

struct StPart { u32 addr; u32 r[4]; };

static void stmatrix(Ctx& c, const Insn& in) {
    const std::string& op = in.op;
    if (!has(op, ".m8n8") || !has(op, ".b16"))
        cannot(("`" + op + "`: of stmatrix only .m8n8 .b16 (sm_90) is emulated").c_str());
    const int n = has(op, ".x4") ? 4 : has(op, ".x2") ? 2 : 1;
    const bool trans = has(op, ".trans");
    if (in.args.size() != 2 || in.args[1].kind != 3 || (int)in.args[1].list.size() != n)
        fail("%s takes an [address] and {%d registers}", op.c_str(), n);
    StPart mine;
    mine.addr = (u32)addr(c, in.args[0]);
    for (int i = 0; i < n; ++i) mine.r[i] = (u32)value(c, in.args[1].list[i]);
    if (cur->lane < 8 * n) {                           // the lanes that give row addresses
        if (mine.addr % 16) fail("stmatrix: lane %d's row address 0x%x is not 16-byte aligned", cur->lane, mine.addr);
        from_shared(mine.addr, 16, "an stmatrix row");
    }
    collective("stmatrix", 0xffffffffu, (u64)(uintptr_t)&mine);
    const int g = cur->lane / 4, tq = cur->lane % 4;
    auto row = [](int lane) { return ((const StPart*)(uintptr_t)lane_value(lane))->addr; };
    for (int i = 0; i < n; ++i) {
        const u32 word = mine.r[i];
        if (!trans) {
            const u32 a = row(8 * i + g) + 4 * tq;
            std::memcpy(from_shared(a, 4, "an stmatrix row"), &word, 4);
            generic_write(B, a, 4);
        } else {
            const uint16_t lo = (uint16_t)(word & 0xFFFFu), hi = (uint16_t)(word >> 16);
            const u32 a0 = row(8 * i + 2 * tq) + 2 * g, a1 = row(8 * i + 2 * tq + 1) + 2 * g;
            std::memcpy(from_shared(a0, 2, "an stmatrix row"), &lo, 2);
            std::memcpy(from_shared(a1, 2, "an stmatrix row"), &hi, 2);
            generic_write(B, a0, 2);
            generic_write(B, a1, 2);
        }
    }
    collective("stmatrix (every lane has written)", 0xffffffffu, 0);
}

// ------------------------------------------------------------------------------------ shared memory, proxies
// ld.shared / st.shared (and ::cta, ::cluster: distributed shared memory through a mapa address), scalars and
// .v2 / .v4 of 8 to 64 bits. A generic-proxy write to the block's shared memory (st.shared, stmatrix) is
// remembered until the writing thread executes fence.proxy.async: an async-proxy read of it before that (a TMA
// store's source, a wgmma operand) is reported. (Plain C++ stores to shared memory are not seen.)
static int type_bytes(const std::string& op) {
    const size_t dot = op.rfind('.');
    const std::string t = op.substr(dot + 1);
    if (t.size() < 2) fail("`%s`: no operand type", op.c_str());
    const int bits = atoi(t.c_str() + 1);
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64) cannot(("`" + op + "`").c_str());
    return bits / 8;
}

static void ld_st_shared(Ctx& c, const Insn& in, bool st) {
    const std::string& op = in.op;
    const int size = type_bytes(op), n = has(op, ".v4") ? 4 : has(op, ".v2") ? 2 : 1;
    if (in.args.size() != 2) fail("`%s` takes two operands", op.c_str());
    const Arg& at = in.args[st ? 0 : 1];
    const Arg& val = in.args[st ? 1 : 0];
    if ((n > 1) != (val.kind == 3) || (n > 1 && (int)val.list.size() != n))
        fail("`%s`: %d value%s", op.c_str(), n, n > 1 ? "s in braces" : "");
    Block* b = B;
    u32 a = (u32)addr(c, at);
    if (has(op, ".shared::cluster")) a = cluster_target(a, &b, op.c_str());
    else from_shared(a, (u64)size * n, op.c_str());
    if (a % (size * n)) fail("`%s` at shared address 0x%x: not %d-byte aligned", op.c_str(), a, size * n);
    unsigned char* p = in_block(b, a, (u64)size * n, op.c_str());
    if (b != B && b->live == 0)
        fail("`%s` into the shared memory of block rank %d of the cluster, which has already ended", op.c_str(),
             b->rank);
    for (int i = 0; i < n; ++i) {
        const Arg& v = n > 1 ? val.list[i] : val;
        if (st) {
            const u64 x = value(c, v);
            std::memcpy(p + i * size, &x, size);
        } else {
            u64 x = 0;
            std::memcpy(&x, p + i * size, size);
            if (has(op, ".s8") || has(op, ".s16")) x = (u64)(i64)(size == 1 ? (i64)(int8_t)x : (i64)(int16_t)x);
            store(c, v, x);
        }
    }
    if (st) generic_write(b, a, size * n);
}

static void generic_write(Block* b, u32 a, u32 n) {
    if (b != B) return;                                // another block's: its own threads fence what they read
    if (b->unfenced.empty()) b->unfenced.assign(b->smem_size, 0);
    const u32 off = a - SMEM_BASE;
    const uint16_t me = (uint16_t)(cur->linear + 1);
    for (u32 i = 0; i < n; ++i) b->unfenced[off + i] = me;
    auto& w = cur->generic_writes;
    if (!w.empty() && w.back().second >= off && w.back().first <= off + n) {
        w.back().first = std::min(w.back().first, off);
        w.back().second = std::max(w.back().second, off + n);
    } else if (w.size() < (1u << 16)) {
        w.push_back({off, off + n});
    } else {
        w.back() = {0, (u32)b->smem_size};             // too many to list: the fence scans everything
    }
}

static void proxy_fence() {                            // fence.proxy.async (for shared memory): this thread's
    Thread* t = cur;                                   // generic writes are ordered before later async reads
    if (!B->unfenced.empty()) {
        const uint16_t me = (uint16_t)(t->linear + 1);
        for (auto& r : t->generic_writes)
            for (u32 i = r.first; i < r.second; ++i)
                if (B->unfenced[i] == me) B->unfenced[i] = 0;
    }
    t->generic_writes.clear();
}

static void check_fenced(u32 a, u64 n, const char* reader) {
    if (B->unfenced.empty()) return;
    const u32 off = a - SMEM_BASE;
    for (u64 i = 0; i < n; ++i)
        if (const uint16_t w = B->unfenced[off + i])
            fail("%s (thread %d of block %u) reads shared memory that thread %d wrote through the generic proxy "
                 "(st.shared / stmatrix; shared address 0x%x) with no fence.proxy.async between that write and "
                 "this read: the asynchronous proxy may not see it. The writing thread executes "
                 "fence.proxy.async.shared::cta (fence_proxy_async()) after its writes, before the barrier that "
                 "lets this thread go on", reader, cur->linear, block_idx.x, w - 1, (u32)(a + i));
}

// ------------------------------------------------------------------------------------ setmaxnreg
// setmaxnreg.{inc,dec}.sync.aligned.u32 N (PTX ISA): N a multiple of 8 in 24..256; every warp of a warpgroup
// executes the same one; .inc raises the warp's per-thread register count to N (waiting until the SM's pool has the
// registers), .dec lowers it. What the emulator can know it checks, then ignores the instruction: the count a warp
// starts with is ptxas's choice, unknown here, so a warp's first setmaxnreg is taken as it comes; a later one must
// go the way it says (.inc up, .dec down); and the counts the warps of a block have set must fit the SM's 65536
// registers, else an .inc waits forever on a GPU.
static void setmaxnreg(Ctx& c, const Insn& in) {
    const std::string& op = in.op;
    const bool inc = has(op, ".inc"), dec = has(op, ".dec");
    if (inc == dec) fail("`%s`: setmaxnreg is .inc or .dec", op.c_str());
    const int want = (int)value(c, in.args[0]);
    if (want < 24 || want > 256 || want % 8)
        fail("setmaxnreg.%s %d: the register count must be a multiple of 8 in 24..256", inc ? "inc" : "dec", want);
    collective(inc ? "setmaxnreg.inc" : "setmaxnreg.dec", 0xffffffffu, (u64)want);
    for (int l = 0; l < 32; ++l)
        if ((int)lane_value(l) != want)
            fail("the lanes of warp %d execute setmaxnreg with different counts (%d and %d)", cur->warp, want,
                 (int)lane_value(l));
    if (cur->lane == 0) {
        int& have = B->warp_regs[cur->warp];           // 0: not set yet (ptxas's count)
        if (have && inc && want < have)
            fail("setmaxnreg.inc %d in warp %d of block %u, whose threads hold %d registers since its last "
                 "setmaxnreg: .inc may only raise the count (and .dec lower it)", want, cur->warp, block_idx.x, have);
        if (have && dec && want > have)
            fail("setmaxnreg.dec %d in warp %d of block %u, whose threads hold %d registers since its last "
                 "setmaxnreg: .dec may only lower the count (and .inc raise it)", want, cur->warp, block_idx.x, have);
        have = want;
        auto& mine = B->warp_setmaxnreg[cur->warp];    // the warps of a warpgroup execute the same ones
        mine.push_back(inc ? want : -want);
        const size_t k = mine.size();
        for (int w = cur->warp / 4 * 4; w < cur->warp / 4 * 4 + 4 && w < (int)B->warp_regs.size(); ++w) {
            const auto& other = B->warp_setmaxnreg[w];
            if (w != cur->warp && other.size() >= k && other[k - 1] != mine[k - 1])
                fail("the warps of warpgroup %d of block %u execute different setmaxnreg (warp %d: setmaxnreg.%s %d, "
                     "warp %d: setmaxnreg.%s %d): every warp of a warpgroup executes the same one (.sync.aligned)",
                     cur->warp / 4, block_idx.x, w, other[k - 1] > 0 ? "inc" : "dec", std::abs(other[k - 1]),
                     cur->warp, inc ? "inc" : "dec", want);
        }
        long total = 0;
        for (int r : B->warp_regs) total += 32L * r;
        if (inc && total > 65536)
            fail("setmaxnreg.inc %d in warp %d of block %u can never complete: the counts the block's warps have set "
                 "add up to %ld registers (32 threads a warp), more than the SM's 65536, and .inc waits until the "
                 "pool has them", want, cur->warp, block_idx.x, total);
        events++;
    }
    collective("setmaxnreg (done)", 0xffffffffu, 0);
}

// ------------------------------------------------------------------------------------ clusters
// The blocks of a cluster (__cluster_dims__) run together, their threads interleaved by the scheduler, so that one
// block can wait for another. Each has its own shared memory; mapa maps an address of it to the same offset in
// another block of the cluster (the shared::cluster window, see cluster_target); mbarrier.arrive.shared::cluster
// arrives on another block's barrier; a multicast TMA load (.multicast::cluster, a CTA mask) lands the box in
// every block of the mask, each block's mbarrier at the same offset receiving the bytes; barrier.cluster.arrive /
// barrier.cluster.wait is the cluster-wide barrier (every thread still running arrives, then waits). What the
// PTX ISA leaves undefined and a GPU gets wrong by timing is reported: a peer's mbarrier used before a cluster
// barrier published its init, a block's shared memory used after the block ended, a wait with no arrive.
u32 cluster_target(u32 a, Block** blk, const char* what) {
    if (!(a >> CLUSTER_BIT)) { *blk = B; return a; }
    const u32 r = (a >> CLUSTER_BIT) - 1;
    if (r >= CL->ctas.size())
        fail("%s at shared::cluster address 0x%x: not an address in a block of this cluster (of %zu blocks); "
             "shared::cluster addresses come from mapa", what, a, CL->ctas.size());
    *blk = CL->ctas[r];
    return a & ((1u << CLUSTER_BIT) - 1);
}

static u32 cluster_address(Block* b, u32 off) { return b == B ? off : ((u32)(b->rank + 1) << CLUSTER_BIT) | off; }

static void mapa(Ctx& c, const Insn& in) {             // mapa{.shared::cluster}.u32/.u64 d, a, rank
    const u32 r = (u32)value(c, in.args[2]);
    if (r >= CL->ctas.size())
        fail("mapa to block rank %u: this cluster has %zu block%s (ranks 0..%zu)", r, CL->ctas.size(),
             CL->ctas.size() == 1 ? "" : "s", CL->ctas.size() - 1);
    Block* to = CL->ctas[r];
    if (has(in.op, ".shared::cluster")) {
        Block* from;
        const u32 off = cluster_target((u32)value(c, in.args[1]), &from, "mapa's address");
        in_block(from, off, 0, "mapa's address");
        store(c, in.args[0], cluster_address(to, off));
    } else {                                            // a generic address in a block's shared memory
        const unsigned char* p = (const unsigned char*)(uintptr_t)value(c, in.args[1]);
        Block* from = nullptr;
        for (Block* b : CL->ctas)
            if (p >= b->smem && p < b->smem + b->smem_size) from = b;
        if (!from) fail("mapa of the generic address %p, which is not in a block's shared memory", (const void*)p);
        store(c, in.args[0], (u64)(uintptr_t)(to->smem + (p - from->smem)));
    }
}

static void cluster_release() {                         // every thread still running has arrived: the phase ends
    if (CL->arrived == 0 || CL->arrived < CL->live()) return;
    CL->arrived = 0;
    CL->phase++;
    CL->released.swap(CL->know);
    CL->know.clear();
    events++;
    for (auto& w : CL->waiters) {
        Thread& t = w.first->threads[w.second];
        if (t.state == BLOCKED) t.state = RUNNABLE;
    }
    CL->waiters.clear();
}

static void cluster_arrive() {
    Thread* t = cur;
    if (t->cl_arrivals > t->cl_waits)
        fail("thread %d of block %u arrives at the cluster barrier (barrier.cluster.arrive) a second time without a "
             "barrier.cluster.wait between", t->linear, block_idx.x);
    t->cl_arrivals++;
    CL->arrived++;
    know_merge(CL->know, t->know);
    events++;
    cluster_release();
}

static void cluster_wait() {
    Thread* t = cur;
    if (t->cl_arrivals == t->cl_waits)
        fail("barrier.cluster.wait with no barrier.cluster.arrive before it (thread %d of block %u): a thread "
             "arrives, then waits", t->linear, block_idx.x);
    while (CL->phase < t->cl_arrivals) {
        CL->waiters.push_back({B, t->linear});
        t->note = {WAIT_CLUSTER, nullptr, {}};
        block("the cluster barrier");
    }
    t->cl_waits = t->cl_arrivals;
    know_merge(t->know, CL->released);
}

// ------------------------------------------------------------------------------------ warpgroup MMA (wgmma)
// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16: the 128 threads of a warpgroup (threads 128 g ..
// 128 g + 127 of the block) issue it together; A (64 x 16) comes from shared memory through a matrix
// descriptor or from registers, B (16 x N) from shared memory through a descriptor, D (64 x N, float32) lives in
// the threads' registers. The instruction is asynchronous, and so is its emulation, with either landing: each
// thread's share is queued at issue and computed at the wgmma.wait_group that covers its commit group (a result
// landing early would only hide mistakes). Until then its accumulator registers hold a NaN pattern: a read
// before the wait shows, a write is reported at the wait, and a thread that ends with wgmmas never waited for
// is reported. The shared-memory operands are read at issue and again at the wait, and a difference is
// reported: a stage refilled before the wait (with the copies landing at once, landing "eager"), or data that
// arrived only after the wgmma was issued. The accumulators' input is what the registers held at issue, or the
// result of an earlier wgmma still in flight on the same registers (wgmmas on one accumulator are ordered).
// wgmma.fence is checked where the emulator can see it: before a thread's first wgmma, and between the
// thread's own writes of accumulator registers and a wgmma accumulating into them (the registers' bits tell
// whether the thread wrote them since the emulator did, and whether it did so before the last fence). The
// registers of A (given by value) are not checked. Products are exact; the 16 of a k16 step are summed with
// the accumulator's input and rounded to float32 once, as the mma.sync emulation does.
//
// wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3 (FP8): the same with one-byte e4m3 elements, A and B both
// from shared memory and both K-major (the PTX ISA has transpose immediates for .f16/.bf16 only). A k32 step is
// the same 32 bytes of a row as bf16's k16, and a byte pair of fp8 elements (2 i, 2 i + 1) sits exactly where the
// bf16 element i does in every K-major layout (the core matrix is 8 rows of 16 bytes either way), so the
// operands are read, compared and checked by the bf16 code, two elements at a time. The arithmetic is the H100's
// as measured (e4m3_step): not float32 sums but 13 bits below the step's largest exponent.
//
// Matrix descriptor (PTX ISA, "Matrix Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading
// dimension byte offset (LBO) >> 4, 32-45 stride dimension byte offset (SBO) >> 4, 49-51 base offset, 62-63
// swizzle (0 none, 1 128 B, 2 64 B, 3 32 B). The canonical layouts, for element (mn, k) of an operand (A: mn
// = row m; B: mn = column n), i = mn % 8 or k % 8 inside an 8 x 16-byte core matrix, in 16-byte chunks:
//   K-major (transpose flag 0), no swizzle:  (mn % 8) * 16 + (mn / 8) * SBO + (k / 8) * LBO + (k % 8) * 2
//   K-major, swizzle of W bytes:             (mn % 8) * W  + (mn / 8) * SBO + (k / 8) * 16  + (k % 8) * 2
//   MN-major (flag 1), no swizzle:           (mn / 8) * SBO + (k % 8) * 16 + (k / 8) * LBO + (mn % 8) * 2
//   MN-major, swizzle of W bytes:            (mn / 8 % (W/16)) * 16 + (mn / 8 / (W/16)) * LBO
//                                            + (k % 8) * W + (k / 8) * SBO + (mn % 8) * 2
// (K-major with a swizzle ignores LBO: a k16 slice is 32 bytes of one row.) The start address is added and
// the swizzle applied to the shared address itself, as TMA writes it: bits 4.. XOR bits 7.. (3 bits for 128 B,
// 2 for 64 B, 1 for 32 B).
static const u32 WG_POISON = 0x7FF0BAD0u;        // a quiet NaN: an accumulator read before its wgmma landed

struct Desc { u32 start, lbo, sbo, base; int swz; };

static Desc decode_desc(u64 d) {
    Desc r;
    r.start = (u32)(d & 0x3FFF) << 4;
    r.lbo = (u32)((d >> 16) & 0x3FFF) << 4;
    r.sbo = (u32)((d >> 32) & 0x3FFF) << 4;
    r.base = (u32)((d >> 49) & 7);
    const int mode = (int)((d >> 62) & 3);
    r.swz = mode == 0 ? 0 : mode == 1 ? 128 : mode == 2 ? 64 : 32;
    return r;
}

// MN-major, the offset is a part from mn plus a part from k (before the swizzle).
static u32 mn_major_mn_part(const Desc& D, int mn) {
    const u32 ch = mn / 8, e = mn % 8;
    return D.swz == 0 ? ch * D.sbo + e * 2 : (ch % (D.swz / 16)) * 16 + (ch / (D.swz / 16)) * D.lbo + e * 2;
}

static u32 mn_major_k_part(const Desc& D, int k) {
    const u32 i = k % 8, kk = k / 8;
    return D.swz == 0 ? i * 16 + kk * D.lbo : i * D.swz + kk * D.sbo;
}

static u32 swizzled(const Desc& D, u32 a) {
    if (D.swz) a ^= ((a >> 7) & (u32)(D.swz / 16 - 1)) << 4;
    return a;
}

static u32 operand_address(const Desc& D, bool mn_major, int mn, int k) {
    u32 off;
    if (!mn_major) {
        const u32 i = mn % 8, j = mn / 8, kc = k / 8, e = k % 8;
        off = D.swz == 0 ? i * 16 + j * D.sbo + kc * D.lbo + e * 2 : i * D.swz + j * D.sbo + kc * 16 + e * 2;
    } else {
        off = mn_major_mn_part(D, mn) + mn_major_k_part(D, k);
    }
    return swizzled(D, D.start + off);
}

static float smem_bf16(u32 a, const char* what) {
    uint16_t v;
    std::memcpy(&v, from_shared(a, 2, what), 2);
    return bf16_float(v);
}

// The operands this thread's share needs, from shared memory: A's rows 16 w + l / 4 and + 8 (unless A is in
// registers), B's columns 8 j + 2 (l % 4) and + 1 of each block j of 8.
// Read in the widest pieces the layouts keep together (the same bytes as one element at a time): K-major, the
// elements k 8 c .. 8 c + 7 of a row are 16 bytes of one chunk (every term of the address but k % 8 is a multiple
// of 16, and the swizzle moves whole chunks); MN-major, the columns 2 tq and 2 tq + 1 of B are 4 adjacent bytes.
static void wgmma_operands(Thread* t, const WgmmaOp& op, uint16_t (*a)[16], uint16_t (*b)[16]) {
    const int w = (t->linear % 128) / 32, g = t->lane / 4, tq = t->lane % 4;
    auto row = [](const Desc& d, bool tnsp, int mn, uint16_t* dst, const char* what) {
        if (!tnsp) {
            for (int c = 0; c < 2; ++c)
                std::memcpy(dst + 8 * c, from_shared(operand_address(d, false, mn, 8 * c), 16, what), 16);
        } else {
            for (int k = 0; k < 16; ++k)
                std::memcpy(dst + k, from_shared(operand_address(d, true, mn, k), 2, what), 2);
        }
    };
    if (!op.a_regs) {
        const Desc da = decode_desc(op.desc_a);
        for (int h = 0; h < 2; ++h) row(da, op.tnsp_a, 16 * w + g + 8 * h, a[h], "wgmma's A operand (its descriptor)");
    }
    const Desc db = decode_desc(op.desc_b);
    u32 k_part[16];
    if (op.tnsp_b)
        for (int k = 0; k < 16; ++k) k_part[k] = mn_major_k_part(db, k);
    for (int c = 0; c < op.n / 4; c += 2) {
        const int mn = 8 * (c / 2) + 2 * tq;
        if (!op.tnsp_b) {
            row(db, false, mn, b[c], "wgmma's B operand (its descriptor)");
            row(db, false, mn + 1, b[c + 1], "wgmma's B operand (its descriptor)");
            continue;
        }
        const u32 base = db.start + mn_major_mn_part(db, mn);
        for (int k = 0; k < 16; ++k) {
            uint16_t pair[2];
            std::memcpy(pair, from_shared(swizzled(db, base + k_part[k]), 4, "wgmma's B operand (its descriptor)"), 4);
            b[c][k] = pair[0];
            b[c + 1][k] = pair[1];
        }
    }
}

// The operands' bytes must not hold generic-proxy writes no fence.proxy.async has ordered (see check_fenced).
static void wgmma_check_fenced(Thread* t, const WgmmaOp& op) {
    if (B->unfenced.empty()) return;
    const int w = (t->linear % 128) / 32, g = t->lane / 4, tq = t->lane % 4;
    if (!op.a_regs) {
        const Desc da = decode_desc(op.desc_a);
        for (int h = 0; h < 2; ++h)
            for (int k = 0; k < 16; ++k)
                check_fenced(operand_address(da, op.tnsp_a, 16 * w + g + 8 * h, k), 2, "a wgmma (its A operand)");
    }
    const Desc db = decode_desc(op.desc_b);
    for (int c = 0; c < op.n / 4; ++c)
        for (int k = 0; k < 16; ++k)
            check_fenced(operand_address(db, op.tnsp_b, 8 * (c / 2) + 2 * tq + c % 2, k), 2, "a wgmma (its B operand)");
}

// Thread t's share of a wgmma against shared memory now: what it read at issue must still be there.
static void wgmma_compare(Thread* t, const WgmmaOp& op) {
    uint16_t a[2][16], b[64][16];
    std::memcpy(a, op.a, sizeof a);
    wgmma_operands(t, op, a, b);
    const int w = (t->linear % 128) / 32, g = t->lane / 4, tq = t->lane % 4;
    for (int which = 0; which < 2; ++which) {
        const int rows = which == 0 ? 2 : op.n / 4;
        for (int r = 0; r < rows; ++r)
            for (int k = 0; k < 16; ++k) {
                const uint16_t then = which == 0 ? op.a[r][k] : op.b[r][k], now = which == 0 ? a[r][k] : b[r][k];
                if (then == now) continue;
                const int mn = which == 0 ? 16 * w + g + 8 * r : 8 * (r / 2) + 2 * tq + r % 2;
                const Desc dd = decode_desc(which == 0 ? op.desc_a : op.desc_b);
                u32 at = operand_address(dd, which == 0 ? op.tnsp_a : op.tnsp_b, mn, k);
                int kk = k, was = then, is = now, digits = 4;
                if (op.e4m3) {                   // one byte an element: name the element that changed
                    const int hi = ((then ^ now) & 0xFF) ? 0 : 1;
                    kk = 2 * k + hi, at += hi, was = then >> 8 * hi & 0xFF, is = now >> 8 * hi & 0xFF, digits = 2;
                }
                fail("the shared memory a wgmma reads changed between its issue and the wgmma_wait that covers it "
                     "(thread %d of block %u: %s[%s %d][k %d] at shared address 0x%x was 0x%0*x at the wgmma and is "
                     "0x%0*x at the wait). The tensor core reads its operands any time until the wait: either the "
                     "data arrived after the wgmma was issued (wait for the stage's copies, its mbarrier, before "
                     "the wgmmas), or the stage was refilled or written while the wgmma may still read it "
                     "(wgmma_wait before the stage is released)", t->linear, block_idx.x, which == 0 ? "A" : "B",
                     which == 0 ? "m" : "n", mn, kk, at, digits, was, digits, is);
            }
    }
}

// The shared memory the warpgroup's wgmma reads (all 128 threads' shares), for check_refill: A's span and B's
// span apart (one span over both would also cover whatever lies between them, such as another stage of a ring
// that a TMA load may refill while this wgmma runs).
static void record_reader(Thread* t, const WgmmaOp& op) {
    auto record = [&](const Desc& d, bool tnsp, int rows) {
        u32 lo = ~0u, hi = 0;
        for (int r = 0; r < rows; ++r)
            for (int k = 0; k < 16; ++k) {
                const u32 a = operand_address(d, tnsp, r, k);
                lo = a < lo ? a : lo;
                hi = a + 2 > hi ? a + 2 : hi;
            }
        B->readers.push_back({t->linear / 128, op.gen, lo, hi, B->reader_count++});
    };
    if (!op.a_regs) record(decode_desc(op.desc_a), op.tnsp_a, 64);
    record(decode_desc(op.desc_b), op.tnsp_b, op.n);
    while (B->readers.size() > 8192) B->readers.pop_front();
}

// e4m3, the "fn" variant (ml_dtypes.float8_e4m3fn): 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits,
// subnormals (exponent field 0: m 2^-9), no infinities, 0x7F and 0xFF NaN. Every code is exact in a double.
static double e4m3_decode(unsigned char v) {
    if ((v & 0x7F) == 0x7F) return NAN;
    const int e = (v >> 3) & 15, m = v & 7;
    const double mag = e ? std::ldexp(8 + m, e - 10) : std::ldexp(m, -9);
    return (v & 0x80) ? -mag : mag;
}

static double e4m3_value(unsigned char v) {        // (from a table of the 256 codes)
    static const auto table = [] {
        std::array<double, 256> t{};
        for (int i = 0; i < 256; ++i) t[i] = e4m3_decode((unsigned char)i);
        return t;
    }();
    return table[v];
}

// The exponent an e4m3 element brings to a product as the FP8 tensor cores align it: its exponent field's (the
// exponent of a normal value, -6 for a subnormal one; zero contributes nothing).
static int e4m3_exponent(unsigned char v) {
    const int e = (v >> 3) & 15;
    return e ? e - 7 : -6;
}

// One k32 step of an e4m3 wgmma on one accumulator, as an H100 does it (tools/probe_fp8_sums.py measured 147,456
// accumulators of random steps; tests/machinery/test_emulate_fp8.py replays them bit for bit):
//   1. each nonzero product a_k b_k is exact and brings the exponent e(a_k) + e(b_k) (its operands' exponent
//      fields: the product's significand, in [1, 4), is not renormalised); the accumulator brings its own;
//   2. E is the largest of those exponents; the accumulator and the 32 products each keep only their bits down
//      to 2^(E - 13), truncated toward zero, and those are summed exactly;
//   3. the sum keeps its bits down to 2^(max(E, e(sum)) - 13), truncated toward zero (where it grew past 2^E it
//      loses the bits below 14), and is stored as float32 toward zero.
// A NaN input gives NaN; an infinite accumulator stays infinite (products of e4m3 are finite).
static inline double pow2(int e) {                 // 2^e, exactly (std::ldexp(1.0, e) without its cost)
    if (e < -1022 || e > 1023) return std::ldexp(1.0, e);
    const u64 bits = (u64)(e + 1023) << 52;
    double r;
    std::memcpy(&r, &bits, 8);
    return r;
}

static float e4m3_step(float acc, const double* products, const int* exponents, int n) {
    double plain = acc;
    bool special = !std::isfinite(acc);
    for (int i = 0; i < n; ++i) {
        special |= std::isnan(products[i]);
        plain += products[i];
    }
    if (special) return (float)plain;
    int top = INT32_MIN;
    if (acc != 0.f) top = std::ilogb(acc);
    for (int i = 0; i < n; ++i)
        if (products[i] != 0.0) top = std::max(top, exponents[i]);
    if (top == INT32_MIN) return 0.f;
    const double quantum = pow2(top - 13), per = pow2(13 - top);   // (powers of 2: scaling by them is exact)
    double sum = std::trunc((double)acc * per);                    // in quanta: each term an integer below 2^15
    for (int i = 0; i < n; ++i) sum += std::trunc(products[i] * per);
    sum *= quantum;
    if (sum != 0.0 && std::ilogb(sum) > top) {                     // grown past 2^E: 14 bits kept
        const double kept = pow2(std::ilogb(sum) - 13);
        sum = std::trunc(sum / kept) * kept;
    }
    float f = (float)sum;
    if (std::fabs((double)f) > std::fabs(sum)) f = std::nextafter(f, 0.f);
    return f;
}

static void wgmma_land(Thread* t, WgmmaOp& op) {
    const int nreg = op.n / 2;
    AccReg* const* regs = op.reg;
    for (int i = 0; i < nreg; ++i) {              // nobody touched the accumulators while the wgmma was in flight
        u32 now;
        std::memcpy(&now, op.d[i], 4);
        if (now != regs[i]->left)
            fail("the accumulators of a wgmma were read or written before the wgmma_wait that covers them (thread "
                 "%d of block %u: accumulator register %d changed while its wgmma was in flight). wgmma.mma_async "
                 "runs asynchronously: commit it (wgmma_commit) and wait for its group (wgmma_wait<N>) before the "
                 "registers are used", t->linear, block_idx.x, i);
    }
    // The shared-memory operands must still hold what the thread's share read at issue: the tensor core reads them
    // any time until the wait. Unless a TMA load ordered after the wgmma's completion (check_refill) has refilled
    // them since: then another thread of the warpgroup waited for it, and the stage was released and refilled.
    WarpGroup& wgp = B->wgroups[t->linear / 128];
    if (op.gen >= wgp.refilled_below) wgmma_compare(t, op);
    if (t->know.empty()) t->know.assign(KNOW, 0);        // this thread now knows the wgmma is done
    u32& known = t->know[8 * B->rank + t->linear / 128];
    if (known < op.gen + 1) known = op.gen + 1;
    const uint16_t (*a)[16] = op.a, (*b)[16] = op.b;   // the operands as read at issue
    float res[128];
    double av[2][32], bv[64][32];                 // (e4m3) the elements' values, with the immediates' signs,
    int ea[2][32], eb[64][32];                    // and their exponents
    if (!op.e4m3)                                 // (bf16) the same: 16 elements a row
        for (int r = 0; r < 2 + op.n / 4; ++r) {
            const uint16_t* bits = r < 2 ? a[r] : b[r - 2];
            double* v = r < 2 ? av[r] : bv[r - 2];
            for (int k = 0; k < 16; ++k) v[k] = (double)((r < 2 ? op.scale_a : op.scale_b) * bf16_float(bits[k]));
        }
    else
        for (int r = 0; r < 2 + op.n / 4; ++r) {
            const unsigned char* bytes = (const unsigned char*)(r < 2 ? a[r] : b[r - 2]);
            double* v = r < 2 ? av[r] : bv[r - 2];
            int* x = r < 2 ? ea[r] : eb[r - 2];
            for (int k = 0; k < 32; ++k) {
                v[k] = (r < 2 ? op.scale_a : op.scale_b) * e4m3_value(bytes[k]);
                x[k] = e4m3_exponent(bytes[k]);
            }
        }
    for (int j = 0; j < op.n / 8; ++j)
        for (int e = 0; e < 2; ++e) {
            for (int h = 0; h < 2; ++h) {
                const int idx = 4 * j + 2 * h + e;
                float cin = 0.f;
                if (op.scale_d) {
                    u32 bits = op.c_in[idx];
                    if (op.chained[idx]) bits = regs[idx]->value;   // the earlier wgmma's result
                    cin = __uint_as_float(bits);
                }
                if (op.e4m3) {
                    double products[32];
                    int exponents[32];
                    for (int k = 0; k < 32; ++k) {
                        products[k] = av[h][k] * bv[2 * j + e][k];
                        exponents[k] = ea[h][k] + eb[2 * j + e][k];
                    }
                    res[idx] = e4m3_step(cin, products, exponents, 32);
                    continue;
                }
                double sum = 0.0;                 // exact products, one rounding (as the mma.sync emulation)
                for (int k = 0; k < 16; ++k) sum += av[h][k] * bv[2 * j + e][k];
                res[idx] = (float)(sum + (double)cin);
            }
        }
    // The result reaches the register when no later wgmma on it is still in flight (one issued since holds it:
    // its NaN pattern stays until that one lands); the next wgmma of the chain takes it from its AccReg's value.
    for (int i = 0; i < nreg; ++i) {
        const u32 bits = __float_as_uint(res[i]);
        AccReg& r = *regs[i];
        r.value = bits;
        if (r.inflight > 0 && --r.inflight > 0) continue;
        std::memcpy(op.d[i], &res[i], 4);
        r.left = bits;
    }
    events++;
}

static void wgmma_land_groups(Thread* t, size_t keep) {
    while (t->wg_groups.size() > keep) {
        std::vector<WgmmaOp> ops;
        ops.swap(t->wg_groups.front());
        t->wg_groups.pop_front();
        for (WgmmaOp& op : ops) wgmma_land(t, op);
    }
}

// A wgmma as its warpgroup must agree on it: the instruction and `fields` (desc_a, desc_b, scale-d, imm-scale-a,
// imm-scale-b, imm-trans-a, imm-trans-b, N), in words.
static std::string wgmma_key(const std::string& op, const u64* f) {
    char text[256];
    snprintf(text, sizeof text, "%s desc_a 0x%llx desc_b 0x%llx scale-d %d scale-a %lld scale-b %lld trans %d %d",
             op.c_str(), (unsigned long long)f[0], (unsigned long long)f[1], (int)f[2], (long long)f[3],
             (long long)f[4], (int)f[5], (int)f[6]);
    return text;
}

static void wgmma_issue(Ctx& c, const Insn& in) {
    const std::string& op = in.op;
    Thread* t = cur;
    const size_t at = op.find(".m64n");
    const bool e4m3 = has(op, ".f32.e4m3.e4m3");
    if (at == std::string::npos || !(e4m3 || has(op, ".f32.bf16.bf16")))
        cannot(("`" + op + "`: of wgmma.mma_async only m64nNk16 with bf16 inputs and m64nNk32 with e4m3 inputs, "
                "float32 accumulators, are emulated").c_str());
    const char* k_shape = e4m3 ? "k32" : "k16";
    char* end = nullptr;
    const int n = (int)strtol(op.c_str() + at + 5, &end, 10);
    if (std::strncmp(end, k_shape, 3) != 0 || n < 8 || n > 256 || n % 8)
        fail("`%s`: not a wgmma shape (m64nN%s with N a multiple of 8 up to 256)", op.c_str(), k_shape);
    const bool a_regs = in.args.size() > 1 && in.args[1].kind == 3;
    if (e4m3 && a_regs)
        cannot(("`" + op + "` with A from registers: of the e4m3 wgmma only A and B from shared memory "
                "(descriptors) is emulated").c_str());
    // e4m3 has no transpose immediates (K-major only): {d}, A, B, scale-d, imm-scale-a, imm-scale-b
    const size_t nargs = e4m3 ? 6u : a_regs ? 7u : 8u;
    if (in.args.size() != nargs || in.args[0].kind != 3 || (int)in.args[0].list.size() != n / 2 ||
        (a_regs && in.args[1].list.size() != 4))
        fail("`%s` takes {%d accumulators}, %s, the B descriptor, scale-d, imm-scale-a, imm-scale-b%s", op.c_str(),
             n / 2, a_regs ? "{4 registers of A}" : "the A descriptor",
             e4m3 ? " (no transpose immediates: e4m3 operands are K-major)"
                  : a_regs ? ", imm-trans-b" : ", imm-trans-a, imm-trans-b");
    if (t->linear / 128 * 128 + 128 > (int)(block_dim.x * block_dim.y * block_dim.z))
        fail("wgmma.mma_async by thread %d: a warpgroup is 128 threads (threads 128 g .. 128 g + 127 of the block), "
             "and this block of %u threads has only part of one there", t->linear,
             block_dim.x * block_dim.y * block_dim.z);
    WgmmaOp w;
    w.n = n;
    w.e4m3 = e4m3;
    w.a_regs = a_regs;
    w.desc_a = a_regs ? 0 : value(c, in.args[1]);
    w.desc_b = value(c, in.args[2]);
    w.scale_d = value(c, in.args[3]) != 0;
    const long long sa = (long long)value(c, in.args[4]), sb = (long long)value(c, in.args[5]);
    if ((sa != 1 && sa != -1) || (sb != 1 && sb != -1))
        fail("`%s`: imm-scale-a and imm-scale-b are 1 or -1", op.c_str());
    w.scale_a = (float)sa;
    w.scale_b = (float)sb;
    w.tnsp_a = a_regs || e4m3 ? 0 : (int)value(c, in.args[6]);
    w.tnsp_b = e4m3 ? 0 : (int)value(c, in.args[a_regs ? 6 : 7]);
    if ((w.tnsp_a != 0 && w.tnsp_a != 1) || (w.tnsp_b != 0 && w.tnsp_b != 1))
        fail("`%s`: imm-trans-a and imm-trans-b are 0 or 1", op.c_str());
    for (u64 dsc : {w.desc_a, w.desc_b})
        if (dsc && ((dsc >> 49) & 7))
            cannot("a wgmma matrix descriptor with a base offset other than 0 (bits 49-51)");
    // wgmma.fence: before the first wgmma, and between the thread's own writes of registers a wgmma reads and
    // that wgmma
    if (t->wg_regs.empty() && !t->wg_fenced)            // (no wgmma issued yet)
        fail("thread %d of block %u issues its first wgmma.mma_async without a wgmma.fence before it "
             "(wgmma_fence(): it orders the thread's own register writes, such as the zeroed accumulators, before "
             "the asynchronous tensor core reads them)", t->linear, block_idx.x);
    for (int i = 0; i < n / 2; ++i) {
        const Arg& r = in.args[0].list[i];
        if (r.kind != 0 || (size_t)r.reg >= c.nops || !c.ops[r.reg].out || c.ops[r.reg].size != 4)
            fail("`%s`: accumulator %d is not a 32-bit \"+f\" output operand", op.c_str(), i);
        w.d[i] = (float*)c.ops[r.reg].out;
        u32 now;
        std::memcpy(&now, w.d[i], 4);
        w.c_in[i] = now;
        AccReg& reg = t->wg_regs[w.d[i]];
        w.reg[i] = &reg;
        w.chained[i] = reg.inflight > 0;
        if (!w.scale_d) continue;
        // the thread's own writes: none since the emulator last wrote the register (its bits are still those),
        // or made before the last wgmma.fence (its bits are those the fence saw); else the fence is missing
        if (reg.named && reg.left != now) {
            if (w.chained[i])
                fail("the accumulators of a wgmma were read or written before the wgmma_wait that covers them "
                     "(thread %d of block %u: accumulator register %d changed while a wgmma on it was in flight)",
                     t->linear, block_idx.x, i);
            if (!reg.fenced || reg.at_fence != now)
                fail("thread %d of block %u wrote accumulator registers after a wgmma had written them and issues "
                     "a wgmma that accumulates into them without a wgmma.fence between the write and the wgmma "
                     "(wgmma_fence() orders the thread's register writes before the tensor core reads them)",
                     t->linear, block_idx.x);
        }
    }
    // The shared-memory operands as they are when this thread issues (before the warpgroup meets: a thread that
    // goes on later must not see a stage refilled in between); the first wait that covers the wgmma compares.
    wgmma_operands(t, w, w.a, w.b);
    wgmma_check_fenced(t, w);
    // the warpgroup meets: same instruction, same descriptors; A's registers published for the others
    WarpGroup& g = B->wgroups[t->linear / 128];
    const u64 fields[8] = {w.desc_a, w.desc_b, (u64)w.scale_d, (u64)sa, (u64)sb, (u64)w.tnsp_a, (u64)w.tnsp_b,
                           (u64)n};
    const u32 gen = g.gen, slot = gen & 1;
    if (g.arrived == 0) {
        g.first = t->linear;
        g.op = &op;
        std::memcpy(g.fields, fields, sizeof fields);
    } else if ((g.op != &op && *g.op != op) || std::memcmp(g.fields, fields, sizeof fields) != 0)
        fail("the threads of warpgroup %d issue different wgmmas together: thread %d `%s`, thread %d `%s` (the "
             "instruction, its descriptors and immediates must be the same in all 128 threads)", t->linear / 128,
             g.first, wgmma_key(*g.op, g.fields).c_str(), t->linear, wgmma_key(op, fields).c_str());
    if (a_regs)
        for (int i = 0; i < 4; ++i) g.a[slot][t->linear % 128][i] = (u32)value(c, in.args[1].list[i]);
    w.gen = gen;
    g.arrived++;
    events++;
    if (g.arrived == 128) {
        g.arrived = 0;
        g.gen++;
        events++;
        for (int i : g.waiters) wake(i);
        g.waiters.clear();
        record_reader(t, w);
    } else {
        g.waiters.push_back(t->linear);
        t->note = {WAIT_WGMMA, nullptr, {t->linear / 128}};
        while (g.gen == gen) block("a wgmma");
    }
    if (a_regs) {   // A[r][k]: lane (r % 8) * 4 + (k % 8) / 2 of warp r / 16, register (r % 16) / 8 + 2 (k / 8)
        const int wp = (t->linear % 128) / 32, gq = t->lane / 4;
        for (int h = 0; h < 2; ++h)
            for (int k = 0; k < 16; ++k) {
                const u32 word = B->wgroups[t->linear / 128].a[slot][32 * wp + gq * 4 + (k % 8) / 2][h + 2 * (k / 8)];
                w.a[h][k] = (uint16_t)(k % 2 ? word >> 16 : word & 0xFFFFu);
            }
    }

    // The results land at the wait_group that covers the wgmma, with either landing: an early result would only
    // hide mistakes (accumulators read too early), and the copies landing at once (landing "eager") then show
    // a stage refilled before the wait. Until then the accumulators hold a NaN pattern.
    for (int i = 0; i < n / 2; ++i) {
        AccReg& reg = *w.reg[i];
        reg.inflight++;
        std::memcpy(w.d[i], &WG_POISON, 4);
        reg.left = WG_POISON;
        reg.named = true;
    }
    if (t->wg_open.capacity() == 0) t->wg_open.reserve(8);   // (an op is kilobytes: no regrowing from one)
    t->wg_open.push_back(w);
}

static void setp(Ctx& c, const Insn& in) {   // setp.CMP.TYPE p, a, b
    const std::string& op = in.op;
    const size_t dot = op.find('.', 5);
    const std::string cmp = op.substr(5, dot - 5), type = dot == std::string::npos ? "" : op.substr(dot + 1);
    const u64 x = value(c, in.args[1]), y = value(c, in.args[2]);
    int lt, eq;
    if (type == "f32") {
        const float a = __uint_as_float((u32)x), b = __uint_as_float((u32)y);
        lt = a < b; eq = a == b;
    } else if (type == "s32") { lt = (int)x < (int)y; eq = (u32)x == (u32)y; }
    else if (type == "s64") { lt = (i64)x < (i64)y; eq = x == y; }
    else if (type == "b32" || type == "u32") { lt = (u32)x < (u32)y; eq = (u32)x == (u32)y; }
    else if (type == "b64" || type == "u64") { lt = x < y; eq = x == y; }
    else { cannot(("`" + op + "`").c_str()); return; }
    int r;
    if (cmp == "eq") r = eq; else if (cmp == "ne") r = !eq;
    else if (cmp == "lt" || cmp == "lo") r = lt; else if (cmp == "le" || cmp == "ls") r = lt || eq;
    else if (cmp == "gt" || cmp == "hi") r = !lt && !eq; else if (cmp == "ge" || cmp == "hs") r = !lt;
    else { cannot(("`" + op + "`").c_str()); return; }
    store(c, in.args[0], (u64)r);
}

// bar.sync / bar.arrive id, count (PTX ISA, barrier): 16 barriers a block, ids 0..15; the count a multiple of the
// warp size (32), at most the block's threads; bar.arrive needs one.
static void named_barrier_check(const std::string& op, int id, int count, bool given) {
    const int threads = (int)(block_dim.x * block_dim.y * block_dim.z);
    if (id < 0 || id > 15) fail("`%s` on barrier %d: a block has 16 named barriers, 0..15", op.c_str(), id);
    if (given && (count <= 0 || count % 32))
        fail("`%s %d, %d`: the thread count must be a positive multiple of 32 (the warp size)", op.c_str(), id, count);
    if (given && count > (threads + 31) / 32 * 32)
        fail("`%s %d, %d`: more threads than the block's %d", op.c_str(), id, count, threads);
}

static void exec(Ctx& c, const Insn& in) {
    const std::string& op = in.op;
    Thread* t = cur;
    if (op.rfind("mma.sync.aligned.m16n8k16", 0) == 0) { mma_m16n8k16(c, in); return; }
    if (op.rfind("ldmatrix.sync.aligned", 0) == 0) { ldmatrix(c, in); return; }
    if (op.rfind("stmatrix.sync.aligned", 0) == 0) { stmatrix(c, in); return; }
    if (op.rfind("barrier.cluster.arrive", 0) == 0) { cluster_arrive(); return; }
    if (op.rfind("barrier.cluster.wait", 0) == 0) { cluster_wait(); return; }
    if (op.rfind("mapa", 0) == 0) { mapa(c, in); return; }
    if (op.rfind("getctarank", 0) == 0) {
        if (has(op, ".shared::cluster")) {
            Block* b;
            cluster_target((u32)value(c, in.args[1]), &b, "getctarank");
            store(c, in.args[0], (u64)b->rank);
        } else {
            const unsigned char* q = (const unsigned char*)(uintptr_t)value(c, in.args[1]);
            Block* from = nullptr;
            for (Block* b : CL->ctas)
                if (q >= b->smem && q < b->smem + b->smem_size) from = b;
            if (!from) fail("getctarank of the generic address %p, which is not in a block's shared memory", (const void*)q);
            store(c, in.args[0], (u64)from->rank);
        }
        return;
    }
    if (op.rfind("setmaxnreg.", 0) == 0) { setmaxnreg(c, in); return; }
    if (op.rfind("st.shared", 0) == 0 || op.rfind("st.volatile.shared", 0) == 0) { ld_st_shared(c, in, true); return; }
    if (op.rfind("ld.shared", 0) == 0 || op.rfind("ld.volatile.shared", 0) == 0) { ld_st_shared(c, in, false); return; }
    if (op == "fence.proxy.async" || op == "fence.proxy.async.shared::cta" || op == "fence.proxy.async.shared::cluster") {
        proxy_fence();
        return;
    }
    if (op.rfind("wgmma.mma_async.sync.aligned.", 0) == 0) { wgmma_issue(c, in); return; }
    if (op == "wgmma.fence.sync.aligned") {
        t->wg_fenced = true;
        for (auto& kv : t->wg_regs) {          // what the accumulators hold now: writes before this are ordered
            if (!kv.second.named) continue;
            std::memcpy(&kv.second.at_fence, kv.first, 4);
            kv.second.fenced = true;
        }
        return;
    }
    if (op == "wgmma.commit_group.sync.aligned") {
        t->wg_groups.emplace_back();
        t->wg_groups.back().swap(t->wg_open);
        return;
    }
    if (op == "wgmma.wait_group.sync.aligned") {
        wgmma_land_groups(t, (size_t)value(c, in.args[0]));
        return;
    }
    if (op.rfind("setp.", 0) == 0) { setp(c, in); return; }
    if (op == "ex2.approx.f32" || op == "ex2.approx.ftz.f32") {   // 2^x (the GPU's is within 2 ulp of it)
        float r = exp2f(__uint_as_float((u32)value(c, in.args[1])));
        if (has(op, ".ftz") && std::fpclassify(r) == FP_SUBNORMAL) r = 0.f;
        store(c, in.args[0], __float_as_uint(r));
        return;
    }
    if (has(op, "wgmma") || op.rfind("mma", 0) == 0 || has(op, "ldmatrix") || has(op, "stmatrix") ||
        has(op, "tcgen05")) {
        std::string what = "`" + op + "`: of the tensor-core instructions only mma.sync.m16n8k16 (bf16), ldmatrix, "
                           "stmatrix (m8n8 b16) and wgmma (m64nNk16 bf16, m64nNk32 e4m3) are emulated on a CPU; "
                           "this part is graded on a GPU only";
        cannot(what.c_str());
    }
    if (op.rfind("mov.", 0) == 0) { store(c, in.args[0], value(c, in.args[1])); return; }
    if (op == "trap") fail("the kernel executed trap (thread %d of block %u)", t->linear, block_idx.x);
    if (op.rfind("selp.", 0) == 0) {
        store(c, in.args[0], value(c, in.args[3]) ? value(c, in.args[1]) : value(c, in.args[2]));
        return;
    }
    if (op.rfind("cvt.rn.bf16x2.f32", 0) == 0) {
        float a = __uint_as_float((u32)value(c, in.args[1])), b = __uint_as_float((u32)value(c, in.args[2]));
        store(c, in.args[0], (bf16_rn(a) << 16) | bf16_rn(b));
        return;
    }
    if (op.rfind("fence", 0) == 0 || op.rfind("prefetch", 0) == 0 || op.rfind("membar", 0) == 0 ||
        op.rfind("griddepcontrol", 0) == 0)
        return;
    if (op == "cp.async.commit_group") { t->groups.push_back(t->open); t->open.clear(); return; }
    if (op == "cp.async.wait_group") { land_groups(t->groups, (size_t)value(c, in.args[0])); return; }
    if (op == "cp.async.wait_all") { t->groups.push_back(t->open); t->open.clear(); land_groups(t->groups, 0); return; }
    if (op.rfind("cp.async.ca.", 0) == 0 || op.rfind("cp.async.cg.", 0) == 0) {
        Copy cp;
        cp.dst = (u32)addr(c, in.args[0]);
        cp.src = (const unsigned char*)(uintptr_t)addr(c, in.args[1]);
        cp.bytes = (u32)value(c, in.args[2]);
        cp.src_bytes = in.args.size() > 3 ? (u32)value(c, in.args[3]) : cp.bytes;
        if (cp.bytes != 4 && cp.bytes != 8 && cp.bytes != 16) fail("cp.async copies 4, 8 or 16 bytes, not %u", cp.bytes);
        if (op.rfind("cp.async.cg.", 0) == 0 && cp.bytes != 16) fail("cp.async.cg copies 16 bytes only (got %u)", cp.bytes);
        if (cp.dst % cp.bytes || (uintptr_t)cp.src % cp.bytes)
            fail("a %u-byte cp.async needs %u-byte aligned addresses: shared 0x%x, global %p (thread %d)", cp.bytes,
                 cp.bytes, cp.dst, (const void*)cp.src, t->linear);
        from_shared(cp.dst, cp.bytes, "a cp.async destination");
        if (lazy) t->open.push_back(cp); else land_copy(cp);
        return;
    }
    if (op.rfind("mbarrier.init", 0) == 0) {
        const u32 a = (u32)addr(c, in.args[0]);
        from_shared(a, 8, "mbarrier.init");
        if (a % 8) fail("mbarrier.init: the address 0x%x is not 8-byte aligned", a);
        Mbar& m = B->mbars[a];
        m = Mbar();
        m.inited = true;
        m.count = m.pending = (u32)value(c, in.args[1]);
        m.ready = t->cl_arrivals + 1;            // the cluster barrier phase that publishes it to the peers
        if (m.count == 0) fail("mbarrier.init with a count of 0");
        events++;
        return;
    }
    if (op.rfind("mbarrier.arrive", 0) == 0) {   // (.shared::cluster: on a barrier of any block of the cluster)
        Block* b = B;
        u32 a = (u32)addr(c, in.args[1]);
        if (has(op, ".shared::cluster")) a = cluster_target(a, &b, "mbarrier.arrive");
        else from_shared(a, 8, "mbarrier.arrive");
        Mbar& m = mbar_in(b, a, "mbarrier.arrive");
        remote_ok(b, a, m, "a remote mbarrier.arrive (.shared::cluster)");
        u32 count = 1;
        if (has(op, "expect_tx")) {
            const i64 bytes = (i64)value(c, in.args[2]);
            m.expected += bytes;
            m.tx += bytes;
        } else if (in.args.size() > 2) {
            count = (u32)value(c, in.args[2]);
            if (count == 0) fail("mbarrier.arrive with a count of 0");
        }
        if (m.pending < count) {
            // Every arrival of this phase is in and it waits only for its copies' bytes: say who came, and what
            // an extra arrival on such a barrier (a TMA ring's "full", count 1) usually means.
            std::string came;
            for (size_t i = 0; i < m.arrivals.size() && i < 4; ++i) {
                char one[64];
                snprintf(one, sizeof one, "%sthread %u of block %u", i ? ", " : "", m.arrivals[i] & 0xFFFF,
                         CL->ctas[m.arrivals[i] >> 16]->idx.x);
                came += one;
            }
            fail("more arrivals on an mbarrier (0x%x%s) than its count (%u): thread %d of block %u arrived while "
                 "its phase %u already had every arrival it counts (%s) and waited only for the bytes of its "
                 "copies. Either more threads arrive than the count says (an arrival every thread makes where "
                 "one should), or, on a TMA ring's \"full\" barrier, the producer armed a stage again before "
                 "the copies of its last fill landed: it went past its wait on that stage's \"empty\" barrier "
                 "too early, because a consumer released the stage before it had waited for the data (a wait "
                 "parity that does not flip once per lap of the ring, or a stage and phase that do not carry "
                 "over from one tile to the next), or a release went to the wrong barrier",
                 a, b == B ? "" : " of another block", m.count, t->linear, B->idx.x, m.phase,
                 came.empty() ? "none kept" : came.c_str());
        }
        know_merge(m.know, t->know);
        for (u32 i = 0; i < count && m.arrivals.size() < 64; ++i) m.arrivals.push_back(arriver(B->rank, t->linear));
        m.pending -= count;
        events++;
        if (b == B) store(c, in.args[0], m.phase);
        else if (in.args[0].kind != 5)
            fail("`%s` on another block's mbarrier gives no state: its destination must be the sink _", op.c_str());
        mbar_complete_if_done(a, m);
        return;
    }
    if (op.rfind("mbarrier.expect_tx", 0) == 0) {
        const u32 a = (u32)addr(c, in.args[0]);
        Mbar& m = mbar_at(a, "mbarrier.expect_tx");
        const i64 bytes = (i64)value(c, in.args[1]);
        m.expected += bytes;
        m.tx += bytes;
        events++;
        return;
    }
    if (op.rfind("mbarrier.try_wait.parity", 0) == 0 || op.rfind("mbarrier.test_wait.parity", 0) == 0) {
        mbar_wait_once(c, in);
        return;
    }
    if (op.rfind("mbarrier.", 0) == 0) {
        std::string what = "`" + op + "` (the emulator knows mbarrier.init, arrive, arrive.expect_tx, expect_tx "
                           "and try_wait.parity / test_wait.parity)";
        cannot(what.c_str());
    }
    if (op.rfind("cp.async.bulk.tensor.", 0) == 0) {
        const int rank = op[21] - '0';
        if (has(op, ".global.shared")) {            // a store: [map, {coords}], [smem]
            const Arg& g = in.args[0];
            TmaOp st;
            const unsigned char* map = (const unsigned char*)(uintptr_t)value(c, g.list[0]);
            std::memcpy(st.map, map, 128);
            st.bytes = box_bytes(map);
            st.rank = rank;
            for (int i = 0; i < rank; ++i) st.coords[i] = (int)value(c, g.list[1].list[i]);
            st.smem = (u32)addr(c, in.args[1]);
            st.store = 1;
            st.bar = 0;
            st.phase = 0;
            st.cta = B->rank;
            st.issuer = t->linear;
            if ((int)g.list[1].list.size() != rank)
                fail("%s names %d coordinates", op.c_str(), (int)g.list[1].list.size());
            if (st.smem % 128) fail("a TMA store's source (shared address 0x%x) must be 128-byte aligned", st.smem);
            const unsigned char* src = from_shared(st.smem, st.bytes, "a TMA store's source");
            check_fenced(st.smem, st.bytes, "a TMA store (cp.async.bulk.tensor global <- shared)");
            // What the box holds now; the store may read it any time until the cp.async.bulk.wait_group(.read)
            // that covers it, which compares. Landing "eager" writes global memory now, "lazy" at that wait.
            st.seen.assign(src, src + st.bytes);
            if (!lazy) {
                serve(2, st);
                st.written = true;
            }
            t->bulk_open.push_back(st);
            return;
        }
        if (!has(op, "mbarrier::complete_tx") || has(op, ".im2col") || !has(op, ".global"))
            cannot(("`" + op + "` (of cp.async.bulk.tensor the emulator knows the tiled load into shared memory, "
                    "with or without .multicast::cluster, and the tiled store from shared memory)").c_str());
        const Arg& g = in.args[1];
        if ((int)g.list[1].list.size() != rank)
            fail("%s names %d coordinates", op.c_str(), (int)g.list[1].list.size());
        int coords[5];
        for (int i = 0; i < rank; ++i) coords[i] = (int)value(c, g.list[1].list[i]);
        const int multicast = has(op, ".multicast::cluster");
        if (multicast && in.args.size() < 4) fail("%s needs a CTA mask after the mbarrier", op.c_str());
        tma_load((u32)addr(c, in.args[0]), (const unsigned char*)(uintptr_t)value(c, g.list[0]), coords, rank,
                 (u32)addr(c, in.args[2]), multicast, multicast ? (u32)(value(c, in.args[3]) & 0xFFFF) : 0);
        return;
    }
    if (op == "cp.async.bulk.commit_group") { t->bulk_groups.push_back(t->bulk_open); t->bulk_open.clear(); return; }
    if (op.rfind("cp.async.bulk.wait_group", 0) == 0) { land_bulk(t->bulk_groups, (size_t)value(c, in.args[0])); return; }
    if (op.rfind("bar.sync", 0) == 0 || op.rfind("barrier.sync", 0) == 0 || op.rfind("bar.cta.sync", 0) == 0 ||
        op.rfind("barrier.cta.sync", 0) == 0) {
        const int id = (int)value(c, in.args[0]);
        const int count = in.args.size() > 1 ? (int)value(c, in.args[1]) : 0;
        named_barrier_check(op, id, count, in.args.size() > 1);
        bar_sync(id, id == 0 && count == (int)(block_dim.x * block_dim.y * block_dim.z) ? 0 : count);
        return;
    }
    if (op.rfind("bar.arrive", 0) == 0 || op.rfind("barrier.arrive", 0) == 0 || op.rfind("bar.cta.arrive", 0) == 0 ||
        op.rfind("barrier.cta.arrive", 0) == 0) {
        if (in.args.size() < 2) fail("`%s` needs a thread count (bar.arrive id, count)", op.c_str());
        named_barrier_check(op, (int)value(c, in.args[0]), (int)value(c, in.args[1]), true);
        bar_arrive((int)value(c, in.args[0]), (int)value(c, in.args[1]));
        return;
    }
    if (op.rfind("redux.sync.", 0) == 0) {
        const u32 mask = (u32)value(c, in.args[2]);
        const u64 v = value(c, in.args[1]);
        collective("redux.sync", mask, v);
        const bool sgn = has(op, ".s32");
        long long acc = 0;
        bool first = true;
        for (int l = 0; l < 32; ++l) {
            if (!(mask >> l & 1)) continue;
            long long x = sgn ? (long long)(int)(u32)lane_value(l) : (long long)(u32)lane_value(l);
            if (first) { acc = x; first = false; continue; }
            if (has(op, ".min")) acc = x < acc ? x : acc;
            else if (has(op, ".max")) acc = x > acc ? x : acc;
            else if (has(op, ".add")) acc += x;
            else if (has(op, ".and")) acc &= x;
            else if (has(op, ".or")) acc |= x;
            else if (has(op, ".xor")) acc ^= x;
        }
        store(c, in.args[0], (u64)(u32)acc);
        return;
    }
    if (op.rfind("elect.sync", 0) == 0) {
        const u32 mask = (u32)value(c, in.args[in.args.size() - 1]);
        collective("elect.sync", mask, 0);
        const int leader = __builtin_ctz(mask);
        store(c, in.args[0], (u64)leader);
        if (in.args.size() > 2) store(c, in.args[1], cur->lane == leader);   // elect.sync r|p, mask
        return;
    }
    std::string what = "the PTX instruction `" + op + "`";
    cannot(what.c_str());
}

void ptx(const char* text, std::initializer_list<Operand> ops) {
    static std::unordered_map<const char*, std::vector<Insn>> cache;
    auto it = cache.find(text);
    if (it == cache.end()) it = cache.emplace(text, parse(text)).first;
    Ctx c{ops.begin(), ops.size(), {}};
    for (const Insn& in : it->second) exec(c, in);
    if (urgent && cur) yield();     // a phase completed: its pollers go first (landing "eager")
}

// ------------------------------------------------------------------------------------ the scheduler
static void* (*entry_fn)(void**) = nullptr;
static void** entry_args = nullptr;

static void fiber_main() {
    Thread* t = cur;
    ((void (*)(void**))entry_fn)(entry_args);
    // a thread that ends with copies in flight: they still land (cp.async groups, TMA stores)
    t->groups.push_back(t->open);
    t->open.clear();
    land_groups(t->groups, 0);
    t->bulk_groups.push_back(t->bulk_open);
    t->bulk_open.clear();
    land_bulk(t->bulk_groups, 0);
    if (!t->wg_open.empty() || !t->wg_groups.empty())
        fail("thread %d of block %u ended with %zu wgmma.mma_async never waited for (%zu of them not even "
             "committed): their results never reached the accumulator registers, so whatever read those registers "
             "read no result. After the wgmmas: wgmma_commit(), then wgmma_wait<0>() before the accumulators are "
             "used", t->linear, block_idx.x, t->wg_open.size() + [&] { size_t k = 0; for (auto& g : t->wg_groups)
             k += g.size(); return k; }(), t->wg_open.size());
    t->state = DONE;
    B->live--;
    if (t->cl_arrivals > CL->phase) CL->arrived--;   // an arrival at the cluster barrier it never waited for
    events++;
    check_bar0();
    cluster_release();                                // the cluster barrier waits for the threads still running
    _longjmp(sched_jb, 1);                            // (never resumed)
}

// What thread t waits at, in words (its WaitNote written out).
static const char* wait_text(Thread& t) {
    const WaitNote& n = t.note;
    const long long* v = n.v;
    char* d = t.wait_detail;
    const size_t len = sizeof t.wait_detail;
    switch (n.kind) {
    case WAIT_NONE: break;
    case WAIT_WARP: snprintf(d, len, "%s (mask 0x%08x) in warp %d", n.op, (u32)v[0], (int)v[1]); break;
    case WAIT_BAR:
        if (v[0] == 0) snprintf(d, len, "__syncthreads");
        else snprintf(d, len, "bar.sync %d, %d", (int)v[0], (int)v[1]);
        break;
    case WAIT_MBAR:
        snprintf(d, len, "mbarrier 0x%x for parity %u (its phase %u: %u of %u arrivals missing, tx-count %lld, "
                 "expect_tx %lld, copies issued %lld bytes)", (u32)v[0], (u32)v[1], (u32)v[2], (u32)v[3], (u32)v[4],
                 v[5], v[6], v[7]);
        break;
    case WAIT_CLUSTER: snprintf(d, len, "barrier.cluster.wait (cluster_sync)"); break;
    case WAIT_WGMMA: snprintf(d, len, "wgmma.mma_async in warpgroup %d", (int)v[0]); break;
    }
    return d;
}

static std::string deadlock_report() {
    std::map<std::string, std::vector<int>> by;
    for (auto& t : B->threads)
        if (t.state != DONE) by[wait_text(t)].push_back(t.linear);
    std::string s = "every thread still running waits for something that can never happen:";
    for (auto& kv : by) {
        char line[400];
        const auto& v = kv.second;
        snprintf(line, sizeof line, "\n  threads %d..%d (%zu of them): %s", v.front(), v.back(), v.size(), kv.first.c_str());
        s += line;
    }
    // warps waiting for lanes that have returned: one line a warp, the lanes as ranges
    bool left = false;
    for (size_t w = 0; w < B->warps.size(); ++w) {
        const Warp& wp = B->warps[w];
        if (!wp.arrived) continue;
        std::string lanes;
        for (int l = 0; l < 32; ++l) {
            auto gone = [&](int k) {
                const size_t i = w * 32 + k;
                return k < 32 && (wp.mask >> k & 1) && !(wp.arrived >> k & 1) && i < B->threads.size() &&
                       B->threads[i].state == DONE;
            };
            if (!gone(l)) continue;
            int e = l;
            while (gone(e + 1)) ++e;
            char r[32];
            snprintf(r, sizeof r, e > l ? "%s%d..%d" : "%s%d", lanes.empty() ? "" : ", ", l, e);
            lanes += r;
            l = e;
        }
        if (lanes.empty()) continue;
        char line[400];
        snprintf(line, sizeof line, "\n  in warp %zu, lane(s) %s have left (returned), and %s waits for them: its "
                 "mask names every lane that must come", w, lanes.c_str(), wp.op);
        s += line;
        left = true;
    }
    for (size_t g = 0; g < B->wgroups.size(); ++g) {    // a warpgroup waiting at a wgmma for threads that left
        const WarpGroup& wg = B->wgroups[g];
        if (!wg.arrived) continue;
        int gone = 0, first = -1, last = -1;
        for (size_t i = 128 * g; i < 128 * g + 128 && i < B->threads.size(); ++i)
            if (B->threads[i].state == DONE) { gone++; if (first < 0) first = (int)i; last = (int)i; }
        char line[400];
        snprintf(line, sizeof line, "\n  warpgroup %zu: %d of its 128 threads wait at a wgmma.mma_async (%s)%s", g,
                 wg.arrived, wgmma_key(*wg.op, wg.fields).c_str(), gone ? "; threads of it have left (returned): " : "");
        s += line;
        if (gone) {
            snprintf(line, sizeof line, "%d of them, %d..%d. A wgmma is issued by all 128 threads of the warpgroup "
                     "together (.sync.aligned): no thread may skip it", gone, first, last);
            s += line;
        }
    }
    if (left)
        s += "\n  A shuffle or vote with the full mask must be reached by all 32 lanes: do it before any test that "
             "lets some lanes leave or skip it (an `if (e < E)`, a loop whose condition differs between lanes, an "
             "early return), and test afterwards.";
    // the mbarriers' own story, in words: a barrier whose arrivals are all in but whose bytes never add up is
    // the cause; the threads waiting on other barriers then wait for the threads stuck on it
    std::string causes, others;
    for (auto& kv : B->mbars) {
        const Mbar& m = kv.second;
        if (!m.inited) continue;
        bool waited = false;
        for (auto& t : B->threads) {
            char key[32];
            snprintf(key, sizeof key, "mbarrier 0x%x ", kv.first);
            if (t.state != DONE && std::strncmp(wait_text(t), key, std::strlen(key)) == 0) waited = true;
        }
        if (!waited) continue;
        char line[600];
        if (m.pending == 0 && m.tx != 0 && m.copies.empty()) {
            snprintf(line, sizeof line, "\n  the mbarrier at 0x%x would never complete: expect_tx says %lld bytes, "
                     "the boxes deliver %lld", kv.first, (long long)m.expected, (long long)m.issued);
            causes += line;
        } else if (m.pending > 0) {
            snprintf(line, sizeof line, "\n  the mbarrier at 0x%x still waits for %u of its %u arrivals (a missing "
                     "arrive, or threads waiting on a phase nobody will complete: a wrong parity?)", kv.first,
                     m.pending, m.count);
            others += line;
        } else {
            snprintf(line, sizeof line, "\n  the mbarrier at 0x%x: phase %u, waited on with the parity of a phase "
                     "that has not begun (a wrong parity?)", kv.first, m.phase);
            others += line;
        }
    }
    if (!causes.empty())
        s += causes + "\n  (the threads waiting on other barriers wait for the threads stuck on this one)";
    else
        s += others;
    return s;
}

static void run_thread(Block& blk, Thread& t) {   // until it blocks, yields or ends
    B = &blk;
    block_idx = blk.idx;
    t.wait_detail[0] = 0;
    t.note.kind = WAIT_NONE;
    t.spin = nullptr;                              // (set again if it stops at a poll that says "not yet")
    for (;;) {
        cur = &t;
        if (_setjmp(sched_jb) == 0) {
            if (!t.started) {
                t.started = true;
                swapcontext(&sched, &t.ctx);           // (returns only through sched_jb)
            }
            _longjmp(t.jb, 1);
        }
        cur = nullptr;
        if (failed || svc.kind == 0) break;
        svc.kind = 0;
        run_tma(svc.op);
    }
}

static volatile sig_atomic_t timed_out = 0;
static pthread_t runner;
static volatile int watchdog_stop = 0;
static double limit_s = 0;
static char altstack[1 << 16];

static void on_signal(int sig, siginfo_t* info, void*) {
    if (sig == SIGSEGV || sig == SIGBUS)
        snprintf(errbuf, sizeof errbuf, "the kernel read or wrote memory it does not own (%s at address %p, "
                 "thread %d of block %u): an index past the end of an array?", sig == SIGSEGV ? "SIGSEGV" : "SIGBUS",
                 info ? info->si_addr : nullptr, cur ? cur->linear : -1, block_idx.x);
    else if (sig == SIGINT)
        snprintf(errbuf, sizeof errbuf, "INTERRUPTED");
    else
        snprintf(errbuf, sizeof errbuf, "TIMEOUT");
    failed = 1;
    siglongjmp(escape, 1);
}

static void* watchdog(void*) {
    timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (!watchdog_stop) {
        usleep(20000);
        timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) + 1e-9 * (now.tv_nsec - start.tv_nsec) > limit_s && !watchdog_stop) {
            timed_out = 1;
            pthread_kill(runner, SIGUSR2);
            return nullptr;
        }
    }
    return nullptr;
}

// Eager: a completed phase's pollers go first (mbar_complete_if_done names the barrier), and theirs in turn.
static void run_urgent(std::vector<Block>& blocks) {
    for (int depth = 0; urgent && !failed && depth < 64; ++depth) {
        const void* u = urgent;
        urgent = nullptr;
        for (auto& blk : blocks)
            for (auto& w : blk.threads)
                if (!failed && w.state == RUNNABLE && w.spin == u) run_thread(blk, w);
    }
    urgent = nullptr;
}

// A thread whose last poll of an mbarrier said "not yet", and polling again now would say the same: nothing it
// waits for has happened since (the phase it waits for has not completed, and, landing lazy, no copies wait to
// land there with every arrival in).
static bool polls_in_vain(const Thread& t) {
    if (!t.spin) return false;
    const Mbar& m = *(const Mbar*)t.spin;
    if ((m.phase & 1) != t.spin_parity) return false;
    return !(lazy && m.pending == 0 && !m.copies.empty());
}

// Landing "eager" also runs the threads in an order of priority (the cluster's blocks by rank, then each block's
// threads by index): the first that can go on runs until it waits, then the search starts over. So each thread
// runs as far ahead as the program's barriers let it before a later one moves: warps and warpgroups drift apart as
// far as a GPU's could (which gives no two warps the same pace), not in step as the round-robin passes keep them
// (landing "lazy"). A stage that fast consumers release while a slow one still reads it (an arrival on the wrong
// stage's "empty" barrier, made up for by the fast ones) is then refilled under the slow one, and check_refill
// names it. A thread that polls in vain is passed over; false when no thread can go on but such pollers (the
// scheduler's round-robin pass then runs them, and finds a deadlock when nothing changes).
static bool run_first_ready(std::vector<Block>& blocks) {
    for (auto& blk : blocks)
        for (auto& t : blk.threads)
            if (t.state == RUNNABLE && !polls_in_vain(t)) {
                run_thread(blk, t);
                run_urgent(blocks);
                return true;
            }
    return false;
}

}  // namespace emu

void __syncthreads() { emu::bar_sync(0, 0); }
void __trap() {
    emu::fail("the kernel executed __trap() (thread %d of block %u)", emu::cur->linear, emu::block_idx.x);
}
long long clock64() { return emu::clock_now += 1000; }

extern "C" void emu_set_tma_handler(emu::TmaHandler h) { emu::tma_handler = h; }

// Run a grid. Returns 0, or 1 with the reason in err ("TIMEOUT", "INTERRUPTED", "CANNOT EMULATE: ..." or a
// sentence).
// lazy_landing: bit 0 lazy (else eager), bit 1 catch SIGINT (the caller is the process's main thread), bit 2 run
// ahead: the threads in order of priority, each as far as the barriers let it before a later one moves (else
// round-robin passes, warps in step). Landing "eager" always runs ahead; "lazy" with bit 2 runs ahead too.
// cx, cy, cz: the cluster's shape (1, 1, 1 without clusters; explicit: the launch named one). The blocks of a
// cluster run together, each with its own shared memory; clusters run one after another.
extern "C" int emu_launch(void* (*entry)(void**), void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned long long smem, int lazy_landing, double timeout_s,
                          char* err, int errlen, unsigned cx, unsigned cy, unsigned cz, int explicit_cl) {
    using namespace emu;
    entry_fn = entry;
    entry_args = args;
    lazy = lazy_landing & 1;
    const bool ahead = !lazy || (lazy_landing & 4) != 0;
    const bool catch_interrupt = (lazy_landing & 2) != 0;   // the host's main thread: Interrupt stops the run
    failed = 0;
    errbuf[0] = 0;
    timed_out = 0;
    explicit_cluster = explicit_cl;
    urgent = nullptr;
    grid_dim = {gx, gy, gz};
    block_dim.x = bx; block_dim.y = by; block_dim.z = bz;
    if (cx < 1 || cy < 1 || cz < 1 || gx % cx || gy % cy || gz % cz) {
        snprintf(err, errlen, "a grid of (%u, %u, %u) blocks cannot be cut into clusters of (%u, %u, %u): each "
                 "grid dimension must be a multiple of the cluster's", gx, gy, gz, cx, cy, cz);
        return 1;
    }
    const int ncta = (int)(cx * cy * cz);
    if (ncta > 16) {
        snprintf(err, errlen, "a cluster of %d blocks: at most 8 (16 with the non-portable size attribute)", ncta);
        return 1;
    }
    const int nthreads = (int)(bx * by * bz);
    const size_t stack = 256 * 1024;
    unsigned char* stacks = (unsigned char*)mmap(nullptr, stack * nthreads * ncta, PROT_READ | PROT_WRITE,
                                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    const size_t smem_alloc = ((smem + 1023) / 1024 + 1) * 1024;
    std::vector<unsigned char*> smem_raw(ncta);
    for (auto& r : smem_raw) r = (unsigned char*)aligned_alloc(1024, smem_alloc);
    std::vector<Block> blocks(ncta);
    Cluster cluster;
    cluster.dim = {cx, cy, cz};
    for (int r = 0; r < ncta; ++r) {
        blocks[r].smem = smem_raw[r];
        blocks[r].smem_size = smem;
        blocks[r].rank = r;
        cluster.ctas.push_back(&blocks[r]);
    }
    CL = &cluster;
    const int nwarps = (nthreads + 31) / 32;

    struct sigaction sa, old_segv, old_bus, old_int, old_usr2;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    stack_t ss, old_ss;
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    ss.ss_flags = 0;
    sigaltstack(&ss, &old_ss);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    if (catch_interrupt) sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGUSR2, &sa, &old_usr2);
    runner = pthread_self();
    watchdog_stop = 0;
    limit_s = timeout_s;
    pthread_t dog;
    pthread_create(&dog, nullptr, watchdog, nullptr);

    if (sigsetjmp(escape, 1) == 0) {
        for (unsigned z = 0; z < gz && !failed; z += cz)
        for (unsigned y = 0; y < gy && !failed; y += cy)
        for (unsigned x = 0; x < gx && !failed; x += cx) {
            cluster.id = {x / cx, y / cy, z / cz};
            cluster.arrived = 0;
            cluster.phase = 0;
            cluster.waiters.clear();
            cluster.know.clear();
            cluster.released.clear();
            for (int r = 0; r < ncta; ++r) {
                Block& blk = blocks[r];
                blk.idx = {x + (unsigned)r % cx, y + (unsigned)r / cx % cy, z + (unsigned)r / (cx * cy)};
                std::memset(blk.smem, 0xFF, smem);            // NaN everywhere until something is written
                blk.threads.assign(nthreads, Thread());
                blk.warps.assign(nwarps, Warp());
                blk.bars.clear();
                blk.mbars.clear();
                blk.wgroups.assign((nthreads + 127) / 128, WarpGroup());
                blk.unfenced.clear();
                blk.readers.clear();
                blk.reader_count = 0;
                blk.warp_regs.assign(nwarps, 0);
                blk.warp_setmaxnreg.assign(nwarps, std::vector<int>());
                blk.live = nthreads;
                for (int i = 0; i < nthreads; ++i) {
                    Thread& t = blk.threads[i];
                    t.linear = i;
                    t.idx = {(unsigned)(i % bx), (unsigned)(i / bx % by), (unsigned)(i / (bx * by))};
                    t.warp = i / 32;
                    t.lane = i % 32;
                    getcontext(&t.ctx);
                    t.ctx.uc_stack.ss_sp = stacks + stack * ((size_t)r * nthreads + i);
                    t.ctx.uc_stack.ss_size = stack;
                    t.ctx.uc_link = &sched;
                    makecontext(&t.ctx, (void (*)())fiber_main, 0);
                    t.started = false;
                }
            }
            while (cluster.live() > 0 && !failed) {
                if (ahead && run_first_ready(blocks)) continue;   // eager, or run ahead: in order of priority
                const u64 before = events;
                for (int r = 0; r < ncta && !failed; ++r) {        // a pass over every thread that may go on
                    Block& blk = blocks[r];
                    for (int i = 0; i < nthreads && !failed; ++i) {
                        Thread& t = blk.threads[i];
                        if (t.state != RUNNABLE) continue;
                        run_thread(blk, t);
                        run_urgent(blocks);
                    }
                }
                if (!failed && events == before && cluster.live() > 0) {
                    std::string report;
                    if (ncta == 1) {
                        B = &blocks[0];
                        block_idx = blocks[0].idx;
                        report = "DEADLOCK in block " + std::to_string(blocks[0].idx.x) + ": " + deadlock_report();
                    } else {
                        report = "DEADLOCK in the cluster of blocks " + std::to_string(blocks[0].idx.x) + ".." +
                                 std::to_string(blocks[ncta - 1].idx.x) + ":";
                        for (int r = 0; r < ncta; ++r) {
                            B = &blocks[r];
                            block_idx = blocks[r].idx;
                            if (blocks[r].live == 0) {
                                report += "\n block " + std::to_string(blocks[r].idx.x) + " (rank " +
                                          std::to_string(r) + "): every thread has returned";
                                continue;
                            }
                            std::string part = deadlock_report();
                            for (size_t at = part.find('\n'); at != std::string::npos; at = part.find('\n', at + 2))
                                part.insert(at + 1, " ");
                            report += "\n block " + std::to_string(blocks[r].idx.x) + " (rank " + std::to_string(r) +
                                      "): " + part;
                        }
                        if (cluster.arrived > 0) {
                            char line[200];
                            snprintf(line, sizeof line, "\n  the cluster barrier: %d of the %d threads still running "
                                     "in the cluster have arrived (barrier.cluster.arrive)", cluster.arrived,
                                     cluster.live());
                            report += line;
                        }
                    }
                    snprintf(errbuf, sizeof errbuf, "%s", report.c_str());
                    failed = 1;
                }
            }
        }
    }
    watchdog_stop = 1;
    pthread_join(dog, nullptr);
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    if (catch_interrupt) sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGUSR2, &old_usr2, nullptr);
    sigaltstack(&old_ss, nullptr);
    cur = nullptr;
    B = nullptr;
    CL = nullptr;
    for (auto& blk : blocks) blk.threads.clear();
    munmap(stacks, stack * nthreads * ncta);
    for (auto r : smem_raw) free(r);
    if (failed) {
        snprintf(err, errlen, "%s", errbuf);
        return 1;
    }
    return 0;
}
