// runtime.cpp: the scheduler, barriers, asynchronous copies and the inline-PTX interpreter behind runtime.h.
// Compiled once (cudabook/emulate caches the object) and linked with each emulated kernel.
#include "runtime.h"

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

struct Copy { u32 dst; const unsigned char* src; u32 bytes; u32 src_bytes; };            // cp.async
struct TmaOp { unsigned char map[128]; int coords[5]; int rank; u32 smem; u32 bar; int store; u64 bytes; int phase; };

struct Thread {
    ucontext_t ctx;
    uint3 idx;
    int linear, warp, lane;
    State state = RUNNABLE;
    const char* waiting = "";       // what it waits on, for the deadlock report
    char wait_detail[160] = {0};
    std::vector<Copy> open;         // cp.async copies since the last commit
    std::deque<std::vector<Copy>> groups;
    std::vector<TmaOp> bulk_open;   // TMA stores since the last bulk commit
    std::deque<std::vector<TmaOp>> bulk_groups;
};

struct Warp { u32 arrived = 0, mask = 0, gen = 0; u64 vals[2][32]; const char* op = ""; std::vector<int> waiters; };

struct Bar { int arrived = 0, count = 0; std::vector<int> waiters; };

struct Mbar {
    bool inited = false;
    u32 count = 0, pending = 0, phase = 0;
    i64 tx = 0, expected = 0, issued = 0;
    std::vector<TmaOp> copies;      // lazy: issued, not landed
};

struct Svc { int kind = 0; TmaOp op; };   // a request the scheduler serves on the host stack

typedef int (*TmaHandler)(int store, const unsigned char* map, const int* coords, int rank, unsigned char* smem,
                          u64 bytes, u32 smem_address, char* err, int errlen);

struct Block {
    std::vector<Thread> threads;
    std::vector<Warp> warps;
    std::map<int, Bar> bars;
    std::map<u32, Mbar> mbars;
    unsigned char* smem = nullptr;
    u64 smem_size = 0;
    int live = 0;
};

extern Block* B;
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
inline unsigned char* from_shared(u32 a, u64 bytes, const char* what) {
    if (a < SMEM_BASE || (u64)(a - SMEM_BASE) + bytes > B->smem_size)
        fail("%s at shared address 0x%x (%llu bytes) is outside the block's %llu bytes of shared memory", what, a,
             (unsigned long long)bytes, (unsigned long long)B->smem_size);
    return B->smem + (a - SMEM_BASE);
}

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
        snprintf(t->wait_detail, sizeof t->wait_detail, "%s (mask 0x%08x) in warp %d", op, mask, t->warp);
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
Thread* cur = nullptr;
uint3 block_idx, grid_dim;
dim3 block_dim;
u64 events = 0;
int lazy = 1;
Svc svc;
ucontext_t sched;
static char errbuf[4096];
static int failed = 0;
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
    if (cur) {
        Thread* t = cur;
        swapcontext(&t->ctx, &sched);   // never resumed
    }
    siglongjmp(escape, 1);              // (a failure on the scheduler's own stack)
}

void cannot(const char* what) {
    fail("CANNOT EMULATE: %s", what);
}

void yield() {
    Thread* t = cur;
    swapcontext(&t->ctx, &sched);
}

void block(const char* what) {
    Thread* t = cur;
    t->state = BLOCKED;
    t->waiting = what;
    swapcontext(&t->ctx, &sched);
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

static void bar_sync(int id, int count) {
    Thread* t = cur;
    Bar& b = B->bars[id];
    if (b.arrived == 0) b.count = count;
    else if (b.count != count)
        fail("barrier %d is used with two thread counts (%d and %d)", id, b.count, count);
    b.arrived++;
    events++;                             // an arrival is progress (the deadlock check counts events)
    const int need = count > 0 ? count : B->live;
    if (b.arrived >= need) {
        b.arrived = 0;
        events++;
        for (int i : b.waiters) wake(i);
        b.waiters.clear();
        return;
    }
    b.waiters.push_back(t->linear);
    if (id == 0) snprintf(t->wait_detail, sizeof t->wait_detail, "__syncthreads");
    else snprintf(t->wait_detail, sizeof t->wait_detail, "bar.sync %d, %d", id, count);
    block("a barrier");
}

static void check_bar0() {   // a thread left: __syncthreads counts the threads still running
    auto it = B->bars.find(0);
    if (it == B->bars.end() || it->second.arrived == 0 || it->second.count > 0) return;
    if (it->second.arrived >= B->live) {
        it->second.arrived = 0;
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

static void run_tma(const TmaOp& op) {     // on the scheduler's stack: the host fills or stores the box
    unsigned char* smem = from_shared(op.smem, op.bytes, op.store ? "a TMA store's source" : "a TMA load's destination");
    char err[1024] = {0};
    if (!tma_handler) fail("no TMA handler was installed");
    if (tma_handler(op.store, op.map, op.coords, op.rank, smem, op.bytes, op.smem, err, sizeof err) < 0)
        fail("%s", err);
    events++;
}

static Mbar& mbar_at(u32 a, const char* what) {
    from_shared(a, 8, what);
    if (a % 8) fail("%s: the mbarrier address 0x%x is not 8-byte aligned", what, a);
    Mbar& m = B->mbars[a];
    if (!m.inited) fail("%s on an mbarrier (shared address 0x%x) that was never initialised with mbarrier.init", what, a);
    return m;
}

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
        events++;
    }
}

static void mbar_tx(u32 a, Mbar& m, i64 bytes) {   // complete_tx
    m.tx -= bytes;
    mbar_complete_if_done(a, m);
}

static void land_pending(u32 a) {
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

static void tma_load(u32 dst, const unsigned char* map, const int* coords, int rank, u32 bar) {
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
    op.smem = dst;
    op.bar = bar;
    op.store = 0;
    if (dst % 128) fail("a TMA load's destination (shared address 0x%x) must be 128-byte aligned", dst);
    from_shared(dst, op.bytes, "a TMA load's destination");
    Mbar& m = mbar_at(bar, "cp.async.bulk.tensor's mbarrier");
    op.phase = (int)m.phase;
    m.issued += (i64)op.bytes;
    if (lazy) {
        m.copies.push_back(op);
    } else {
        serve(1, op);
        Mbar& mm = B->mbars[bar];
        mbar_tx(bar, mm, (i64)op.bytes);
    }
}

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
    return value(c, a.list[0]);
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
    if (!done) {
        Mbar& mm = B->mbars[a];
        snprintf(cur->wait_detail, sizeof cur->wait_detail,
                 "mbarrier 0x%x for parity %u (its phase %u: %u of %u arrivals missing, tx-count %lld, expect_tx "
                 "%lld, copies issued %lld bytes)", a, parity, mm.phase, mm.pending, mm.count, (long long)mm.tx,
                 (long long)mm.expected, (long long)mm.issued);
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

static void land_bulk(std::deque<std::vector<TmaOp>>& groups, size_t keep) {
    while (groups.size() > keep) {
        std::vector<TmaOp> g = groups.front();
        groups.pop_front();
        for (const TmaOp& op : g) serve(2, op);
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

static void exec(Ctx& c, const Insn& in) {
    const std::string& op = in.op;
    Thread* t = cur;
    if (op.rfind("mma.sync.aligned.m16n8k16", 0) == 0) { mma_m16n8k16(c, in); return; }
    if (op.rfind("ldmatrix.sync.aligned", 0) == 0) { ldmatrix(c, in); return; }
    if (has(op, "wgmma") || op.rfind("mma", 0) == 0 || has(op, "ldmatrix") || has(op, "stmatrix") ||
        has(op, "multicast") || op.rfind("barrier.cluster", 0) == 0 || op.rfind("mapa", 0) == 0 ||
        has(op, "tcgen05")) {
        std::string what = "`" + op + "`: of the tensor-core instructions only mma.sync.m16n8k16 (bf16) and "
                           "ldmatrix are emulated on a CPU (not wgmma, stmatrix, clusters); this part is graded "
                           "on a GPU only";
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
        op.rfind("setmaxnreg", 0) == 0 || op.rfind("griddepcontrol", 0) == 0)
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
        if (m.count == 0) fail("mbarrier.init with a count of 0");
        events++;
        return;
    }
    if (op.rfind("mbarrier.arrive", 0) == 0) {
        const u32 a = (u32)addr(c, in.args[1]);
        Mbar& m = mbar_at(a, "mbarrier.arrive");
        if (has(op, "expect_tx")) {
            const i64 bytes = (i64)value(c, in.args[2]);
            m.expected += bytes;
            m.tx += bytes;
        }
        if (m.pending == 0) fail("more arrivals on an mbarrier (0x%x) than its count (%u)", a, m.count);
        m.pending--;
        events++;
        store(c, in.args[0], m.phase);
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
            if (st.smem % 128) fail("a TMA store's source (shared address 0x%x) must be 128-byte aligned", st.smem);
            from_shared(st.smem, st.bytes, "a TMA store's source");
            if (lazy) t->bulk_open.push_back(st); else serve(2, st);
            return;
        }
        if (!has(op, "mbarrier::complete_tx")) {
            std::string what = "`" + op + "`";
            cannot(what.c_str());
        }
        const Arg& g = in.args[1];
        if ((int)g.list[1].list.size() != rank)
            fail("%s names %d coordinates", op.c_str(), (int)g.list[1].list.size());
        int coords[5];
        for (int i = 0; i < rank; ++i) coords[i] = (int)value(c, g.list[1].list[i]);
        tma_load((u32)addr(c, in.args[0]), (const unsigned char*)(uintptr_t)value(c, g.list[0]), coords, rank,
                 (u32)addr(c, in.args[2]));
        return;
    }
    if (op == "cp.async.bulk.commit_group") { t->bulk_groups.push_back(t->bulk_open); t->bulk_open.clear(); return; }
    if (op.rfind("cp.async.bulk.wait_group", 0) == 0) { land_bulk(t->bulk_groups, (size_t)value(c, in.args[0])); return; }
    if (op.rfind("bar.sync", 0) == 0 || op.rfind("barrier.sync", 0) == 0 || op.rfind("bar.cta.sync", 0) == 0) {
        const int id = (int)value(c, in.args[0]);
        const int count = in.args.size() > 1 ? (int)value(c, in.args[1]) : 0;
        bar_sync(id, id == 0 && count == (int)(block_dim.x * block_dim.y * block_dim.z) ? 0 : count);
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
    t->state = DONE;
    B->live--;
    events++;
    check_bar0();
    swapcontext(&t->ctx, &sched);
}

static std::string deadlock_report() {
    std::map<std::string, std::vector<int>> by;
    for (auto& t : B->threads)
        if (t.state != DONE) by[t.wait_detail].push_back(t.linear);
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
            if (t.state != DONE && std::strncmp(t.wait_detail, key, std::strlen(key)) == 0) waited = true;
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

}  // namespace emu

void __syncthreads() { emu::bar_sync(0, 0); }
void __trap() {
    emu::fail("the kernel executed __trap() (thread %d of block %u)", emu::cur->linear, emu::block_idx.x);
}
long long clock64() { return emu::clock_now += 1000; }

extern "C" void emu_set_tma_handler(emu::TmaHandler h) { emu::tma_handler = h; }

// Run a grid. Returns 0, or 1 with the reason in err ("TIMEOUT", "INTERRUPTED", "CANNOT EMULATE: ..." or a
// sentence).
// lazy_landing: bit 0 lazy (else eager), bit 1 catch SIGINT (the caller is the process's main thread).
extern "C" int emu_launch(void* (*entry)(void**), void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned long long smem, int lazy_landing, double timeout_s,
                          char* err, int errlen) {
    using namespace emu;
    entry_fn = entry;
    entry_args = args;
    lazy = lazy_landing & 1;
    const bool catch_interrupt = (lazy_landing & 2) != 0;   // the host's main thread: Interrupt stops the run
    failed = 0;
    errbuf[0] = 0;
    timed_out = 0;
    grid_dim = {gx, gy, gz};
    block_dim.x = bx; block_dim.y = by; block_dim.z = bz;
    const int nthreads = (int)(bx * by * bz);
    const size_t stack = 256 * 1024;
    unsigned char* stacks = (unsigned char*)mmap(nullptr, stack * nthreads, PROT_READ | PROT_WRITE,
                                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    unsigned char* smem_raw = (unsigned char*)aligned_alloc(1024, ((smem + 1023) / 1024 + 1) * 1024);
    Block blk;
    B = &blk;
    blk.smem = smem_raw;
    blk.smem_size = smem;

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
        for (unsigned z = 0; z < gz && !failed; ++z)
        for (unsigned y = 0; y < gy && !failed; ++y)
        for (unsigned x = 0; x < gx && !failed; ++x) {
            block_idx = {x, y, z};
            std::memset(blk.smem, 0xFF, smem);            // NaN everywhere until something is written
            blk.threads.assign(nthreads, Thread());
            blk.warps.assign((nthreads + 31) / 32, Warp());
            blk.bars.clear();
            blk.mbars.clear();
            blk.live = nthreads;
            for (int i = 0; i < nthreads; ++i) {
                Thread& t = blk.threads[i];
                t.linear = i;
                t.idx = {(unsigned)(i % bx), (unsigned)(i / bx % by), (unsigned)(i / (bx * by))};
                t.warp = i / 32;
                t.lane = i % 32;
                getcontext(&t.ctx);
                t.ctx.uc_stack.ss_sp = stacks + stack * i;
                t.ctx.uc_stack.ss_size = stack;
                t.ctx.uc_link = &sched;
                makecontext(&t.ctx, (void (*)())fiber_main, 0);
            }
            while (blk.live > 0 && !failed) {
                const u64 before = events;
                bool ran = false;
                for (int i = 0; i < nthreads && !failed; ++i) {
                    Thread& t = blk.threads[i];
                    if (t.state != RUNNABLE) continue;
                    ran = true;
                    t.wait_detail[0] = 0;
                    for (;;) {
                        cur = &t;
                        swapcontext(&sched, &t.ctx);
                        cur = nullptr;
                        if (failed || svc.kind == 0) break;
                        const int kind = svc.kind;
                        svc.kind = 0;
                        run_tma(svc.op);
                        (void)kind;
                    }
                }
                if (!failed && events == before && blk.live > 0) {
                    snprintf(errbuf, sizeof errbuf, "DEADLOCK in block %u: %s", x, deadlock_report().c_str());
                    failed = 1;
                }
                (void)ran;
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
    blk.threads.clear();
    munmap(stacks, stack * nthreads);
    free(smem_raw);
    if (failed) {
        snprintf(err, errlen, "%s", errbuf);
        return 1;
    }
    return 0;
}
