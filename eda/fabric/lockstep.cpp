// Lock-step simulator of a fabric cut into two parts (docs/fabric_rtl.md; eda/fabric/lockstep.py
// builds it, docs/fabric_rtl.md explains it).
//
// Vpart0 and Vpart1 are the Verilated models of FabricTop(spec, partition, part=0/1) or
// MeshFabricTop(spec, partition, part=0/1): the same top ports as the whole fabric (start,
// prog_*, cfg_* -- the mesh has no configuration port --, rd_*, all_done, cycles) plus cut_out /
// cut_in, the signals of the links cut between the parts (part 0's cut_out is part 1's cut_in,
// bit for bit, and the reverse). Every cut signal depends only on its own part's registers and
// inputs other than cut_in, so each cycle the two parts can evaluate at the same time, each on
// its own core, and swap cut_out into the other's cut_in between cycles: the result is the one
// model's, cycle for cycle (tests/test_fabric_lockstep.py compares them).
//
// The program writes are loaded on two threads, one per part, a cycle per write (load_part); the
// rest of the loading is single-threaded. The run is two threads in lock step: before cycle t, each
// waits for the other to publish its cut_out after cycle t - 1 (double-buffered by the parity
// of t, one atomic counter per part), so there is one handshake per cycle and no lock.
//
// Usage: fred_fabric_lockstep COMMANDS.txt RESULT.json. COMMANDS lines (the protocol of
// cocotb_tests/fabric/bench_fabric.py):
//   npus N | switches S | watchdog CYCLES | poll CYCLES | settle CYCLES | por CYCLES
//   switch_base U                   (the first switch's unit, default N: a top with I/O
//                                    controllers numbers its switches after them)
//   engine_regs N | switch_regs N | global_unit U | global_regs N
//   cfg SWITCH PHASE LAST WORD      (a configuration word, in order)
//   prog UNIT REG VALUE             (a program write, in order)
//   trace_regs ADDR START END       (an iteration top's trace sequencers: the program register of
//                                    the node read address, the read registers of a node's start
//                                    and end cycle; cocotb_tests/iteration/bench_iteration.py)
//   nodes UNIT COUNT                (read back COUNT nodes' times of the sequencer at UNIT, after
//                                    the run; one line per rank, in rank order)
//   controller_regs N | controller UNIT
//                                   (an I/O top's controllers: read N registers of each UNIT,
//                                    before and after, in the order of the lines)
// `poll` is the cocotb bench's (a poll costs it a wake-up); this driver reads every part's
// all_done after every cycle anyway, so it stops on the first cycle both are done and accepts
// `poll` only for the shared protocol (a poll of 1,024 timed up to 1,023 cycles too many).
// RESULT: {"stalled", "elapsed_cycles", "sim_s", "waited_s" (per part: seconds spent waiting for
// the other), "load_s", "cfg_stalls", "evals_per_cycle" (of the free-running loop: 1, or 2 where
// the model's clock trigger is not found, see rising_edge), "before", "after", "node_times"},
// before / after = {"engines": [[reg...]...], "switches": [[reg...]...], "global": [reg...],
// "controllers": [[reg...]...]} (controllers: empty without `controller` lines),
// node_times = per `nodes` line, [[start, end]...] (empty without `nodes` lines).
// Exit status: 0 when the run ended (done or watchdog), 2 for a bad command file.

#include "Vpart0.h"
#include "Vpart0___024root.h"
#include "Vpart1.h"
#include "Vpart1___024root.h"
#include "verilated.h"

#include <atomic>
#include <type_traits>
#include <utility>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

static_assert(sizeof(Vpart0::cut_out) == sizeof(Vpart1::cut_in), "part 0's cut_out is part 1's cut_in");
static_assert(sizeof(Vpart1::cut_out) == sizeof(Vpart0::cut_in), "part 1's cut_out is part 0's cut_in");

namespace {

// Whether a part's top has the switches' configuration port (FabricTop) or not (the mesh).
template <class M, class = void> struct HasConfigPort : std::false_type {};
template <class M> struct HasConfigPort<M, std::void_t<decltype(std::declval<M&>().cfg_valid)>> : std::true_type {};
static_assert(HasConfigPort<Vpart0>::value == HasConfigPort<Vpart1>::value, "both parts have the same ports");
constexpr bool kConfigPort = HasConfigPort<Vpart0>::value;

// Whether the model's root keeps the clock's previous value under the name Verilator 5 gives it
// (the act region's rising-edge trigger is clk & ~__Vtrigprevexpr___TOP__clk__0). With it, a
// cycle of the free-running loop is one eval(): the previous value is set low by hand instead of
// by an eval() at clk = 0. That eval did nothing the next one does not redo -- eval() runs the
// input-combinational (ico) region on every call, from the inputs and the state, and a design
// clocked on the rising edge only has no trigger at clk = 0 -- so the state after the rising
// edge is the same (docs/fabric_rtl.md, "Session s11"); it saves one ico pass a cycle. Another
// Verilator's naming falls back to the two evals.
template <class R, class = void> struct HasClockTrigger : std::false_type {};
template <class R> struct HasClockTrigger<R, std::void_t<decltype(std::declval<R&>().__Vtrigprevexpr___TOP__clk__0)>>
    : std::true_type {};

// One rising edge of a part whose inputs (cut_in) are set: clk low, then high.
template <class Model> inline void rising_edge(Model& model) {
    using Root = std::remove_pointer_t<decltype(model.rootp)>;
    if constexpr (HasClockTrigger<Root>::value) {
        model.rootp->__Vtrigprevexpr___TOP__clk__0 = 0;
        model.clk = 1;
        model.eval();
    } else {
        model.clk = 0; model.eval();
        model.clk = 1; model.eval();
    }
}

constexpr size_t kWords0 = (sizeof(Vpart0::cut_out) + 3) / 4;   // part 0 -> part 1
constexpr size_t kWords1 = (sizeof(Vpart1::cut_out) + 3) / 4;   // part 1 -> part 0

// What a part publishes after each cycle: its cut_out and whether its engines are all done.
template <size_t Words>
struct alignas(64) Slot {
    uint32_t words[Words];
    uint32_t done;
};

template <size_t Words>
struct alignas(64) Mailbox {
    std::atomic<uint64_t> published{0};   // cycles this part has completed
    Slot<Words> slot[2];                  // slot[t & 1]: cut_out before cycle t
};

struct Fabric {
    VerilatedContext context0, context1;
    Vpart0 part0{&context0, "part0"};
    Vpart1 part1{&context1, "part1"};

    // Inputs common to both parts (the harness ports); each part ignores the units it lacks.
    template <class F> void both(F f) { f(part0); f(part1); }

    void settle() {     // clock low: combinational outputs for the current inputs
        part0.clk = 0; part0.eval();
        part1.clk = 0; part1.eval();
    }
    // One cycle of both parts on this thread: swap the cut signals, then the rising edge.
    void tick() {
        settle();
        uint32_t a[kWords0], b[kWords1];
        std::memcpy(a, &part0.cut_out, sizeof(part0.cut_out));
        std::memcpy(b, &part1.cut_out, sizeof(part1.cut_out));
        std::memcpy(&part1.cut_in, a, sizeof(part1.cut_in));
        std::memcpy(&part0.cut_in, b, sizeof(part0.cut_in));
        part0.clk = 1; part0.eval();   // evaluates cut_in's combinational logic, then the edge
        part1.clk = 1; part1.eval();
    }
    template <class M> static void idle_config(M& m) {
        if constexpr (HasConfigPort<M>::value) { m.cfg_valid = 0; m.cfg_last = 0; }
    }
    // one configuration word on the port, held (a part without the switch ignores it)
    template <class M> static void put_config(M& m, uint32_t sw, uint32_t phase, uint32_t last, uint32_t data) {
        if constexpr (HasConfigPort<M>::value) {
            m.cfg_valid = 1; m.cfg_switch = sw; m.cfg_data = data; m.cfg_last = last; m.cfg_phase = phase;
        }
    }
    template <class A, class B> static uint32_t ready_of(A& a, B& b) {
        if constexpr (HasConfigPort<A>::value) return a.cfg_ready | b.cfg_ready;
        else return 1;
    }
    uint32_t cfg_ready() { settle(); return ready_of(part0, part1); }
};

struct Config {
    uint32_t npus = 0, switches = 0, poll = 256, settle = 64, por = 4;
    int64_t switch_base = -1;   // -1: npus
    uint64_t watchdog = 0;
    uint32_t engine_regs = 0, switch_regs = 0, global_unit = 63, global_regs = 0, controller_regs = 0;
    struct Word { uint32_t sw, phase, last, data; };
    struct Write { uint32_t unit, reg, value; };
    struct Nodes { uint32_t unit, count; };
    std::vector<Word> words;
    std::vector<Write> writes;
    bool trace_regs = false;
    uint32_t trace_addr = 0, trace_start = 0, trace_end = 0;
    std::vector<Nodes> nodes;
    std::vector<uint32_t> controllers;
};

// One command's values (the line after its key, in `s`) into `c`: false for an unknown key;
// `ok` false for bad values.
bool parse_command(Config& c, const std::string& key, std::istringstream& s, bool& ok) {
    // the settings of one number each
    const std::pair<const char*, uint32_t*> numbers[] = {
        {"npus", &c.npus}, {"switches", &c.switches}, {"settle", &c.settle}, {"por", &c.por},
        {"engine_regs", &c.engine_regs}, {"switch_regs", &c.switch_regs}, {"global_unit", &c.global_unit},
        {"global_regs", &c.global_regs}, {"controller_regs", &c.controller_regs}};
    for (const auto& [name, field] : numbers) {
        if (key == name) { ok = bool(s >> *field); return true; }
    }
    if (key == "cfg") { Config::Word w{}; ok = bool(s >> w.sw >> w.phase >> w.last >> w.data); c.words.push_back(w); }
    else if (key == "prog") { Config::Write w{}; ok = bool(s >> w.unit >> w.reg >> w.value); c.writes.push_back(w); }
    else if (key == "switch_base") ok = bool(s >> c.switch_base) && c.switch_base >= 0;
    else if (key == "watchdog") ok = bool(s >> c.watchdog);
    else if (key == "poll") ok = bool(s >> c.poll) && c.poll > 0;
    else if (key == "trace_regs") ok = c.trace_regs = bool(s >> c.trace_addr >> c.trace_start >> c.trace_end);
    else if (key == "nodes") { Config::Nodes n{}; ok = bool(s >> n.unit >> n.count); c.nodes.push_back(n); }
    else if (key == "controller") { uint32_t u = 0; ok = bool(s >> u); c.controllers.push_back(u); }
    else return false;
    return true;
}

bool parse(const char* path, Config& c, std::string& error) {
    std::ifstream in(path);
    if (!in) { error = std::string("cannot open ") + path; return false; }
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        if (line.empty()) continue;
        std::istringstream s(line);
        std::string key;
        s >> key;
        bool ok = true;
        if (!parse_command(c, key, s, ok)) {
            error = "line " + std::to_string(number) + ": unknown command '" + key + "'";
            return false;
        }
        if (!ok) { error = "line " + std::to_string(number) + ": bad values: " + line; return false; }
    }
    if (!c.npus || !c.watchdog) { error = "npus and watchdog are required"; return false; }
    if (!kConfigPort && !c.words.empty()) { error = "configuration words for a fabric without a configuration port"; return false; }
    if (!c.nodes.empty() && !c.trace_regs) { error = "nodes lines need a trace_regs line"; return false; }
    if (!c.controllers.empty() && !c.controller_regs) { error = "controller lines need a controller_regs line"; return false; }
    return true;
}

// The read port (registered): unit and register in, one cycle, the value out. The global
// registers (cycles, all_done, running) are per part: cycles is the later part's count,
// all_done needs both parts, running either.
uint32_t read(Fabric& f, const Config& c, uint32_t unit, uint32_t reg) {
    f.both([&](auto& m) { m.rd_unit = unit; m.rd_reg = reg; });
    f.tick();
    f.settle();
    uint32_t a = f.part0.rd_data, b = f.part1.rd_data;
    if (unit == c.global_unit) {
        if (reg == 0) return a > b ? a : b;
        if (reg == 1) return a & b;
    }
    return a | b;   // a part without the unit reads 0
}

std::string read_all(Fabric& f, const Config& c) {
    std::ostringstream out;
    out << "{\"engines\": [";
    for (uint32_t rank = 0; rank < c.npus; ++rank) {
        out << (rank ? ", [" : "[");
        for (uint32_t r = 0; r < c.engine_regs; ++r) out << (r ? ", " : "") << read(f, c, rank, r);
        out << "]";
    }
    out << "], \"switches\": [";
    for (uint32_t s = 0; s < c.switches; ++s) {
        out << (s ? ", [" : "[");
        uint32_t unit = (c.switch_base < 0 ? c.npus : uint32_t(c.switch_base)) + s;
        for (uint32_t r = 0; r < c.switch_regs; ++r) out << (r ? ", " : "") << read(f, c, unit, r);
        out << "]";
    }
    out << "], \"global\": [";
    for (uint32_t r = 0; r < c.global_regs; ++r) out << (r ? ", " : "") << read(f, c, c.global_unit, r);
    out << "], \"controllers\": [";
    for (size_t k = 0; k < c.controllers.size(); ++k) {
        out << (k ? ", [" : "[");
        for (uint32_t r = 0; r < c.controller_regs; ++r) out << (r ? ", " : "") << read(f, c, c.controllers[k], r);
        out << "]";
    }
    out << "]}";
    return out.str();
}

// Every `nodes` line's node times, as the iteration bench reads them: the node's index into the
// sequencer's read-address register (a program write; the port is registered, so the read
// follows a cycle later), then its start and its end cycle through the read port.
std::string read_node_times(Fabric& f, const Config& c) {
    std::ostringstream out;
    out << "[";
    for (size_t k = 0; k < c.nodes.size(); ++k) {
        const auto& n = c.nodes[k];
        out << (k ? ", [" : "[");
        for (uint32_t i = 0; i < n.count; ++i) {
            f.both([&](auto& m) { m.prog_we = 1; m.prog_unit = n.unit; m.prog_reg = c.trace_addr; m.prog_data = i; });
            f.tick();
            f.both([](auto& m) { m.prog_we = 0; });
            f.tick();
            uint32_t start = read(f, c, n.unit, c.trace_start);
            uint32_t end = read(f, c, n.unit, c.trace_end);
            out << (i ? ", [" : "[") << start << ", " << end << "]";
        }
        out << "]";
    }
    out << "]";
    return out.str();
}

// Waiting for the other part: spin (a cycle of the other part takes microseconds), and give
// the core away after a while, so that a machine with one free core still makes progress.
class Waiter {
    unsigned spins_ = 0;
public:
    void wait() {
        if (++spins_ < 4096) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            std::this_thread::yield();
        }
    }
};

// Until `box` has published `cycles` cycles (the other part's side; a caller checks first, so
// the common case, the other part already there, costs no Waiter).
template <class Box> void wait_for(const Box& box, uint64_t cycles) {
    Waiter waiter;
    while (box.published.load(std::memory_order_acquire) < cycles) waiter.wait();
}

// One part's side of the lock-step run, from cycle `first` until both parts are done (checked
// on the same cycle by both, from the same published flags) or the watchdog.
// `waited`: seconds this part spent waiting for the other (the balance of the partition).
template <class Model, class Mine, class Theirs>
uint64_t run_part(Model& model, Mine& mine, Theirs& theirs, uint64_t first, const Config& c,
                  double& waited) {
    bool own_done = model.all_done;
    std::chrono::steady_clock::duration idle{0};
    for (uint64_t t = first;; ++t) {
        if (theirs.published.load(std::memory_order_acquire) < t) {
            auto since = std::chrono::steady_clock::now();
            wait_for(theirs, t);
            idle += std::chrono::steady_clock::now() - since;
        }
        const auto& in = theirs.slot[t & 1];
        // Both parts see the same two flags (each its own, published, and the other's) at the
        // same t, so they stop on the same cycle: the first on which both are done.
        if (t > first && ((own_done && in.done) || t - first >= c.watchdog)) {
            waited = std::chrono::duration<double>(idle).count();   // once: the caller's doubles share a line
            return t - first;
        }
        std::memcpy(&model.cut_in, in.words, sizeof(model.cut_in));
        rising_edge(model);
        auto& out = mine.slot[(t + 1) & 1];
        std::memcpy(out.words, &model.cut_out, sizeof(model.cut_out));
        own_done = model.all_done;
        out.done = own_done;
        mine.published.store(t + 1, std::memory_order_release);
    }
}

// The program writes, one a cycle, applied as Fabric::tick applies an input change (the inputs
// set, the combinational outputs settled at clock low, the cut signals swapped, the rising edge),
// each part on its own thread: a cycle of the load costs each part two evaluations, so loading
// an iteration with I/O controllers (about 600,000 writes) on two threads takes about half of
// its time on one. The same cycles as tick(): each part publishes the cut_out it settles to on
// the cycle's inputs (a cut signal may follow inputs other than cut_in), which tick() reads.
// Each part's slot of cycle k is read by the other in cycle k; it is written again in cycle k + 2,
// after the other has published cycle k + 1, so after its read.
template <class Model, class Mine, class Theirs>
void load_part(Model& model, Mine& mine, Theirs& theirs, const std::vector<Config::Write>& writes) {
    for (uint64_t k = 0; k < writes.size(); ++k) {
        const auto& w = writes[k];
        model.prog_we = 1; model.prog_unit = w.unit; model.prog_reg = w.reg; model.prog_data = w.value;
        model.clk = 0; model.eval();
        std::memcpy(mine.slot[k & 1].words, &model.cut_out, sizeof(model.cut_out));
        mine.published.store(k + 1, std::memory_order_release);
        if (theirs.published.load(std::memory_order_acquire) < k + 1) wait_for(theirs, k + 1);
        std::memcpy(&model.cut_in, theirs.slot[k & 1].words, sizeof(model.cut_in));
        model.clk = 1; model.eval();
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s COMMANDS.txt RESULT.json\n", argv[0]);
        return 2;
    }
    Config c;
    std::string error;
    if (!parse(argv[1], c, error)) {
        std::fprintf(stderr, "%s: %s\n", argv[1], error.c_str());
        return 2;
    }
    auto* fabric = new Fabric;
    Fabric& f = *fabric;
    f.both([](auto& m) { m.start = 0; m.prog_we = 0; Fabric::idle_config(m); m.rd_unit = 0; m.rd_reg = 0; });
    for (uint32_t i = 0; i < c.por + 2; ++i) f.tick();   // the fabric's own power-on reset
    auto load_start = std::chrono::steady_clock::now();
    // configurations, one word per cycle (a word moves on a cycle whose cfg_ready is high)
    uint64_t cfg_stalls = 0;
    for (const auto& w : c.words) {
        f.both([&](auto& m) { Fabric::put_config(m, w.sw, w.phase, w.last, w.data); });
        while (!f.cfg_ready()) { f.tick(); ++cfg_stalls; }
        f.tick();
    }
    f.both([](auto& m) { Fabric::idle_config(m); });
    if (!c.writes.empty()) {   // the program writes, a write a cycle, each part on its own thread
        auto* load0 = new Mailbox<kWords0>;
        auto* load1 = new Mailbox<kWords1>;
        std::thread loader([&] { load_part(f.part1, *load1, *load0, c.writes); });
        load_part(f.part0, *load0, *load1, c.writes);
        loader.join();
        delete load0;
        delete load1;
    }
    f.both([](auto& m) { m.prog_we = 0; });
    f.tick();
    f.tick();
    std::string before = read_all(f, c);
    double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    // the run: start for one cycle, then both parts free-running in lock step
    f.both([](auto& m) { m.start = 1; });
    f.tick();
    f.both([](auto& m) { m.start = 0; });
    f.settle();
    auto* box0 = new Mailbox<kWords0>;
    auto* box1 = new Mailbox<kWords1>;
    const uint64_t first = 1;   // the mailboxes' cycle numbering
    std::memcpy(box0->slot[first & 1].words, &f.part0.cut_out, sizeof(f.part0.cut_out));
    std::memcpy(box1->slot[first & 1].words, &f.part1.cut_out, sizeof(f.part1.cut_out));
    box0->slot[first & 1].done = f.part0.all_done;
    box1->slot[first & 1].done = f.part1.all_done;
    box0->published.store(first);
    box1->published.store(first);
    auto sim_start = std::chrono::steady_clock::now();
    uint64_t elapsed1 = 0;
    double waited0 = 0, waited1 = 0;
    std::thread other([&] { elapsed1 = run_part(f.part1, *box1, *box0, first, c, waited1); });
    uint64_t elapsed0 = run_part(f.part0, *box0, *box1, first, c, waited0);
    other.join();
    double sim_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sim_start).count();
    if (elapsed0 != elapsed1) {
        std::fprintf(stderr, "lock-step: the parts stopped at different cycles (%llu, %llu)\n",
                     (unsigned long long)elapsed0, (unsigned long long)elapsed1);
        return 3;
    }
    bool stalled = !(f.part0.all_done && f.part1.all_done);
    for (uint32_t i = 0; i < c.settle; ++i) f.tick();   // late (duplicated) flits surface
    std::string after = read_all(f, c);
    std::string node_times = read_node_times(f, c);
    f.part0.final();
    f.part1.final();
    std::ofstream out(argv[2]);
    out << "{\"stalled\": " << (stalled ? "true" : "false") << ", \"elapsed_cycles\": " << elapsed0
        << ", \"sim_s\": " << sim_s << ", \"waited_s\": [" << waited0 << ", " << waited1 << "]"
        << ", \"load_s\": " << load_s << ", \"cfg_stalls\": " << cfg_stalls
        << ", \"evals_per_cycle\": " << (HasClockTrigger<Vpart0___024root>::value && HasClockTrigger<Vpart1___024root>::value ? 1 : 2)
        << ", \"before\": " << before << ", \"after\": " << after
        << ", \"node_times\": " << node_times << "}\n";
    return out ? 0 : 2;
}
