// The fast simulation harness of the NeuronCore: the Verilated core, its clock, an AXI4
// subordinate memory behind the DMA master and an AXI4-Lite manager for the host, driven by
// requests on stdin and answering on stdout (the protocol is described in docs/simulation.md
// and implemented on the Python side by fastsim/core.py).
//
// Timing contract of the memory: with zero latency it reproduces cocotbext-axi's AxiRam cycle
// for cycle (its channel sinks and sources and its read / write processes, as used by
// cocotb_tests/common/core_env.py), so cycle counts equal those of the cocotb path:
//  * every channel is sampled on the rising edge from the values before the edge, and what
//    the memory drives after an edge is seen by the core in the following cycle;
//  * AR / AW / W sinks: a beat is taken on an edge where ready and valid are high; ready is
//    then driven as "queue holds fewer than 2 entries" (counted before the processes below
//    consume anything in that time step);
//  * R / B sources: on an edge where the driven beat is taken (or none is driven), the next
//    queued beat is driven; beats queued in the same time step are not yet visible;
//  * the read process turns queued ARs into R beats (R queue at most 2 deep, refilled in the
//    time step of a dequeue); the write process consumes AW then its W beats and queues B
//    after the last one. Optional latency (read / write) delays each beat by that many edges
//    before its data is read or written, as CoreEnv(latency=(n, n)) does.
// Data width: whatever the Verilated DMA port has (32 to 512 bits: IData, QData or VlWide<N>);
// every beat moves the whole bus word at its word-aligned address, as AxiRam does, and a
// write beat writes the bytes its strobes select.

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>
#include <unistd.h>

#include "Vtop.h"
#include "Vtop___024root.h"
#include "verilated.h"
#ifdef FASTSIM_TRACE
#include "verilated_fst_c.h"
#endif

// Verilator spells the generated ports' "__" as "___05F".
#define AXI(f) axi___05F##f
#define AXIL(f) axil___05F##f

// Verilator's combinational settle of the whole model (what the first eval() runs).
void Vtop___024root___eval_settle(Vtop___024root* vlSelf);

namespace {

// Whether the model's reset is the register fastsim.build makes of it (fastsim/reset.py):
// an input rst_d and a register top.rst loaded from it at every rising edge.
template <typename T, typename = void> struct RegisteredReset : std::false_type {};
template <typename T>
struct RegisteredReset<T, std::void_t<decltype(std::declval<T&>().rst_d)>> : std::true_type {};

// Whether an engine of the model has a gated clock (fastsim/gate.py): an input clk_<engine>,
// an output gate_<engine> (the engine may change state at the next edge) and a constant
// output gate_<engine>_drain.
template <typename T, typename = void> struct GatedVector : std::false_type {};
template <typename T>
struct GatedVector<T, std::void_t<decltype(std::declval<T&>().clk_vector)>> : std::true_type {};
template <typename T, typename = void> struct GatedTensor : std::false_type {};
template <typename T>
struct GatedTensor<T, std::void_t<decltype(std::declval<T&>().clk_tensor)>> : std::true_type {};

// The gate of one engine's clock: the clock rises with clk at an edge where the engine's
// gate output or the harness's own terms are 1, and at the `drain` edges after the last such
// edge (a count reloaded at each); `edges` counts the edges at which it rose.
struct Gate {
    uint32_t drain = 0, left = 0;
    uint64_t edges = 0;
    bool step(bool active, bool enabled) {
        bool on = true;
        if (!enabled || active) left = drain;
        else if (left) left--;
        else on = false;
        edges += on;
        return on;
    }
};

// ------------------------------------------------------------------------------------------
// The DMA port's data width, from the Verilated types: IData (32 bits), QData (64 bits) or
// VlWide<N> (32 N bits); a beat's data is held as 32-bit words, least significant first.
// ------------------------------------------------------------------------------------------
constexpr int MAX_WORDS = 16;  // 512 bits
using Words = std::array<uint32_t, MAX_WORDS>;

template <typename T> struct PortWords;
template <> struct PortWords<IData> { static constexpr int n = 1; };
template <> struct PortWords<QData> { static constexpr int n = 2; };
template <std::size_t N> struct PortWords<VlWide<N>> { static constexpr int n = (int)N; };

inline void get_words(IData v, Words& w) { w[0] = v; }
inline void get_words(QData v, Words& w) { w[0] = (uint32_t)v; w[1] = (uint32_t)(v >> 32); }
template <std::size_t N> void get_words(const VlWide<N>& v, Words& w) {
    for (std::size_t i = 0; i < N; i++) w[i] = v[i];
}
inline void set_words(IData& v, const Words& w) { v = w[0]; }
inline void set_words(QData& v, const Words& w) { v = (QData)w[1] << 32 | w[0]; }
template <std::size_t N> void set_words(VlWide<N>& v, const Words& w) {
    for (std::size_t i = 0; i < N; i++) v[i] = w[i];
}

constexpr int DATA_WORDS = PortWords<std::remove_reference_t<decltype(Vtop::AXI(rdata))>>::n;
constexpr uint32_t LANES = 4 * DATA_WORDS;  // bytes per beat
static_assert(DATA_WORDS >= 1 && DATA_WORDS <= MAX_WORDS && (DATA_WORDS & (DATA_WORDS - 1)) == 0,
              "the DMA port must be 32 to 512 bits wide, a power of two");
static_assert(PortWords<std::remove_reference_t<decltype(Vtop::AXI(wdata))>>::n == DATA_WORDS,
              "rdata and wdata must have the same width");

// ------------------------------------------------------------------------------------------
// Sparse byte-addressed memory: 4 KiB pages, zero until written.
// ------------------------------------------------------------------------------------------
class SparseMemory {
  public:
    static constexpr uint32_t PAGE = 4096;
    uint8_t read8(uint32_t addr) const {
        auto it = pages_.find(addr / PAGE);
        return it == pages_.end() ? 0 : it->second[addr % PAGE];
    }
    void write8(uint32_t addr, uint8_t v) { page(addr)[addr % PAGE] = v; }
    // The bus word of LANES bytes at addr (LANES aligned, so within one page).
    void read_beat(uint32_t addr, Words& w) const {
        auto it = pages_.find(addr / PAGE);
        if (it == pages_.end()) w.fill(0);
        else std::memcpy(w.data(), &it->second[addr % PAGE], LANES);
    }
    void read(uint64_t addr, uint32_t n, uint8_t* out) const {
        for (uint32_t i = 0; i < n; i++) out[i] = read8((uint32_t)(addr + i));
    }
    void write(uint64_t addr, uint32_t n, const uint8_t* in) {
        for (uint32_t i = 0; i < n; i++) write8((uint32_t)(addr + i), in[i]);
    }

  private:
    uint8_t* page(uint32_t addr) {
        auto& p = pages_[addr / PAGE];
        if (!p) {
            p.reset(new uint8_t[PAGE]);
            std::memset(p.get(), 0, PAGE);
        }
        return p.get();
    }
    std::unordered_map<uint32_t, std::unique_ptr<uint8_t[]>> pages_;
};

struct Ax {  // an AR or AW beat
    uint32_t addr, len, size, burst, id;
};
struct RBeat {
    Words data;
    uint32_t id, last;
};
struct WBeat {
    Words data;
    uint64_t strb;
    uint32_t last;
};

// ------------------------------------------------------------------------------------------
// The harness
// ------------------------------------------------------------------------------------------
class Harness {
  public:
    explicit Harness(VerilatedContext* ctx) : ctx_(ctx), top_(new Vtop(ctx, "top")) {}
    ~Harness() {
#ifdef FASTSIM_TRACE
        if (fst_) fst_->close();
#endif
        top_->final();
    }

    VerilatedContext* ctx_;
    std::unique_ptr<Vtop> top_;
    SparseMemory mem;
    uint64_t cycle = 0;
    uint32_t read_latency = 0, write_latency = 0;
    bool record_activity = false;
    std::string activity;
    uint64_t wave_start = 0, wave_end = 0;
    std::string wave_path;
    // Gated engine clocks: off clocks every engine at every edge (the gate outputs are then
    // ignored); drain_override replaces the model's drain counts when not ~0 (tests only).
    bool gating = true;
    uint32_t drain_override = ~0u;
    Gate gate_vector, gate_tensor;
    // How the falling clock edge is handled (FallingEdge); a traced build always evaluates
    // it, so that the waveform shows the inputs the harness drives after a rising edge.
    enum class Falling { Skip, Eval, Check };
#ifdef FASTSIM_TRACE
    Falling falling = Falling::Eval;
#else
    Falling falling = Falling::Skip;
#endif
#ifdef FASTSIM_TRACE
    std::unique_ptr<VerilatedFstC> fst_;
#endif

    // AXI4 subordinate state (what the memory drives, and its queues).
    bool ar_ready = false, aw_ready = false, w_ready = false;
    std::deque<Ax> ar_q, aw_q;
    std::deque<WBeat> w_q;
    std::deque<RBeat> r_q;
    std::deque<uint32_t> b_q;  // bid | bresp << 8
    bool r_valid = false, b_valid = false;
    RBeat r_cur{};
    uint32_t b_cur = 0;
    // Read process: the burst being turned into beats.
    bool rp_busy = false;
    Ax rp_ax{};
    uint32_t rp_beat = 0, rp_addr = 0;
    uint64_t rp_ready_at = 0;  // edge from which the pending beat may be produced
    bool rp_wait = false;      // a latency wait is running for the pending beat
    // Write process.
    bool wp_have_aw = false;
    Ax wp_ax{};
    uint32_t wp_beat = 0, wp_addr = 0;
    bool wp_have_w = false;
    WBeat wp_w{};
    uint32_t wp_ops_left = 0;    // latency waits still to pass for the current beat
    uint64_t wp_ready_at = 0;
    bool wp_b_pending = false;   // B of the finished burst waits for room in the B queue
    uint32_t wp_b = 0;

    void eval() { top_->eval(); }

    // The drain counts of the gated engines, from the model's constant outputs (after the
    // first eval) or the override; every gated clock then runs for that long.
    void init_gates() { init_gates_of(*top_); }
    template <typename T> void init_gates_of(T& t) {
        if constexpr (GatedVector<T>::value)
            gate_vector.drain = drain_override != ~0u ? drain_override : t.gate_vector_drain;
        if constexpr (GatedTensor<T>::value)
            gate_tensor.drain = drain_override != ~0u ? drain_override : t.gate_tensor_drain;
        gate_vector.left = gate_vector.drain;
        gate_tensor.left = gate_tensor.drain;
    }

    // Whether the host port or the reset input may have changed since the model was last
    // evaluated: the harness changes them after an edge and does not evaluate the model at
    // the falling edge, and the gate outputs may depend on them combinationally (a LUT
    // window write reaches the vector engine's idle_hold in the same cycle).
    bool inputs_active() {
        Vtop& t = *top_;
        return t.AXIL(awvalid) || t.AXIL(wvalid) || t.AXIL(arvalid) || t.AXIL(bready) ||
               t.AXIL(rready) || rst_in(t);
    }
    template <typename T> static bool rst_in(T& t) {
        if constexpr (RegisteredReset<T>::value) return t.rst_d;
        else return t.rst;
    }

    // Drive the gated clocks for the coming rising edge of clk from the gate outputs as
    // settled before it: while those inputs may have changed, the model is first settled (its
    // input-combinational region only: clk has not risen).
    void gate_edge() { gate_edge_of(*top_); }
    template <typename T> void gate_edge_of(T& t) {
        if constexpr (GatedVector<T>::value || GatedTensor<T>::value) {
            if (gating && inputs_active()) eval();
            if constexpr (GatedVector<T>::value)
                t.clk_vector = gate_vector.step(t.gate_vector, gating);
            if constexpr (GatedTensor<T>::value)
                t.clk_tensor = gate_tensor.step(t.gate_tensor, gating);
        }
    }

    // The falling edge of the gated clocks (with that of clk).
    template <typename T> static void gates_low(T& t) {
        if constexpr (GatedVector<T>::value) t.clk_vector = 0;
        if constexpr (GatedTensor<T>::value) t.clk_tensor = 0;
    }

    // The falling edge. The core's logic is clocked by the rising edge of clk only, and none
    // of its outputs is a combinational function of its inputs (Verilator computes no output
    // in its input-combinational region), so evaluating the model at the falling edge changes
    // nothing the harness reads: the next rising-edge eval() settles the new inputs before it
    // clocks the registers. Skipping it halves the evaluations per cycle. Verilator detects
    // the rising edge by comparing clk with its value at the previous eval(), so that record
    // is set to 0 instead; a model without it (another Verilator version) is evaluated.
    // Falling::Check evaluates and stops the harness if an output the harness reads changed.
    template <typename R>
    static auto forget_clk(R* r, int) -> decltype(r->__Vtrigprevexpr___TOP__clk__0 = 0, true) {
        r->__Vtrigprevexpr___TOP__clk__0 = 0;
        return forget_vector(r, 0) && forget_tensor(r, 0);
    }
    template <typename R> static bool forget_clk(R*, long) { return false; }
    // (the same for the gated clocks; true when the model has none)
    template <typename R> static auto forget_vector(R* r, int)
        -> decltype(r->__Vtrigprevexpr___TOP__clk_vector__0 = 0, true) {
        r->__Vtrigprevexpr___TOP__clk_vector__0 = 0;
        return true;
    }
    template <typename R> static bool forget_vector(R*, long) {
        return !GatedVector<Vtop>::value;
    }
    template <typename R> static auto forget_tensor(R* r, int)
        -> decltype(r->__Vtrigprevexpr___TOP__clk_tensor__0 = 0, true) {
        r->__Vtrigprevexpr___TOP__clk_tensor__0 = 0;
        return true;
    }
    template <typename R> static bool forget_tensor(R*, long) {
        return !GatedTensor<Vtop>::value;
    }

    void falling_edge() {
        Vtop& t = *top_;
        t.clk = 0;
        gates_low(t);
        if (falling == Falling::Skip && forget_clk(t.rootp, 0)) return;
        if (falling != Falling::Check) {
            eval();
            return;
        }
        const std::vector<uint64_t> before = outputs();
        eval();
        if (outputs() != before) {
            std::fprintf(stderr, "fastsim: an output changed at the falling edge of cycle %llu; "
                         "this model needs --eval-falling\n", (unsigned long long)cycle);
            std::abort();
        }
    }

    // Every output of the core the harness reads.
    std::vector<uint64_t> outputs() {
        Vtop& t = *top_;
        std::vector<uint64_t> v = {
            t.AXI(arvalid), t.AXI(araddr), t.AXI(arlen), t.AXI(arsize), t.AXI(arburst),
            t.AXI(arid), t.AXI(awvalid), t.AXI(awaddr), t.AXI(awlen), t.AXI(awsize),
            t.AXI(awburst), t.AXI(awid), t.AXI(wvalid), (uint64_t)t.AXI(wstrb), t.AXI(wlast),
            t.AXI(rready), t.AXI(bready), t.AXIL(awready), t.AXIL(wready), t.AXIL(bvalid),
            t.AXIL(bresp), t.AXIL(arready), t.AXIL(rvalid), t.AXIL(rdata), t.AXIL(rresp),
            t.irq, t.activity};
        gate_outputs(t, v);
        Words w{};
        get_words(t.AXI(wdata), w);
        v.insert(v.end(), w.begin(), w.end());
        return v;
    }

    // The gate outputs, outside host transactions (inputs_active: the harness settles the
    // model before it reads them then).
    template <typename T> void gate_outputs(T& t, std::vector<uint64_t>& v) {
        if (inputs_active()) return;
        if constexpr (GatedVector<T>::value) v.push_back(t.gate_vector);
        if constexpr (GatedTensor<T>::value) v.push_back(t.gate_tensor);
    }

    void dump(uint64_t t) {
#ifdef FASTSIM_TRACE
        if (!wave_path.empty() && cycle >= wave_start && cycle < wave_end) {
            if (!fst_) {
                fst_.reset(new VerilatedFstC);
                top_->trace(fst_.get(), 99);
                fst_->open(wave_path.c_str());
            }
            fst_->dump(t);
        } else if (fst_ && cycle >= wave_end) {
            fst_->close();
            fst_.reset();
            wave_path.clear();
        }
#else
        (void)t;
#endif
    }

    // One clock cycle: sample the outputs settled before the edge, run the memory's edge
    // logic, clock the core with the inputs driven in the previous cycle, then drive the new
    // inputs and settle.
    void step() { step([] {}); }

    template <typename F> void step(F&& after_edge) {
        Vtop& t = *top_;
        if (record_activity) activity.push_back((char)t.activity);
        // --- edge-sampled handshakes (values before the edge) ---
        const bool ar_hs = ar_ready && t.AXI(arvalid);
        const bool aw_hs = aw_ready && t.AXI(awvalid);
        const bool w_hs = w_ready && t.AXI(wvalid);
        const bool r_taken = r_valid && t.AXI(rready);
        const bool b_taken = b_valid && t.AXI(bready);
        Ax ar{t.AXI(araddr), t.AXI(arlen), t.AXI(arsize), t.AXI(arburst), t.AXI(arid)};
        Ax aw{t.AXI(awaddr), t.AXI(awlen), t.AXI(awsize), t.AXI(awburst), t.AXI(awid)};
        WBeat w;
        if (w_hs) {
            get_words(t.AXI(wdata), w.data);
            w.strb = (uint64_t)t.AXI(wstrb);
            w.last = t.AXI(wlast);
        }
        // --- the clock edge: the core samples what was driven during the cycle ---
        gate_edge();
        t.clk = 1;
        eval();
        dump(10 * cycle + 5);
        cycle++;
        // --- edge-triggered channel tasks (independent of one another) ---
        if (ar_hs) ar_q.push_back(ar);
        ar_ready = ar_q.size() < 2;
        if (aw_hs) aw_q.push_back(aw);
        aw_ready = aw_q.size() < 2;
        if (w_hs) w_q.push_back(w);
        w_ready = w_q.size() < 2;
        bool r_deq = false, b_deq = false;
        if (r_taken || !r_valid) {
            if (!r_q.empty()) {
                r_cur = r_q.front();
                r_q.pop_front();
                r_valid = true;
                r_deq = true;
            } else {
                r_valid = false;
            }
        }
        if (b_taken || !b_valid) {
            if (!b_q.empty()) {
                b_cur = b_q.front();
                b_q.pop_front();
                b_valid = true;
                b_deq = true;
            } else {
                b_valid = false;
            }
        }
        (void)r_deq;
        (void)b_deq;
        // --- the read and write processes react in the same time step ---
        read_process();
        write_process();
        // --- drive the memory's outputs for the next cycle ---
        t.AXI(arready) = ar_ready;
        t.AXI(awready) = aw_ready;
        t.AXI(wready) = w_ready;
        t.AXI(rvalid) = r_valid;
        set_words(t.AXI(rdata), r_cur.data);
        t.AXI(rid) = r_cur.id;
        t.AXI(rlast) = r_cur.last;
        t.AXI(rresp) = 0;
        t.AXI(bvalid) = b_valid;
        t.AXI(bid) = b_cur & 0xFF;
        t.AXI(bresp) = b_cur >> 8;
        after_edge();  // the AXI4-Lite manager's outputs change after the edge too
        falling_edge();
        dump(10 * cycle);
    }

    static uint32_t next_addr(const Ax& ax, uint32_t cur) {
        uint32_t nbytes = 1u << ax.size;
        if (ax.burst == 0) return cur;  // FIXED
        uint32_t n = cur + nbytes;
        if (ax.burst == 2) {            // WRAP
            uint32_t total = nbytes * (ax.len + 1);
            uint32_t lo = (cur / total) * total;
            if (n == lo + total) n = lo;
        }
        return n;
    }

    void read_process() {
        for (;;) {
            if (!rp_busy) {
                if (ar_q.empty()) return;
                rp_ax = ar_q.front();
                ar_q.pop_front();
                rp_busy = true;
                rp_beat = 0;
                uint32_t nbytes = 1u << rp_ax.size;
                rp_addr = (rp_ax.addr / nbytes) * nbytes;
                rp_wait = false;
            }
            // The beat's latency wait starts when the process reaches it.
            if (read_latency && !rp_wait) {
                rp_wait = true;
                rp_ready_at = cycle + read_latency;
            }
            if (read_latency && cycle < rp_ready_at) return;
            if (r_q.size() >= 2) return;
            RBeat b;
            mem.read_beat(rp_addr & ~(LANES - 1), b.data);
            b.id = rp_ax.id;
            b.last = rp_beat == rp_ax.len;
            r_q.push_back(b);
            rp_wait = false;
            rp_addr = next_addr(rp_ax, rp_addr);
            if (++rp_beat > rp_ax.len) rp_busy = false;
        }
    }

    static uint32_t strobe_runs(uint64_t strb) {
        uint32_t runs = 0;
        bool in = false;
        for (uint32_t i = 0; i < LANES; i++) {
            bool s = strb >> i & 1;
            if (s && !in) runs++;
            in = s;
        }
        return runs;
    }

    void write_process() {
        for (;;) {
            if (wp_b_pending) {
                if (b_q.size() >= 2) return;
                b_q.push_back(wp_b);
                wp_b_pending = false;
            }
            if (!wp_have_aw) {
                if (aw_q.empty()) return;
                wp_ax = aw_q.front();
                aw_q.pop_front();
                wp_have_aw = true;
                wp_beat = 0;
                uint32_t nbytes = 1u << wp_ax.size;
                wp_addr = (wp_ax.addr / nbytes) * nbytes;
            }
            if (!wp_have_w) {
                if (w_q.empty()) return;
                wp_w = w_q.front();
                w_q.pop_front();
                wp_have_w = true;
                wp_ops_left = write_latency ? strobe_runs(wp_w.strb) : 0;
                if (wp_ops_left) wp_ready_at = cycle + write_latency;
            }
            // Each contiguous run of strobes is one write of the RAM, each after its wait.
            while (wp_ops_left) {
                if (cycle < wp_ready_at) return;
                if (--wp_ops_left) wp_ready_at = cycle + write_latency;
            }
            uint32_t word = wp_addr & ~(LANES - 1);
            for (uint32_t i = 0; i < LANES; i++)
                if (wp_w.strb >> i & 1)
                    mem.write8(word + i, (uint8_t)(wp_w.data[i / 4] >> (8 * (i % 4))));
            wp_have_w = false;
            wp_addr = next_addr(wp_ax, wp_addr);
            if (++wp_beat > wp_ax.len) {
                wp_have_aw = false;
                wp_b = wp_ax.id;  // OKAY
                wp_b_pending = true;
            }
        }
    }

    // The core's reset from the next rising edge on. A registered reset (RegisteredReset) is
    // written to the input and to the register, which then stays equal to the input at every
    // edge, and the combinational logic is settled, so the core's next-state logic sees the
    // new value before the edge, as it sees a reset input.
    void set_rst(bool v) { set_rst_of(*top_, v); }
    template <typename T> static void set_rst_of(T& t, bool v) {
        if constexpr (RegisteredReset<T>::value) {
            t.rst_d = v;
            t.rootp->top__DOT__rst = v;
            Vtop___024root___eval_settle(t.rootp);
        } else {
            t.rst = v;
        }
    }

    void reset(uint32_t cycles) {
        // The memory's channels restart empty (as cocotbext-axi's do on reset).
        ar_q.clear(); aw_q.clear(); w_q.clear(); r_q.clear(); b_q.clear();
        ar_ready = aw_ready = w_ready = r_valid = b_valid = false;
        rp_busy = wp_have_aw = wp_have_w = wp_b_pending = rp_wait = false;
        wp_ops_left = 0;
        axil_idle();
        set_rst(true);
        for (uint32_t i = 0; i < cycles; i++) step();
        set_rst(false);
        step();
    }

    void axil_idle() {
        Vtop& t = *top_;
        t.AXIL(awvalid) = 0;
        t.AXIL(wvalid) = 0;
        t.AXIL(bready) = 0;
        t.AXIL(arvalid) = 0;
        t.AXIL(rready) = 0;
    }

    // AXI4-Lite accesses: 0 OKAY, 2 SLVERR, 3 DECERR; -1 when the port does not answer.
    static constexpr uint64_t LITE_LIMIT = 100000;

    int lite_write(uint32_t addr, uint32_t data) {
        Vtop& t = *top_;
        t.AXIL(awaddr) = addr;
        t.AXIL(awprot) = 0;
        t.AXIL(awvalid) = 1;
        t.AXIL(wdata) = data;
        t.AXIL(wstrb) = 0xF;
        t.AXIL(wvalid) = 1;
        t.AXIL(bready) = 0;
        eval();
        bool aw_done = false, w_done = false;
        for (uint64_t n = 0; !(aw_done && w_done); n++) {
            if (n > LITE_LIMIT) { axil_idle(); eval(); return -1; }
            bool aw_hs = t.AXIL(awvalid) && t.AXIL(awready);
            bool w_hs = t.AXIL(wvalid) && t.AXIL(wready);
            step_lite([&] {
                if (aw_hs) { t.AXIL(awvalid) = 0; aw_done = true; }
                if (w_hs) { t.AXIL(wvalid) = 0; w_done = true; }
                if (aw_done && w_done) t.AXIL(bready) = 1;
            });
        }
        for (uint64_t n = 0;; n++) {
            if (n > LITE_LIMIT) { axil_idle(); eval(); return -1; }
            bool b_hs = t.AXIL(bvalid) && t.AXIL(bready);
            int resp = t.AXIL(bresp);
            bool done = false;
            step_lite([&] { if (b_hs) { t.AXIL(bready) = 0; done = true; } });
            if (done) return resp;
        }
    }

    int lite_read(uint32_t addr, uint32_t* data) {
        Vtop& t = *top_;
        t.AXIL(araddr) = addr;
        t.AXIL(arprot) = 0;
        t.AXIL(arvalid) = 1;
        t.AXIL(rready) = 0;
        eval();
        for (uint64_t n = 0;; n++) {
            if (n > LITE_LIMIT) { axil_idle(); eval(); return -1; }
            bool ar_hs = t.AXIL(arvalid) && t.AXIL(arready);
            bool done = false;
            step_lite([&] { if (ar_hs) { t.AXIL(arvalid) = 0; t.AXIL(rready) = 1; done = true; } });
            if (done) break;
        }
        for (uint64_t n = 0;; n++) {
            if (n > LITE_LIMIT) { axil_idle(); eval(); return -1; }
            bool r_hs = t.AXIL(rvalid) && t.AXIL(rready);
            uint32_t d = t.AXIL(rdata);
            int resp = t.AXIL(rresp);
            bool done = false;
            step_lite([&] { if (r_hs) { t.AXIL(rready) = 0; done = true; } });
            if (done) { *data = d; return resp; }
        }
    }

    // A cycle in which the AXI4-Lite manager changes its outputs after the edge.
    template <typename F> void step_lite(F after_edge) { step(after_edge); }
};

// ------------------------------------------------------------------------------------------
// Protocol: request = op (u8), a (u64), b (u64), n (u32), n payload bytes; response = status
// (u8: 0 ok, 1 error with a message as payload), n (u32), n payload bytes. Little-endian.
// ------------------------------------------------------------------------------------------
enum Op : uint8_t {
    OP_RESET = 1, OP_WRITE32 = 2, OP_READ32 = 3, OP_WRITE_BLOCK = 4, OP_READ_BLOCK = 5,
    OP_MEM_WRITE = 6, OP_MEM_READ = 7, OP_RUN = 8, OP_CYCLE = 9, OP_LATENCY = 10,
    OP_ACTIVITY = 11, OP_GET_ACTIVITY = 12, OP_QUIT = 13, OP_IRQ = 14, OP_HELLO = 15,
    OP_GATE = 16,
};

bool read_all(int fd, void* buf, size_t n) {
    uint8_t* p = (uint8_t*)buf;
    while (n) {
        ssize_t k = ::read(fd, p, n);
        if (k <= 0) return false;
        p += k;
        n -= k;
    }
    return true;
}

void write_all(int fd, const void* buf, size_t n) {
    const uint8_t* p = (const uint8_t*)buf;
    while (n) {
        ssize_t k = ::write(fd, p, n);
        if (k <= 0) std::exit(3);
        p += k;
        n -= k;
    }
}

std::vector<uint8_t> out_buf;

void respond(uint8_t status, const void* data, uint32_t n) {
    out_buf.clear();
    out_buf.push_back(status);
    uint8_t len[4];
    std::memcpy(len, &n, 4);
    out_buf.insert(out_buf.end(), len, len + 4);
    out_buf.insert(out_buf.end(), (const uint8_t*)data, (const uint8_t*)data + n);
    write_all(1, out_buf.data(), out_buf.size());
}

void respond_error(const std::string& msg) { respond(1, msg.data(), (uint32_t)msg.size()); }

template <typename T> void put(std::vector<uint8_t>& v, T x) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));
    v.insert(v.end(), b, b + sizeof(T));
}

}  // namespace

int main(int argc, char** argv) {
    auto ctx = std::make_unique<VerilatedContext>();
    ctx->commandArgs(argc, argv);
    Harness h(ctx.get());
    for (int i = 1; i + 1 < argc; i++) {
        std::string a = argv[i];
        if (a == "--waves") h.wave_path = argv[++i];
        else if (a == "--wave-start") h.wave_start = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--wave-end") h.wave_end = std::strtoull(argv[++i], nullptr, 10);
    }
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--eval-falling") h.falling = Harness::Falling::Eval;
        else if (a == "--check-falling") h.falling = Harness::Falling::Check;
    }
#ifdef FASTSIM_TRACE
    if (!h.wave_path.empty()) ctx->traceEverOn(true);
#endif
    h.top_->clk = 0;
    h.axil_idle();
    h.eval();  // initial values and the first settle
    h.init_gates();
    h.set_rst(true);
    std::vector<uint8_t> payload, resp;
    for (;;) {
        uint8_t hdr[21];
        if (!read_all(0, hdr, sizeof hdr)) return 0;  // the client went away
        uint8_t op = hdr[0];
        uint64_t a, b;
        uint32_t n;
        std::memcpy(&a, hdr + 1, 8);
        std::memcpy(&b, hdr + 9, 8);
        std::memcpy(&n, hdr + 17, 4);
        payload.resize(n);
        if (n && !read_all(0, payload.data(), n)) return 0;
        resp.clear();
        switch (op) {
        case OP_HELLO: {
            put<uint32_t>(resp, 0x4E43464Du);  // "NCFM"
            put<uint32_t>(resp,
#ifdef FASTSIM_TRACE
                          1
#else
                          0
#endif
            );
            break;
        }
        case OP_RESET:
            h.reset((uint32_t)a);
            break;
        case OP_WRITE32: {
            int r = h.lite_write((uint32_t)a, (uint32_t)b);
            if (r < 0) { respond_error("AXI4-Lite write of 0x" + std::to_string(a) +
                                       " not answered"); continue; }
            put<uint32_t>(resp, (uint32_t)r);
            break;
        }
        case OP_READ32: {
            uint32_t d = 0;
            int r = h.lite_read((uint32_t)a, &d);
            if (r < 0) { respond_error("AXI4-Lite read not answered"); continue; }
            put<uint32_t>(resp, d);
            put<uint32_t>(resp, (uint32_t)r);
            break;
        }
        case OP_WRITE_BLOCK: {
            uint32_t bad = 0, code = 0, i = 0;
            bool hung = false;
            for (; i < n / 4; i++) {
                uint32_t w;
                std::memcpy(&w, payload.data() + 4 * i, 4);
                int r = h.lite_write((uint32_t)(a + 4 * i), w);
                if (r < 0) { hung = true; break; }
                if (r) { code = r; bad = i; break; }
            }
            if (hung) { respond_error("AXI4-Lite write not answered"); continue; }
            put<uint32_t>(resp, code);
            put<uint32_t>(resp, bad);
            break;
        }
        case OP_READ_BLOCK: {
            uint32_t bad = 0, code = 0;
            bool hung = false;
            std::vector<uint8_t> words;
            for (uint32_t i = 0; i < (uint32_t)b; i++) {
                uint32_t d = 0;
                int r = h.lite_read((uint32_t)(a + 4 * i), &d);
                if (r < 0) { hung = true; break; }
                put<uint32_t>(words, d);
                if (r && !code) { code = r; bad = i; }
            }
            if (hung) { respond_error("AXI4-Lite read not answered"); continue; }
            put<uint32_t>(resp, code);
            put<uint32_t>(resp, bad);
            resp.insert(resp.end(), words.begin(), words.end());
            break;
        }
        case OP_MEM_WRITE:
            h.mem.write(a, n, payload.data());
            break;
        case OP_MEM_READ:
            resp.resize((size_t)b);
            h.mem.read(a, (uint32_t)b, resp.data());
            break;
        case OP_RUN: {
            // b bit 0: stop early on a rising edge of irq.
            uint64_t done = 0;
            uint32_t why = 0;
            bool prev = h.top_->irq;
            for (; done < a; done++) {
                h.step();
                bool irq = h.top_->irq;
                if ((b & 1) && irq && !prev) { done++; why = 1; break; }
                prev = irq;
                if (ctx->gotFinish()) { why = 2; break; }
            }
            put<uint64_t>(resp, done);
            put<uint32_t>(resp, why);
            break;
        }
        case OP_CYCLE:
            put<uint64_t>(resp, h.cycle);
            break;
        case OP_LATENCY:
            h.read_latency = (uint32_t)a;
            h.write_latency = (uint32_t)b;
            break;
        case OP_ACTIVITY:
            h.record_activity = a != 0;
            h.activity.clear();
            break;
        case OP_GET_ACTIVITY:
            resp.assign(h.activity.begin(), h.activity.end());
            h.activity.clear();
            break;
        case OP_GATE: {
            // a bit 0: set gating to a bit 1 and the drain override to b (~0: the model's).
            if (a & 1) {
                h.gating = (a >> 1) & 1;
                h.drain_override = (uint32_t)b;
                h.init_gates();
            }
            put<uint32_t>(resp, (GatedVector<Vtop>::value ? 1u : 0u) |
                                (GatedTensor<Vtop>::value ? 2u : 0u) | (h.gating ? 4u : 0u));
            put<uint32_t>(resp, h.gate_vector.drain);
            put<uint32_t>(resp, h.gate_tensor.drain);
            put<uint64_t>(resp, h.gate_vector.edges);
            put<uint64_t>(resp, h.gate_tensor.edges);
            put<uint64_t>(resp, h.cycle);
            break;
        }
        case OP_IRQ:
            put<uint32_t>(resp, h.top_->irq);
            break;
        case OP_QUIT:
            respond(0, nullptr, 0);
            return 0;
        default:
            respond_error("unknown request " + std::to_string(op));
            continue;
        }
        if (ctx->gotFinish()) {
            respond_error("the model called $finish");
            return 4;
        }
        respond(0, resp.data(), (uint32_t)resp.size());
    }
}
