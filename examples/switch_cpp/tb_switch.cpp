// A minimal C++ Verilator testbench for a generated FRED switch (docs/switch.md), to copy.
//
// The switch: Fred_3(4) int32, 4 configuration slots, generated with the prefix ex_
// (fred verilog --unit switch --ports 4 --middle 3 --dtype int32 --name ex_), so its C++ class
// is Vex_fred_switch. Build and run: `make examples` (python -m examples.build cpp), which also
// writes config_words.h (the compiler's words for the two slots used here).
//
// Verilator's C++ names: Amaranth joins port names with "__", and Verilator writes "__" inside a
// name as "___05F" (docs/switch.md, "C++ port names"): config__valid is config___05Fvalid and
// i__0__payload is i___05F0___05Fpayload. A payload wider than 32 bits is a QData (uint64_t).
//
// Protocol (docs/switch.md, "Configuration load protocol"): a stream transfers on a rising
// clock edge where valid and ready are both 1. Load a slot: its words on config, payload
// data(32) | last << 32 | slot << 33. Select it: the slot index on phase. Flits: payload
// data(32) | last << 32 | tag << 33.
#include <cstdint>
#include <cstdio>
#include <memory>

#include "Vex_fred_switch.h"
#include "config_words.h"
#include "verilated.h"

namespace {

const int PORTS = 4;
const uint64_t LAST = 1ull << 32;

struct Stream {        // pointers to one port's three signals
    CData* valid;
    CData* ready;
    QData* payload;
};

#define IN(n) Stream{&top->i___05F##n##___05Fvalid, &top->i___05F##n##___05Fready, &top->i___05F##n##___05Fpayload}
#define OUT(n) Stream{&top->o___05F##n##___05Fvalid, &top->o___05F##n##___05Fready, &top->o___05F##n##___05Fpayload}

struct Bench {
    std::unique_ptr<VerilatedContext> context{new VerilatedContext};
    std::unique_ptr<Vex_fred_switch> top{new Vex_fred_switch{context.get()}};
    Stream in[PORTS], out[PORTS];
    uint64_t cycle = 0;
    int failures = 0;

    Bench() {
        auto* top = this->top.get();
        Stream ins[PORTS] = {IN(0), IN(1), IN(2), IN(3)};
        Stream outs[PORTS] = {OUT(0), OUT(1), OUT(2), OUT(3)};
        for (int n = 0; n < PORTS; ++n) { in[n] = ins[n]; out[n] = outs[n]; }
    }

    // One clock cycle: outputs settle with clk low (so valid/ready read now are what the rising
    // edge sees), then the edge.
    void tick() {
        top->clk = 0;
        top->eval();
        top->clk = 1;
        top->eval();
        ++cycle;
    }

    bool settled(CData* valid, CData* ready) {   // would the next edge transfer?
        top->clk = 0;
        top->eval();
        return *valid && *ready;
    }

    void reset() {
        top->rst = 1;
        tick();
        tick();
        top->rst = 0;
    }

    void load(int slot, const uint32_t* words) {
        for (int w = 0; w < CONFIG_WORDS; ++w) {
            top->config___05Fpayload = words[w] | (w == CONFIG_WORDS - 1 ? LAST : 0)
                                       | (uint64_t(slot) << 33);
            top->config___05Fvalid = 1;
            while (!settled(&top->config___05Fvalid, &top->config___05Fready)) tick();
            tick();
        }
        top->config___05Fvalid = 0;
        tick();                                   // the packet is checked the cycle after `last`
        tick();
        if (!(top->loaded >> slot & 1)) {
            std::printf("FAIL: slot %d not loaded (error %d)\n", slot, int(top->error));
            ++failures;
        }
    }

    void select(int slot) {
        top->phase___05Fpayload = slot;
        top->phase___05Fvalid = 1;
        while (!settled(&top->phase___05Fvalid, &top->phase___05Fready)) tick();
        tick();
        top->phase___05Fvalid = 0;
        if (top->active_phase != slot || !top->active_valid) {
            std::printf("FAIL: select %d: active_phase %d error %d\n", slot, int(top->active_phase),
                        int(top->error));
            ++failures;
        }
    }

    // Offer one single-flit packet on each input with sends[n] >= 0 and collect one flit on each
    // output in `expect` (value or -1); every output is always ready. Returns the cycles from
    // the first input transfer to the last output transfer.
    uint64_t exchange(const int64_t sends[PORTS], const int64_t expect[PORTS]) {
        bool sent[PORTS], got[PORTS];
        uint64_t first = 0, last = 0;
        for (int n = 0; n < PORTS; ++n) {
            sent[n] = sends[n] < 0;
            got[n] = expect[n] < 0;
            *in[n].valid = !sent[n];
            *in[n].payload = sends[n] < 0 ? 0 : (uint32_t(sends[n]) | LAST);   // tag 0
            *out[n].ready = 1;
        }
        for (int guard = 0; guard < 1000; ++guard) {
            top->clk = 0;
            top->eval();
            bool fires_in[PORTS], fires_out[PORTS];
            for (int n = 0; n < PORTS; ++n) {
                fires_in[n] = *in[n].valid && *in[n].ready;
                fires_out[n] = *out[n].valid && *out[n].ready;
                if (fires_out[n]) {
                    uint32_t data = uint32_t(*out[n].payload);
                    if (got[n] || data != uint32_t(expect[n]) || !(*out[n].payload & LAST)) {
                        std::printf("FAIL: output %d got %u (expected %lld)\n", n, data,
                                    (long long)expect[n]);
                        ++failures;
                    }
                    got[n] = true;
                    last = cycle;
                }
            }
            tick();
            for (int n = 0; n < PORTS; ++n) {
                if (fires_in[n]) {
                    if (!first) first = cycle;
                    sent[n] = true;
                    *in[n].valid = 0;
                }
            }
            bool done = true;
            for (int n = 0; n < PORTS; ++n) done = done && sent[n] && got[n];
            if (done) return last - first + 1;
        }
        std::printf("FAIL: no result within 1000 cycles\n");
        ++failures;
        return 0;
    }
};

}  // namespace

int main(int argc, char** argv) {
    Bench bench;
    bench.context->commandArgs(argc, argv);
    bench.reset();
    bench.load(0, SLOT0_WORDS);   // 0,1,2,3>0: the four inputs summed onto output 0
    bench.load(1, SLOT1_WORDS);   // 1>0,2,3: input 1 copied to outputs 0, 2, 3

    bench.select(0);
    const int64_t values[PORTS] = {10, 200, 3000, 40000};
    const int64_t sum[PORTS] = {10 + 200 + 3000 + 40000, -1, -1, -1};
    uint64_t reduce_cycles = bench.exchange(values, sum);
    std::printf("reduction 0,1,2,3>0: output 0 = %lld, %llu cycles\n", (long long)sum[0],
                (unsigned long long)reduce_cycles);

    bench.select(1);
    const int64_t one[PORTS] = {-1, 77, -1, -1};
    const int64_t copies[PORTS] = {77, -1, 77, 77};
    uint64_t multicast_cycles = bench.exchange(one, copies);
    std::printf("multicast 1>0,2,3: outputs 0,2,3 = 77, %llu cycles\n",
                (unsigned long long)multicast_cycles);

    bench.top->final();
    std::printf("%s (%d failure(s))\n", bench.failures ? "FAILED" : "PASSED", bench.failures);
    return bench.failures ? 1 : 0;
}
