/* The GPU step ledger's arithmetic (engine/bench/ledger/): a 2-layer shape
 * small enough to count by hand, recorded from engine/model and costed on
 * each path; the speculative speedup formula; the constants and targets
 * files parsed, and bad ones refused with their name and line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/bench/ledger/ledger.h"

/* dim 64, 2 layers, 2 heads of 32 (1 KV head), ffn 128, vocab 512, tied
 * BF16 embedding: per layer wq 8192 bytes, wk and wv 4096, wo 8192, gate,
 * up and down 16384 each (73728), the head 65536, an embedding row 128. */
static const synth_preset k_tiny = {"tiny-bf16", "llama", "tiny BF16", 64, 2, 2, 1, 128, 512, 256,
                                    10000.0f, 1e-5f, 1, 0, SD_BF16, 0, SD_BF16, 0, 0, 0, 0};
/* the same with Q8_0 matrices and embedding, and a Q4_0 attn_v */
static const synth_preset k_tiny_q = {"tiny-q8", "llama", "tiny Q8_0", 64, 2, 2, 1, 128, 512, 256,
                                      10000.0f, 1e-5f, 1, 0, SD_Q8_0, 0, SD_Q8_0, 0, 0, 0, SD_Q4_0};

#define LAYER_W 73728.0
#define HEAD_W 65536.0
#define ROW_W 128.0

/* Constants that make each term of the time visible on its own. */
static lg_device dev(double copy_gbs, double kernel, double launch, double step, double float_rate) {
    lg_device d = {{0}};
    d.v[LG_COPY_GBS] = copy_gbs;
    d.v[LG_ETA] = 1;
    d.v[LG_KERNEL_US] = kernel;
    d.v[LG_LAUNCH_US] = launch;
    d.v[LG_STEP_US] = step;
    d.v[LG_BUILD_US] = 0.1;
    d.v[LG_FLAG_US] = 0.5;
    d.v[LG_TAIL_US] = 1;
    d.v[LG_LOAD_US] = 0.25;
    d.v[LG_OP_US] = 0;
    d.v[LG_QUANT_RATE] = 1e30;
    d.v[LG_FLOAT_RATE] = float_rate;
    d.v[LG_IMMA_RATE] = 1e30;
    d.v[LG_HMMA_RATE] = 1e30;
    d.v[LG_MMA_EFF] = 1;
    return d;
}

static lg_model *open_tiny(const synth_preset *p) {
    sd_err e;
    lg_model *m = lg_model_open(p, 64, &e);
    cr_assert(m, "open %s: %s", p->name, e.msg);
    return m;
}

static lg_step cost(lg_model *m, int n, int pos, int path, const lg_device *d) {
    lg_trace t = {0};
    lg_step s;
    sd_err e;
    cr_assert(lg_model_trace(m, n, pos, &t, &e) == 0, "trace: %s", e.msg);
    cr_assert(lg_cost(&t, path, d, &s, &e) == 0, "cost: %s", e.msg);
    lg_trace_free(&t);
    return s;
}

Test(ledger, counts_by_hand) {
    lg_model *m = open_tiny(&k_tiny);
    cr_expect(lg_model_weight_bytes(m) == ROW_W + 256 + HEAD_W + 2 * (LAYER_W + 512),
              "weight bytes %llu", (unsigned long long)lg_model_weight_bytes(m));
    const lg_device d = dev(1e12, 1, 10, 100, 1e30);
    /* embed + 5 a layer (norms folded) + the head and the argmax (512 < 2 x
     * 2048: one block a row) in the graph, with its two copies */
    lg_step s = cost(m, 1, 10, LG_GRAPH_PDL, &d);
    cr_expect(s.launches == 13 && s.nodes == 15 && s.waits == 12, "graph+pdl: %d launches, %d nodes, %d waits",
              s.launches, s.nodes, s.waits);
    cr_expect(s.w_bytes == ROW_W + 2 * LAYER_W + HEAD_W, "graph+pdl weight bytes %.0f", s.w_bytes);
    /* K/V read at 11 positions and written at one, 32 floats each, two layers */
    cr_expect(s.kv_bytes == 2 * (2 * 4 * 32 * 11 + 2 * 4 * 32), "kv bytes %.0f", s.kv_bytes);
    cr_expect(fabs(s.us - (100 + 13 * 1)) < 1e-3, "graph+pdl %.6f us", s.us);
    /* norms launched: two a layer and the head's */
    s = cost(m, 1, 10, LG_GRAPH_PDL_NOFOLD, &d);
    cr_expect(s.launches == 18 && s.nodes == 20, "nofold: %d launches, %d nodes", s.launches, s.nodes);
    cr_expect(s.w_bytes == ROW_W + 2 * (LAYER_W + 2 * 256) + HEAD_W + 256, "nofold weight bytes %.0f",
              s.w_bytes);
    /* the persistent step with stage waits only: the 13 kernels of the
     * graph (norms folded), the argmax the last, as stages of one launch,
     * 12 stage waits (flag + tail + load each), a build a stage; the folded
     * norms' op_us is 0 here */
    s = cost(m, 1, 10, LG_PERSIST_STAGE, &d);
    cr_expect(s.launches == 1 && s.stages == 13 && s.nodes == 0 && s.waits == 12 && s.partial == 0,
              "persist stage: %d launches, %d stages, %d waits + %d", s.launches, s.stages, s.waits, s.partial);
    cr_expect(fabs(s.us - (100 + 10 + 13 * 0.1 + 12 * 1.75)) < 1e-3, "persist stage %.6f us", s.us);
    /* as the step runs: attention waits for its head's Q/K/V items (2, one
     * a layer); the other 10 waits are for whole stages (the argmax's for
     * the head) */
    s = cost(m, 1, 10, LG_PERSIST_FINE, &d);
    cr_expect(s.launches == 1 && s.stages == 13 && s.waits == 10 && s.partial == 2,
              "persist fine: %d launches, %d stages, %d waits + %d", s.launches, s.stages, s.waits, s.partial);
    /* no build; a stage wait flag + tail (the prefetch hides load), an item
     * wait max(flag, load) */
    cr_expect(fabs(s.us - (100 + 10 + 10 * 1.5 + 2 * 0.5)) < 1e-3, "persist fine %.6f us", s.us);
    cr_expect(fabs(s.us - s.exposed_us) < 1e-3, "nothing but exposed: %.6f of %.6f", s.exposed_us, s.us);
    /* each stage takes at least op_us, and each of the 5 products that fold
     * a norm (2 a layer, the head) op_us more: every item makes its tile */
    lg_device o = d;
    o.v[LG_OP_US] = 2;
    const lg_step so = cost(m, 1, 10, LG_PERSIST_FINE, &o);
    cr_expect(fabs(so.us - s.us - (13 + 5) * 2) < 1e-3, "persist fine at op_us 2: %.6f us", so.us);
    /* the products on tensor cores: no norm folded, so the nofold graph's
     * 18 kernels as stages, 15 stage waits and the 2 chunk waits (the
     * step's chunk map follows the mma layout; test_emu_forward's
     * persist_mma_waits) */
    s = cost(m, 1, 10, LG_PERSIST_FINE_MMA, &d);
    cr_expect(s.launches == 1 && s.stages == 18 && s.waits == 15 && s.partial == 2,
              "persist fine mma: %d launches, %d stages, %d waits + %d", s.launches, s.stages, s.waits,
              s.partial);
    lg_model_close(m);
}

Test(ledger, bytes_work_and_tiles) {
    lg_model *m = open_tiny(&k_tiny);
    /* 1 GB/s at eta 1: a microsecond a kilobyte, nothing else costs */
    const lg_device bw = dev(1, 0, 0, 0, 1e30);
    lg_step s = cost(m, 1, 10, LG_GRAPH_PDL, &bw);
    cr_expect(fabs(s.us - (s.w_bytes + s.kv_bytes + s.act_bytes) / 1e3) < 1e-6, "%.6f us", s.us);
    /* one multiply-add a microsecond: n x the products' weight elements */
    const lg_device fl = dev(1e12, 0, 0, 0, 1e6);
    const double elems = 2 * (64 * 64 + 2 * 32 * 64 + 64 * 64 + 2 * 128 * 64 + 64 * 128) + 512 * 64;
    s = cost(m, 3, 10, LG_GRAPH_PDL, &fl);
    cr_expect(fabs(s.us - 3 * elems) < 1e-3, "3 rows: %.3f us, want %.0f", s.us, 3 * elems);
    /* 9 rows are two tiles of 8 on dp4a: every product reads its weights
     * twice, on any launch scheme; the mma reads them once */
    s = cost(m, 9, 10, LG_GRAPH_PDL, &bw);
    cr_expect(s.w_bytes == 9 * ROW_W + 2 * (2 * LAYER_W + HEAD_W), "9 rows: %.0f", s.w_bytes);
    s = cost(m, 9, 10, LG_PERSIST_FINE, &bw);
    cr_expect(s.w_bytes == 9 * ROW_W + 2 * (2 * LAYER_W + HEAD_W), "9 rows fine: %.0f", s.w_bytes);
    s = cost(m, 9, 10, LG_PERSIST_FINE_MMA, &bw);
    cr_expect(s.w_bytes == 9 * ROW_W + 2 * LAYER_W + HEAD_W + 5 * 256, "9 rows fine mma: %.0f", s.w_bytes);
    lg_model_close(m);
}

/* The chunk waits against stage waits: fewer stage-level waits, none
 * more in all; on quantised weights the mma reads each weight once for
 * every width, and one row the bytes the dp4a tiles read (the persistent
 * mma step's launches are the nofold graph's). */
Test(ledger, fine_waits_and_mma_bytes) {
    lg_model *m = open_tiny(&k_tiny);
    const lg_device d = dev(1e12, 1, 10, 100, 1e30);
    const lg_step st = cost(m, 1, 10, LG_PERSIST_STAGE, &d), fi = cost(m, 1, 10, LG_PERSIST_FINE, &d);
    cr_expect(fi.waits < st.waits && fi.waits + fi.partial == st.waits && fi.stages == st.stages,
              "stage %d waits, fine %d + %d", st.waits, fi.waits, fi.partial);
    cr_expect(fi.us < st.us, "fine %.3f us, stage %.3f us", fi.us, st.us);
    lg_model_close(m);
    m = open_tiny(&k_tiny_q);
    const double row = (double)sd_row_bytes(SD_Q8_0, 64);
    const int mma[2] = {LG_GRAPH_PDL_MMA, LG_PERSIST_FINE_MMA}, dp4a[2] = {LG_GRAPH_PDL, LG_GRAPH_PDL_NOFOLD};
    for (int p = 0; p < 2; p++) {
        const lg_step one = cost(m, 1, 10, dp4a[p], &d), one_mma = cost(m, 1, 10, mma[p], &d);
        cr_expect(one.w_bytes == one_mma.w_bytes, "%s: one row's bytes differ", lg_path_name(mma[p]));
        for (int n = 2; n <= 16; n++) {
            const lg_step s = cost(m, n, 10, mma[p], &d);
            cr_expect(s.w_bytes - n * row == one.w_bytes - row, "%s, %d rows: %.0f weight bytes",
                      lg_path_name(mma[p]), n, s.w_bytes);
        }
    }
    lg_model_close(m);
}

/* The products' compute: dp4a n x the elements, the mma the elements once
 * (dequantised as one row does) plus the mma issue, 8 multiply-adds a
 * weight for each pair of activation rows (mv_mma.cuh's block-diagonal B). */
Test(ledger, mma_compute) {
    lg_model *m = open_tiny(&k_tiny_q);
    lg_device d = dev(1e12, 0, 0, 0, 1e30);
    d.v[LG_QUANT_RATE] = 1e6;
    const double elems = 2 * (64 * 64 + 2 * 32 * 64 + 64 * 64 + 2 * 128 * 64 + 64 * 128) + 512 * 64;
    lg_step s = cost(m, 8, 10, LG_GRAPH_PDL, &d);
    cr_expect(fabs(s.work_us / (8 * elems) - 1) < 1e-9, "dp4a 8 rows: %.3f us", s.work_us);
    s = cost(m, 8, 10, LG_GRAPH_PDL_MMA, &d);
    cr_expect(fabs(s.work_us / elems - 1) < 1e-9, "mma 8 rows: %.3f us", s.work_us);
    d.v[LG_IMMA_RATE] = 1e6, d.v[LG_MMA_EFF] = 0.5;
    s = cost(m, 8, 10, LG_GRAPH_PDL_MMA, &d);
    cr_expect(fabs(s.work_us / (elems + 64 * elems) - 1) < 1e-9, "mma issue, 8 rows: %.3f us", s.work_us);
    s = cost(m, 9, 10, LG_PERSIST_FINE_MMA, &d);
    cr_expect(fabs(s.work_us / (elems + 80 * elems) - 1) < 1e-9, "mma issue, 9 rows: %.3f us", s.work_us);
    lg_model_close(m);
}

/* Each constant moves the prediction its way, and only where its path
 * uses it. */
Test(ledger, predictions_move) {
    lg_model *m = open_tiny(&k_tiny_q);
    const lg_device base = dev(1, 1, 10, 100, 1e9);
    lg_device x = base;
    x.v[LG_FLAG_US] *= 2;
    cr_expect(cost(m, 1, 10, LG_PERSIST_FINE, &x).us > cost(m, 1, 10, LG_PERSIST_FINE, &base).us);
    cr_expect(cost(m, 1, 10, LG_GRAPH_PDL, &x).us == cost(m, 1, 10, LG_GRAPH_PDL, &base).us);
    x = base, x.v[LG_ETA] = 0.5;
    cr_expect(cost(m, 1, 10, LG_PERSIST_FINE, &x).us > cost(m, 1, 10, LG_PERSIST_FINE, &base).us);
    /* the prefetch: load_us up to the wait itself costs the fine path
     * nothing, and every stage wait of the stage-only path */
    x = base, x.v[LG_LOAD_US] = 0.5, x.v[LG_FLAG_US] = 0.5;
    lg_device y = x;
    y.v[LG_LOAD_US] = 0;
    const lg_step st = cost(m, 1, 10, LG_PERSIST_STAGE, &x), st0 = cost(m, 1, 10, LG_PERSIST_STAGE, &y);
    cr_expect(fabs(st.us - st0.us - 0.5 * st.waits) < 1e-6, "stage: %.3f -> %.3f us", st0.us, st.us);
    cr_expect(fabs(cost(m, 1, 10, LG_PERSIST_FINE, &x).us - cost(m, 1, 10, LG_PERSIST_FINE, &y).us) < 1e-6);
    /* a slower mma makes a compute-bound verification dearer, and only
     * there */
    x = base, x.v[LG_QUANT_RATE] = 1e6, x.v[LG_IMMA_RATE] = 1e8;
    y = x, y.v[LG_MMA_EFF] = 0.25;
    cr_expect(cost(m, 8, 10, LG_PERSIST_FINE_MMA, &y).us > cost(m, 8, 10, LG_PERSIST_FINE_MMA, &x).us);
    cr_expect(cost(m, 8, 10, LG_PERSIST_FINE, &y).us == cost(m, 8, 10, LG_PERSIST_FINE, &x).us);
    cr_expect(cost(m, 8, 10, LG_PERSIST_FINE_MMA, &x).us < cost(m, 8, 10, LG_PERSIST_FINE, &x).us);
    lg_model_close(m);
}

Test(ledger, mixed_types_and_quantised_inputs) {
    lg_model *m = open_tiny(&k_tiny_q);
    const lg_device d = dev(1e12, 1, 10, 100, 1e30);
    /* Q, K Q8_0 and V Q4_0: three qkv launches; attention and the SwiGLU
     * leave the int8 rows wo and down read, so no quantising launch */
    lg_step s = cost(m, 1, 10, LG_GRAPH_PDL, &d);
    cr_expect(s.launches == 17 && s.nodes == 19, "graph+pdl: %d launches, %d nodes", s.launches, s.nodes);
    s = cost(m, 1, 10, LG_GRAPH_PDL_NOFOLD, &d);
    cr_expect(s.launches == 22, "nofold: %d launches", s.launches);
    lg_model_close(m);
}

Test(ledger, spec_speedup) {
    /* all 4 of gamma 3 accepted, drafts free, verify as dear as a step */
    cr_expect(fabs(lg_spec_speedup(1.0, 3, 1, 0, 1) - 4) < 1e-12);
    cr_expect(fabs(lg_spec_speedup(0.5, 1, 1, 0.1, 1.2) - 1.5 / 1.3) < 1e-12);
}

Test(ledger, trace_refuses_rows) {
    lg_model *m = open_tiny(&k_tiny);
    lg_trace t = {0};
    sd_err e;
    cr_expect(lg_model_trace(m, 0, 10, &t, &e) == -1);
    cr_expect(strstr(e.msg, "0 rows") != NULL, "%s", e.msg);
    cr_expect(lg_model_trace(m, 4, 62, &t, &e) == -1);
    lg_trace_free(&t);
    lg_model_close(m);
}

/* ---- the constants file -------------------------------------------------- */

static char *good_text(void) {
    static char buf[4096];
    size_t o = 0;
    for (int d = 0; d < LG_NDEV; d++)
        for (int k = 0; k < LG_NCONST; k++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s %s %g run %d\n", lg_const_name(k),
                                  lg_dev_name(d), k == LG_ETA || k == LG_MMA_EFF ? 0.5 : 1.0 + k + 10 * d,
                                  k);
    snprintf(buf + o, sizeof buf - o,
             "# a comment\n\ndecode_nofold:llama-1b-bf16 h200 982 a run\n"
             "verify_fine_mma:qwen-1.5b-q4_k_m:5 h100 1.1 assumption: not a run\n");
    return buf;
}

Test(ledger_consts, parses) {
    static lg_consts c;
    sd_err e;
    cr_assert(lg_consts_parse(good_text(), "good.txt", &c, &e) == 0, "%s", e.msg);
    cr_expect(c.dev[LG_H100].v[LG_KERNEL_US] == 1.0 + LG_KERNEL_US);
    cr_expect(c.dev[LG_H200].v[LG_COPY_GBS] == 11.0 + LG_COPY_GBS);
    cr_expect(c.dev[LG_H200].v[LG_ETA] == 0.5);
    cr_expect(strcmp(c.source[LG_H100][LG_STEP_US], "run 4") == 0, "'%s'", c.source[LG_H100][LG_STEP_US]);
    cr_expect(lg_consts_point(&c, "decode_nofold:llama-1b-bf16", LG_H200) == 982);
    cr_expect(lg_consts_point(&c, "decode_nofold:llama-1b-bf16", LG_H100) == -1);
    cr_expect(lg_consts_point(&c, "verify_fine_mma:qwen-1.5b-q4_k_m:5", LG_H100) == 1.1);
    cr_expect(!c.assumed[LG_H100][LG_STEP_US]);
    cr_expect(lg_point_path("verify_fine_mma:x:5") == LG_PERSIST_FINE_MMA);
    cr_expect(lg_point_path("decode_stage:x") == LG_PERSIST_STAGE);
    cr_expect(lg_point_path("decode_fine:") == -1 && lg_point_path("decode_persist:x") == -1 &&
              lg_point_path("prefill_pdl:x") == -1);
}

Test(ledger_consts, marks_assumptions) {
    static lg_consts c;
    static char buf[4096];
    sd_err e;
    snprintf(buf, sizeof buf, "%s", good_text());
    char *line = strstr(buf, "flag_us h200");
    cr_assert(line);
    memcpy(strstr(line, "run"), "as~", 3);
    cr_assert(lg_consts_parse(buf, "a.txt", &c, &e) == 0, "%s", e.msg);
    cr_expect(!c.assumed[LG_H200][LG_FLAG_US]);
    snprintf(buf, sizeof buf, "%s", good_text());
    line = strstr(buf, "flag_us h200");
    const char *rest = strchr(line, '\n');
    char tail[4096];
    snprintf(tail, sizeof tail, "%s", rest);
    snprintf(line, sizeof buf - (size_t)(line - buf), "flag_us h200 0.7 assumption: a guess%s", tail);
    cr_assert(lg_consts_parse(buf, "a.txt", &c, &e) == 0, "%s", e.msg);
    cr_expect(c.assumed[LG_H200][LG_FLAG_US] && c.dev[LG_H200].v[LG_FLAG_US] == 0.7);
    cr_expect(!c.assumed[LG_H100][LG_FLAG_US]);
}

Test(ledger_consts, shipped_file) {
    static lg_consts c;
    sd_err e;
    cr_assert(lg_consts_load("docs/perf/gpu-ledger-constants.txt", &c, &e) == 0, "%s", e.msg);
    cr_expect(c.n_pt > 0);
}

/* text with line `line` (1-based) of the good text replaced by repl */
static void refused(int line, const char *repl, const char *want) {
    static char buf[4096];
    static lg_consts c;
    const char *s = good_text();
    size_t o = 0;
    for (int ln = 1; *s; ln++) {
        const char *nl = strchr(s, '\n');
        const size_t len = nl ? (size_t)(nl - s) + 1 : strlen(s);
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%.*s", (int)len,
                              ln == line ? repl : s);
        if (ln == line && nl) buf[o++] = '\n', buf[o] = 0;
        s += len;
    }
    sd_err e;
    cr_expect(lg_consts_parse(buf, "bad.txt", &c, &e) == -1, "accepted: %s", repl);
    cr_expect(strstr(e.msg, want) != NULL, "'%s' does not say '%s'", e.msg, want);
}

Test(ledger_consts, refuses) {
    refused(3, "kernel_ms h100 3 run", "bad.txt:3: unknown constant 'kernel_ms'");
    refused(2, "eta a100 0.5 run", "bad.txt:2: device 'a100'");
    refused(2, "eta h100 1.5 run", "bad.txt:2: eta 1.5 is above 1");
    refused(2, "mma_eff h100 2 run", "bad.txt:2: mma_eff 2 is above 1");
    refused(4, "launch_us h100 -4 run", "bad.txt:4: value '-4'");
    refused(4, "launch_us h100 4us run", "bad.txt:4: value '4us'");
    refused(4, "launch_us h100 4", "bad.txt:4: launch_us h100 has no source");
    refused(4, "kernel_us h100 4 twice", "bad.txt:4: kernel_us h100 given twice");
    refused(4, "# launch_us dropped", "bad.txt: no launch_us for h100");
    refused(4, "decode:llama h100 5 run", "bad.txt:4: measured figure 'decode:llama'");
    static lg_consts c;
    sd_err e;
    cr_expect(lg_consts_load("/nonexistent/ledger.txt", &c, &e) == -1);
    cr_expect(strstr(e.msg, "/nonexistent/ledger.txt: cannot open") != NULL, "%s", e.msg);
}

/* The microbenchmark's "ledger:" lines (bench_persist_cuda), each written
 * into the file with its device and run, give the constants they measure. */
Test(ledger_consts, bench_figures) {
    static const char *const out[] = {"S   ledger: persist:flag_us 0.612", "S   ledger: persist:load_us 1.250",
                                      "S   ledger: persist:l2_us 0.500", "S   ledger: persist:read_gbs 3010"};
    static lg_consts c;
    static char buf[8192];
    size_t o = (size_t)snprintf(buf, sizeof buf, "%s", good_text());
    for (size_t i = 0; i < sizeof out / sizeof *out; i++) {
        char key[64], val[32];
        cr_assert(sscanf(out[i], "S   ledger: %63s %31s", key, val) == 2, "%s", out[i]);
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s h100 %s gpu-check: bench_persist_cuda\n", key, val);
    }
    snprintf(buf + o, sizeof buf - o, "persist:stage_us h200 2.5 a run\n");
    sd_err e;
    cr_assert(lg_consts_parse(buf, "bench.txt", &c, &e) == 0, "%s", e.msg);
    cr_expect(c.bench[LG_H100][LG_B_FLAG] == 0.612 && c.bench[LG_H100][LG_B_READ] == 3010);
    cr_expect(c.bench[LG_H200][LG_B_FLAG] == 0 && c.bench[LG_H200][LG_B_STAGE] == 2.5);
    cr_expect(strcmp(c.bench_source[LG_H100][LG_B_L2], "gpu-check: bench_persist_cuda") == 0);
    cr_expect(lg_consts_fit_bench(&c, LG_H100) == (1u << LG_FLAG_US | 1u << LG_LOAD_US));
    cr_expect(c.dev[LG_H100].v[LG_FLAG_US] == 0.612);
    cr_expect(fabs(c.dev[LG_H100].v[LG_LOAD_US] - 0.75) < 1e-12, "%g", c.dev[LG_H100].v[LG_LOAD_US]);
    cr_expect(lg_consts_fit_bench(&c, LG_H200) == 0);
    cr_expect(c.dev[LG_H200].v[LG_FLAG_US] == 11.0 + LG_FLAG_US);
    refused(4, "persist:flag h100 1 r", "bad.txt:4: 'persist:flag' is not a figure");
    refused(4, "persist:l2_us h100 0 r", "bad.txt:4: value '0' of persist:l2_us");
}

/* ---- the targets file ---------------------------------------------------- */

Test(ledger_targets, parses) {
    lg_targets t;
    sd_err e;
    const char *text = "# targets\ndecode llama-1b-bf16 pct 90\ndecode smollm2-135m-q4_1 toks 10000\n"
                       "verify 16 1.25\nverify 8 1.10\nspec 2.0\naccept 0.882 0.729\n";
    cr_assert(lg_targets_parse(text, "t.txt", &t, &e) == 0, "%s", e.msg);
    cr_expect(t.n_decode == 2 && t.decode[0].pct && t.decode[0].value == 90 && !t.decode[1].pct &&
              t.decode[1].value == 10000 && !strcmp(t.decode[1].preset, "smollm2-135m-q4_1"));
    cr_expect(t.spec == 2.0 && t.n_accept == 2 && t.accept[1] == 0.729);
    /* the tightest target covering n */
    cr_expect(lg_targets_verify(&t, 1) == 1.10 && lg_targets_verify(&t, 8) == 1.10);
    cr_expect(lg_targets_verify(&t, 9) == 1.25 && lg_targets_verify(&t, 16) == 1.25);
    cr_expect(lg_targets_verify(&t, 17) == 0);
    cr_assert(lg_targets_load("docs/perf/gpu-targets.txt", &t, &e) == 0, "%s", e.msg);
    cr_expect(t.n_decode > 0 && t.n_verify > 0);
}

static void targets_refused(const char *text, const char *want) {
    lg_targets t;
    sd_err e;
    cr_expect(lg_targets_parse(text, "t.txt", &t, &e) == -1, "accepted: %s", text);
    cr_expect(strstr(e.msg, want) != NULL, "'%s' does not say '%s'", e.msg, want);
}

Test(ledger_targets, refuses) {
    targets_refused("spec 2\naccept 0.8\ndecode x pct\n", "t.txt:3: not 'decode PRESET toks|pct VALUE'");
    targets_refused("spec 2\ndecode x rate 5\n", "t.txt:2: not 'decode");
    targets_refused("verify 8.5 1.1\n", "t.txt:1: not 'verify ROWS RATIO'");
    targets_refused("verify 8 0.9\n", "t.txt:1: not 'verify ROWS RATIO'");
    targets_refused("spec 2\naccept 0.8 1.2\n", "t.txt:2: acceptance rate '1.2' not in (0, 1)");
    targets_refused("speed 2\n", "t.txt:1: unknown target 'speed'");
    targets_refused("spec 2\n", "t.txt: no accept or no spec line");
}
