/* Whole forward passes through the emulated CUDA backend against the CPU
 * backend (tests/cuda_emu/README.md): for every weight type the CUDA
 * kernels take, a synthetic model (tests/util/synth_model.c, dim 256 so the
 * K-quants fit) is loaded on both backends, and
 *   - the logits of a prefill, a 4-row verification and a decode step
 *     agree (max |cuda - cpu| / max |cpu|: 1e-4 for float weights, 1e-2
 *     for quantised ones, test_cuda.c's whole-model bounds);
 *   - greedy autoregressive output is the same token for token on both;
 *   - for F32, Q4_K and qwen2 Q4_K, on the CUDA backend, greedy speculative
 *     decoding (a drafter of another type, at gamma 4 with --draft-p-min
 *     0.5, whose probabilities come from the device; and self-speculative
 *     with one layer), NASD, beam search with one beam and greedy without the cache
 *     give exactly the autoregressive output, and beam search with three
 *     beams gives the CPU's beams; then all of it again with every decode
 *     and verification step a CUDA graph (sd_cuda_set_graph);
 *   - with every such step one persistent launch (SD_CUDA_PERSISTENT=1,
 *     kernels/cuda/step.cu), for every weight type greedy output is the
 *     CPU's and for F32, Q4_K and qwen2 Q4_K every strategy is
 *     autoregressive greedy's (persist_type); the same with the products
 *     on tensor cores (SD_CUDA_MMA, persist_mma_*: every type the mma
 *     takes, each launch under the emulator's schedule check, and
 *     verifications of 2, 5, 8 and 16 rows whose greedy ids are the
 *     CPU's), and with the weight rows of its items staged in shared
 *     memory under the schedule check (persist_stage_*, SD_CUDA_STAGE=1,
 *     on the __dp4a tiles and on tensor cores); the waits a persistent step
 *     holds and its host time, built and kept (persist_waits,
 *     persist_mma_waits); and a planted wrong chunk wait that the
 *     emulator's schedule check catches, on the __dp4a tiles and on tensor
 *     cores (persist_planted_wrong_wait, emulator only).
 * Under the emulator the logits and greedy steps also run its __ldg check
 * (CUDA_EMU_LDG_CHECK, tests/cuda_emu/emu.cpp).
 * The same file, built against the CUDA library (build/tests/
 * test_cuda_forward), is scripts/gpu-check.sh's check of the strategies
 * on a GPU. The qwen2 path (NEOX rotation, Q/K/V biases) runs for two types. Sampled
 * strategies are left to test_strategies.c on the CPU: they only differ
 * from the greedy ones after the logits, which are compared here. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/decode/decode.h"
#include "engine/decode/ngram.h"
#include "engine/format/gguf.h"
#include "engine/session/device.h"
#include "kernels/cuda/backend_cuda.h"
#include "tests/util/synth_model.h"
#include "tests/util/test_util.h"

#define GEN 12
#define CTX 64

typedef struct twin {
    uint8_t *bytes;
    sd_model *cpu, *gpu;
} twin;

static sd_model *load_on(const uint8_t *bytes, size_t n, sd_backend *be) {
    sd_err e = {{0}};
    cr_assert(be, "backend: %s", e.msg);
    gguf_file *f = gguf_open_mem(bytes, n, "synth", &e);
    cr_assert(f, "%s", e.msg);
    sd_model_opts o = {.n_ctx = CTX};
    sd_model *m = sd_model_from_gguf(f, be, &o, &e);
    cr_assert(m, "%s", e.msg);
    return m;
}

static synth_cfg cfg_for(uint32_t type, int qwen2) {
    synth_cfg c = synth_default();
    c.dim = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 512, c.vocab = 512;
    c.ctx = CTX, c.wtype = type, c.seed = 0xc0de ^ type, c.qwen2 = qwen2;
    return c;
}

static void twin_load_cfg(twin *t, const synth_cfg *cfg) {
    synth_cfg c = *cfg;
    size_t n;
    sd_err e = {{0}};
    cr_assert_eq(synth_model_bytes(&c, &t->bytes, &n, &e), 0, "%s", e.msg);
    tu_cpu_as_cuda_reference();
    t->cpu = load_on(t->bytes, n, sd_backend_open(SD_DEVICE_CPU, 1, &e));
    t->gpu = load_on(t->bytes, n, sd_backend_open(SD_DEVICE_CUDA, 1, &e));
}

static void twin_load(twin *t, uint32_t type, int qwen2) {
    const synth_cfg c = cfg_for(type, qwen2);
    twin_load_cfg(t, &c);
}

static void twin_free(twin *t) {
    sd_model_free(t->cpu);
    sd_model_free(t->gpu);
    free(t->bytes);
}

static double rel_err(const float *got, const float *ref, size_t n) { return tu_rel_err(got, ref, n); }

static const int32_t prompt[] = {1, 300, 301, 302, 400, 401, 303, 350, 360, 370, 380};
#define NP 5

static void check_logits(twin *t, double tol, const char *what) {
    const int V = t->cpu->hp.vocab;
    float *a = malloc((size_t)7 * V * sizeof *a), *b = malloc((size_t)7 * V * sizeof *b);
    cr_assert(a && b);
    const int steps[3][2] = {{0, 7}, {7, 3}, {10, 1}}; /* pos, n */
    for (int s = 0; s < 3; s++) {
        sd_err e = {{0}};
        const int pos = steps[s][0], n = steps[s][1];
        cr_assert_eq(sd_forward(t->cpu, prompt + pos, n, pos, a, &e), 0, "%s", e.msg);
        cr_assert_eq(sd_forward(t->gpu, prompt + pos, n, pos, b, &e), 0, "%s", e.msg);
        const double err = rel_err(b, a, (size_t)n * V);
        cr_expect(err <= tol, "%s: logits at pos %d (n %d): error %.3g > %.1g", what, pos, n, err, tol);
    }
    free(a), free(b);
}

static void greedy(sd_model *m, int cache, int32_t *out) {
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = cache};
    sd_gen_stats st;
    sd_err e = {{0}};
    cr_assert_eq(sd_autoregressive_generate(prompt, NP, m, GEN, &cfg, out, &st, &e), GEN, "%s", e.msg);
}

/* Every strategy's greedy output is autoregressive greedy's on t's CUDA
 * model, at gamma 1 (verifications of 2 rows) and 4 (5 rows), or at 4
 * only with g_min 4. */
static void check_strategies(twin *t, sd_model *drafter, int g_min, const char *what) {
    int32_t want[GEN], cpu_out[GEN], got[GEN];
    sd_model *m = t->gpu;
    sd_err e = {{0}};
    greedy(t->cpu, 1, cpu_out);
    greedy(m, 1, want);
    cr_expect_arr_eq(want, cpu_out, sizeof want, "%s: greedy on cuda differs from the cpu", what);
    greedy(m, 0, got);
    cr_expect_arr_eq(got, want, sizeof want, "%s: greedy without the cache", what);

    sd_lm tl = {m, m->kv, 0, 0};
    for (int g = g_min; g <= 4; g += 3) {
        sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
        sd_gen_stats st;
        if (drafter) { /* another model as the drafter */
            sd_lm dl = {drafter, drafter->kv, 0, 0};
            for (int pm = 0; pm <= (g == 4); pm++) {
                sd_spec_opts o = {{g, 0, g % 2, 0}, pm ? 0.5 : 0, 0};
                cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &o, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
                cr_expect_arr_eq(got, want, sizeof want, "%s: speculative gamma %d p_min %g", what, g, o.p_min);
                if (pm) cr_expect_lt(st.drafted, 4 * (st.target_calls - 1), "%s: p_min 0.5 never ended a round early", what);
            }
        }
        sd_kv *kv = sd_kv_create(m->be, 1, m->kv->kv_dim, m->n_ctx, m->kv_type, &e);
        cr_assert(kv, "%s", e.msg);
        sd_lm sl = {m, kv, 1, 0};
        sd_spec_opts o = {{g, 0, 1, 0}, 0, 0};
        cr_assert_eq(sd_speculative_generate(prompt, NP, &sl, &tl, &o, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
        cr_expect_arr_eq(got, want, sizeof want, "%s: self-speculative gamma %d", what, g);
        sd_kv_free(kv);
        sd_ngram *s = sd_ngram_create(0, 2, 64, &e);
        cr_assert(s, "%s", e.msg);
        sd_nasd_opts no = {{g, 0, 1, 0}, 3, 0};
        cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, s, &tl, &no, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
        cr_expect_arr_eq(got, want, sizeof want, "%s: nasd gamma %d", what, g);
        sd_ngram_free(s);
    }
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_beam_opts one = {1, 1, 0, 0};
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &one, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
    cr_expect_arr_eq(got, want, sizeof want, "%s: one beam", what);
    sd_beam_opts three = {3, 3, 0, 1.0};
    cr_assert_eq(sd_beam_search_generate(prompt, NP, t->cpu, &three, GEN, &cfg, cpu_out, &st, &e), GEN, "%s", e.msg);
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &three, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
    cr_expect_arr_eq(got, cpu_out, sizeof got, "%s: three beams differ from the cpu's", what);
}

static int is_quant(uint32_t t) { return t != SD_F32 && t != SD_F16 && t != SD_BF16; }

/* full: the decoding strategies too (else logits and greedy output only). */
static void forward_type(uint32_t type, int qwen2, int full) {
    char what[64];
    snprintf(what, sizeof what, "%s %s", qwen2 ? "qwen2" : "llama", sd_wtype_name(type));
    twin t, d = {0};
    /* the emulator's check that no kernel reads through __ldg what a kernel
     * it may run beside wrote (tests/cuda_emu/emu.cpp; a GPU ignores it),
     * over the logits and the greedy output; the strategies' many steps run
     * without it (it copies device memory at every launch, 2.5x the time) */
    cr_assert(setenv("CUDA_EMU_LDG_CHECK", "1", 1) == 0);
    twin_load(&t, type, qwen2);
    /* quantised, BF16 and F16 products on tensor cores (SD_CUDA_MMA, off
     * by default); the persistent cases below build their steps on the
     * __dp4a and float tiles */
    const int mma = is_quant(type) || type == SD_BF16 || type == SD_F16;
    cr_assert(!mma || sd_cuda_set_mma(t.gpu->be, 1) == 0);
    check_logits(&t, is_quant(type) ? 1e-2 : 1e-4, what);
    if (full) {
        cr_assert(unsetenv("CUDA_EMU_LDG_CHECK") == 0);
        /* a drafter of another type with the same vocabulary */
        twin_load(&d, type == SD_F32 ? SD_F16 : SD_Q8_0, qwen2);
        cr_assert(!mma || sd_cuda_set_mma(d.gpu->be, 1) == 0);
        /* first with plain launches (graphs are the backend's default) */
        cr_assert(sd_cuda_set_graph(t.gpu->be, 0) == 0 && sd_cuda_set_graph(d.gpu->be, 0) == 0);
        check_strategies(&t, d.gpu, 1, what);
        cr_assert(sd_cuda_set_graph(t.gpu->be, 1) == 0 && sd_cuda_set_graph(d.gpu->be, 1) == 0);
        strncat(what, " (graphs)", sizeof what - strlen(what) - 1);
        check_strategies(&t, d.gpu, 1, what);
        sd_cuda_graph_stats st;
        cr_assert(sd_cuda_graph_stats_get(t.gpu->be, &st) == 0);
        cr_expect(st.launched > 0 && st.replays > 0, "%s: %ld steps graphed, %ld replayed", what,
                  st.launched, st.replays);
    } else {
        int32_t a[GEN], b[GEN];
        greedy(t.cpu, 1, a);
        greedy(t.gpu, 1, b);
        cr_expect_arr_eq(b, a, sizeof a, "%s: greedy on cuda differs from the cpu", what);
    }
    if (d.bytes) twin_free(&d);
    twin_free(&t);
}

static void persist_step(twin *t, int n, int how, sd_cuda_graph_stats *st);

/* The persistent step (kernels/cuda/step.cu, SD_CUDA_PERSISTENT=1): every
 * decode and verification step the engine records runs as one cooperative
 * launch, here on 4 multiprocessors so that each block takes many work
 * items. The emulator runs the blocks round robin, each to its next
 * barrier or wait in turn, so every item runs beside the items taken just
 * before it and a missing wait reads rows not yet written. One type runs
 * under CUDA_EMU_COOP_CHECK too (each launch three times, in three block
 * orders, the device memory compared), which names the first byte a
 * missing wait changes; the others leave it out for time. The outputs
 * must be what the graph path gives: greedy output the CPU's and (full)
 * every strategy autoregressive greedy's; and every recorded step must
 * have run persistently. mma: the products on tensor cores (mv_mma.cuh),
 * and verification steps of 2, 5, 8 and 16 rows after the rest. With
 * stage (SD_CUDA_STAGE=1, kernels/cuda/stage.cuh) the blocks compute the
 * matrix-vector items with waits from weight rows staged in shared
 * memory, and the emulator stops any tile that reads them through a
 * global-memory load; with mma too, the steps run unstaged. */
static void persist_type(uint32_t type, int qwen2, int full, int order_check, int mma, int stage) {
    char what[80];
    snprintf(what, sizeof what, "%s %s (persistent%s%s)", qwen2 ? "qwen2" : "llama",
             sd_wtype_name(type), mma ? ", mma" : "", stage ? ", staged" : "");
    cr_assert(setenv("SD_CUDA_PERSISTENT", "1", 1) == 0 && setenv("CUDA_EMU_SMS", "4", 1) == 0);
    cr_assert(setenv("SD_CUDA_STAGE", stage ? "1" : "0", 1) == 0);
    cr_assert(!order_check || setenv("CUDA_EMU_COOP_CHECK", "1", 1) == 0);
    twin t, d = {0};
    twin_load(&t, type, qwen2);
    cr_assert(!mma || sd_cuda_set_mma(t.gpu->be, 1) == 0);
    if (full) {
        twin_load(&d, type == SD_F32 ? SD_F16 : SD_Q8_0, qwen2);
        cr_assert(!mma || sd_cuda_set_mma(d.gpu->be, 1) == 0);
        check_strategies(&t, d.gpu, stage ? 4 : 1, what);
    } else {
        int32_t a[GEN], b[GEN];
        greedy(t.cpu, 1, a);
        greedy(t.gpu, 1, b);
        cr_expect_arr_eq(b, a, sizeof a, "%s: greedy on cuda differs from the cpu", what);
    }
    sd_cuda_graph_stats st;
    cr_assert(sd_cuda_graph_stats_get(t.gpu->be, &st) == 0);
    cr_expect(st.persistent > 0 && st.persist_fallbacks == 0,
              "%s: %ld steps persistent, %ld not (%s)", what, st.persistent, st.persist_fallbacks,
              st.persist_why);
    /* greedy decoding's steps differ only in their position: kept lists */
    cr_expect(st.persist_replays > 0 && st.persist_replays < st.persistent,
              "%s: %ld of %ld persistent steps launched a kept work list", what, st.persist_replays,
              st.persistent);
    /* each layer's attention waits for the chunks of its own K/V head */
    cr_expect(st.persist_chunk_waits == cfg_for(type, qwen2).n_layers,
              "%s: the last step's attention waits: %ld chunk waits for %d layers", what,
              st.persist_chunk_waits, cfg_for(type, qwen2).n_layers);
    if (mma) {
        const int rows[4] = {2, 5, 8, 16};
        for (int r = 0; r < 4; r++) {
            sd_cuda_graph_stats v;
            persist_step(&t, rows[r], SD_CUDA_WAITS_FINE, &v);
            cr_expect(v.persistent > st.persistent && v.persist_fallbacks == 0 &&
                          v.persist_chunk_waits == cfg_for(type, qwen2).n_layers,
                      "%s: %d rows: %ld steps persistent, %ld not (%s), %ld chunk waits", what,
                      rows[r], v.persistent, v.persist_fallbacks, v.persist_why,
                      v.persist_chunk_waits);
            st = v;
        }
    }
    /* a step with tensor-core stages runs on step_kernel, unstaged (step.cu) */
    cr_expect(stage && !mma ? st.persist_staged > 0 : st.persist_staged == 0,
              "%s: the last step staged %ld items", what, st.persist_staged);
    if (d.bytes) twin_free(&d);
    twin_free(&t);
}

/* Built for a real GPU (test_cuda_forward) on a machine without one: skip. */
static void need_device(void) {
    char why[256];
    if (!sd_cuda_available(why, sizeof why)) cr_skip_test("%s", why);
}
TestSuite(emu_forward, .init = need_device);

Test(emu_forward, f32) { forward_type(SD_F32, 0, 1); }
Test(emu_forward, f16) { forward_type(SD_F16, 0, 0); }
Test(emu_forward, bf16) { forward_type(SD_BF16, 0, 0); }
Test(emu_forward, q8_0) { forward_type(SD_Q8_0, 0, 0); }
Test(emu_forward, q4_0) { forward_type(SD_Q4_0, 0, 0); }
Test(emu_forward, q4_1) { forward_type(SD_Q4_1, 0, 0); }
Test(emu_forward, q5_0) { forward_type(SD_Q5_0, 0, 0); }
Test(emu_forward, q4_k) { forward_type(SD_Q4_K, 0, 1); }
Test(emu_forward, q6_k) { forward_type(SD_Q6_K, 0, 0); }
Test(emu_forward, qwen2_f32) { forward_type(SD_F32, 1, 0); }
Test(emu_forward, qwen2_q4_k) { forward_type(SD_Q4_K, 1, 1); }
Test(emu_forward, persist_f32) { persist_type(SD_F32, 0, 1, 0, 0, 0); }
Test(emu_forward, persist_f16) { persist_type(SD_F16, 0, 0, 0, 0, 0); }
Test(emu_forward, persist_bf16) { persist_type(SD_BF16, 0, 0, 0, 0, 0); }
Test(emu_forward, persist_q8_0) { persist_type(SD_Q8_0, 0, 0, 0, 0, 0); }
Test(emu_forward, persist_q4_0) { persist_type(SD_Q4_0, 0, 0, 0, 0, 0); }
Test(emu_forward, persist_q4_1) { persist_type(SD_Q4_1, 0, 0, 0, 0, 0); }
Test(emu_forward, persist_q5_0) { persist_type(SD_Q5_0, 0, 0, 0, 0, 0); }
Test(emu_forward, persist_q4_k) { persist_type(SD_Q4_K, 0, 1, 0, 0, 0); }
Test(emu_forward, persist_q6_k) { persist_type(SD_Q6_K, 0, 0, 1, 0, 0); }
Test(emu_forward, persist_qwen2_q4_k) { persist_type(SD_Q4_K, 1, 1, 0, 0, 0); }

/* Tensor-core stages, every launch under the schedule check. */
Test(emu_forward, persist_mma_f16) { persist_type(SD_F16, 0, 0, 1, 1, 0); }
Test(emu_forward, persist_mma_bf16) { persist_type(SD_BF16, 0, 0, 1, 1, 0); }
Test(emu_forward, persist_mma_q8_0) { persist_type(SD_Q8_0, 0, 0, 1, 1, 0); }
Test(emu_forward, persist_mma_q4_0) { persist_type(SD_Q4_0, 0, 0, 1, 1, 0); }
Test(emu_forward, persist_mma_q4_1) { persist_type(SD_Q4_1, 0, 0, 1, 1, 0); }
Test(emu_forward, persist_mma_q5_0) { persist_type(SD_Q5_0, 0, 0, 1, 1, 0); }
Test(emu_forward, persist_mma_q4_k) { persist_type(SD_Q4_K, 0, 1, 1, 1, 0); }
Test(emu_forward, persist_mma_q6_k) { persist_type(SD_Q6_K, 0, 0, 1, 1, 0); }
Test(emu_forward, persist_mma_qwen2_q4_k) { persist_type(SD_Q4_K, 1, 1, 1, 1, 0); }

/* Weight rows staged in shared memory, every launch under the schedule check
 * but for the Qwen2 model's, which runs every strategy staged at gamma 4
 * (its decode steps' staging under the check is the other types'; gamma 1's
 * 2-row verifications stage as the 5-row ones do, at twice the emulator's
 * time). */
Test(emu_forward, persist_stage_f32) { persist_type(SD_F32, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_f16) { persist_type(SD_F16, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_bf16) { persist_type(SD_BF16, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_q8_0) { persist_type(SD_Q8_0, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_q4_0) { persist_type(SD_Q4_0, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_q4_1) { persist_type(SD_Q4_1, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_q5_0) { persist_type(SD_Q5_0, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_q4_k) { persist_type(SD_Q4_K, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_mma_q4_k) { persist_type(SD_Q4_K, 0, 0, 1, 1, 1); }
Test(emu_forward, persist_stage_q6_k) { persist_type(SD_Q6_K, 0, 0, 1, 0, 1); }
Test(emu_forward, persist_stage_qwen2_q4_k) { persist_type(SD_Q4_K, 1, 1, 0, 0, 1); }

/* One persistent step of n rows after the prompt (how: how its stages
 * wait, SD_CUDA_WAITS_*), whose greedy ids must be the CPU's; its stats
 * into *st. */
static void persist_step(twin *t, int n, int how, sd_cuda_graph_stats *st) {
    cr_assert(sd_cuda_set_persist_waits(t->gpu->be, how) == 0);
    sd_err e = {{0}};
    int32_t ids[NP + 16], want[16], got[16];
    cr_assert(n <= 16);
    for (int i = 0; i < NP + n; i++) ids[i] = prompt[i % (int)(sizeof prompt / sizeof *prompt)];
    sd_model *m[2] = {t->cpu, t->gpu};
    int32_t *out[2] = {want, got};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(sd_forward_ex(m[k], m[k]->kv, ids, NP, 0, 0, NULL, 0, &e), 0, "%s", e.msg);
        cr_assert_eq(sd_forward_top_k(m[k], m[k]->kv, ids + NP, n, NP, 0, n, 1, out[k], &e), 0,
                     "%s", e.msg);
    }
    cr_expect_arr_eq(got, want, (size_t)n * sizeof *got, "%d rows: greedy ids differ from the cpu's", n);
    cr_assert(sd_cuda_graph_stats_get(t->gpu->be, st) == 0);
}

/* The waits a decode step (1 row) and a verification (4 and 12 rows: one
 * activation tile and two) hold, with chunk waits and with stage waits
 * only; printed, and the chunk waits must replace whole-stage ones. With
 * the norms folded (the default) a layer is 5 stages with 4 stage waits
 * and 1 chunk wait, and the step ends with the head and the argmax;
 * launched on their own (SD_CUDA_FUSE_NORM=0) each layer's two norms and
 * the head's are stages and waits more. Then
 * the host time a step takes to build and, the same step again, to launch
 * its kept work list (printed; the emulator's is under the sanitizers), at
 * 2 layers and at 16, the layers of Llama-3.2-1B. */
Test(emu_forward, persist_waits) {
    cr_assert(setenv("SD_CUDA_PERSISTENT", "1", 1) == 0 && setenv("CUDA_EMU_SMS", "4", 1) == 0);
    synth_cfg c = cfg_for(SD_Q8_0, 0);
    twin t;
    twin_load_cfg(&t, &c);
    const int rows[3] = {1, 4, 12};
    for (int r = 0; r < 3; r++) {
        sd_cuda_graph_stats f, s;
        persist_step(&t, rows[r], SD_CUDA_WAITS_FINE, &f);
        persist_step(&t, rows[r], SD_CUDA_WAITS_STAGE, &s);
        cr_log_info("persistent step of %d rows, %d layers: %ld stages; %ld stage waits + %ld "
                    "chunk waits (stage waits only: %ld); built in %.0f us",
                    rows[r], c.n_layers, f.persist_stages, f.persist_waits, f.persist_chunk_waits,
                    s.persist_waits, f.persist_build_us);
        cr_expect(f.persist_chunk_waits == c.n_layers && s.persist_chunk_waits == 0 &&
                      f.persist_waits + f.persist_chunk_waits == s.persist_waits,
                  "%d rows: %ld stage + %ld chunk waits, %ld stage waits alone", rows[r],
                  f.persist_waits, f.persist_chunk_waits, s.persist_waits);
        cr_expect(f.persist_stages == 5 * c.n_layers + 3 && f.persist_waits == 4 * c.n_layers + 2,
                  "%d rows, norms folded: %ld stages, %ld stage waits", rows[r], f.persist_stages,
                  f.persist_waits);
        sd_cuda_graph_stats u;
        cr_assert(sd_cuda_set_fuse_norm(t.gpu->be, 0) == 0);
        persist_step(&t, rows[r], SD_CUDA_WAITS_FINE, &u);
        cr_assert(sd_cuda_set_fuse_norm(t.gpu->be, sd_backend_opts_default().cuda_fuse_norm) == 0);
        cr_expect(u.persist_stages == f.persist_stages + 2 * c.n_layers + 1 &&
                      u.persist_waits == f.persist_waits + 2 * c.n_layers + 1 &&
                      u.persist_chunk_waits == f.persist_chunk_waits,
                  "%d rows, norms launched: %ld stages, %ld + %ld waits", rows[r], u.persist_stages,
                  u.persist_waits, u.persist_chunk_waits);
    }
    twin_free(&t);
    c.n_layers = 16;
    twin_load_cfg(&t, &c);
    for (int r = 0; r < 2; r++) {
        sd_cuda_graph_stats f, again;
        persist_step(&t, rows[r], SD_CUDA_WAITS_FINE, &f);
        persist_step(&t, rows[r], SD_CUDA_WAITS_FINE, &again);
        cr_log_info("persistent step of %d rows, %d layers: %ld stages, %ld stage waits + %ld chunk "
                    "waits; built in %.0f us, launched again (kept) in %.0f us",
                    rows[r], c.n_layers, f.persist_stages, f.persist_waits, f.persist_chunk_waits,
                    f.persist_build_us, again.persist_build_us);
        cr_expect(f.persist_chunk_waits == c.n_layers, "%d layers: %ld chunk waits", c.n_layers,
                  f.persist_chunk_waits);
        cr_expect(again.persist_replays == f.persist_replays + 1, "%d rows: the same step again "
                  "built anew", rows[r]);
    }
    twin_free(&t);
}

/* The same waits with the products on tensor cores (mv_mma.cuh: a warp
 * owns 16 rows, so the Q/K/V items are chunked by their own layout): a
 * decode step and verifications of 5 and 16 rows (one 16-row tile) hold
 * the stage and chunk waits of the __dp4a step with its norms launched
 * (a step with tensor-core stages folds none, step.cu), and its stages,
 * and the chunk waits replace whole-stage ones. */
Test(emu_forward, persist_mma_waits) {
    cr_assert(setenv("SD_CUDA_PERSISTENT", "1", 1) == 0 && setenv("CUDA_EMU_SMS", "4", 1) == 0);
    synth_cfg c = cfg_for(SD_Q8_0, 0);
    twin t;
    twin_load_cfg(&t, &c);
    const int rows[3] = {1, 5, 16};
    for (int r = 0; r < 3; r++) {
        sd_cuda_graph_stats dp, f, s;
        cr_assert(sd_cuda_set_mma(t.gpu->be, 0) == 0 && sd_cuda_set_fuse_norm(t.gpu->be, 0) == 0);
        persist_step(&t, rows[r], SD_CUDA_WAITS_FINE, &dp);
        cr_assert(sd_cuda_set_fuse_norm(t.gpu->be, sd_backend_opts_default().cuda_fuse_norm) == 0);
        cr_assert(sd_cuda_set_mma(t.gpu->be, 1) == 0);
        persist_step(&t, rows[r], SD_CUDA_WAITS_FINE, &f);
        persist_step(&t, rows[r], SD_CUDA_WAITS_STAGE, &s);
        cr_log_info("persistent mma step of %d rows, %d layers: %ld stages; %ld stage waits + %ld "
                    "chunk waits (stage waits only: %ld)",
                    rows[r], c.n_layers, f.persist_stages, f.persist_waits, f.persist_chunk_waits,
                    s.persist_waits);
        cr_expect(f.persist_chunk_waits == c.n_layers && s.persist_chunk_waits == 0 &&
                      f.persist_waits + f.persist_chunk_waits == s.persist_waits,
                  "%d rows: %ld stage + %ld chunk waits, %ld stage waits alone", rows[r],
                  f.persist_waits, f.persist_chunk_waits, s.persist_waits);
        cr_expect(f.persist_stages == dp.persist_stages && f.persist_waits == dp.persist_waits &&
                      f.persist_chunk_waits == dp.persist_chunk_waits,
                  "%d rows: the mma step has %ld stages, %ld + %ld waits; the dp4a step %ld, "
                  "%ld + %ld", rows[r], f.persist_stages, f.persist_waits, f.persist_chunk_waits,
                  dp.persist_stages, dp.persist_waits, dp.persist_chunk_waits);
    }
    twin_free(&t);
}

/* A planted wrong wait: attention's chunk waits leave out the K/V rows
 * the step writes (SD_CUDA_WAITS_PLANTED), one decode step in a child
 * process under the schedule check, which must end it with its report.
 * The emulator's blocks go round in step, so a read comes before a write
 * it does not wait for only when the consumer takes its item while the
 * producer still runs: on 3 multiprocessors the last K/V items and the
 * attention items are taken in the same round; with the products on
 * tensor cores (mma: the Q/K/V product is 8 items, a head each) on 5. The
 * child reports with its exit status (Criterion's assertions belong to the
 * parent): 0 when the step ran, 2 when something before it failed. */
static int planted_child(int how, int mma) {
    synth_cfg c = cfg_for(SD_Q8_0, 0);
    uint8_t *bytes;
    size_t n;
    sd_err e = {{0}};
    if (setenv("SD_CUDA_PERSISTENT", "1", 1) || setenv("CUDA_EMU_SMS", mma ? "5" : "3", 1) ||
        setenv("CUDA_EMU_COOP_CHECK", "1", 1) || synth_model_bytes(&c, &bytes, &n, &e))
        return 2;
    sd_backend *be = sd_backend_open(SD_DEVICE_CUDA, 1, &e);
    gguf_file *f = be ? gguf_open_mem(bytes, n, "synth", &e) : NULL;
    sd_model_opts o = {.n_ctx = CTX};
    sd_model *m = f ? sd_model_from_gguf(f, be, &o, &e) : NULL;
    int32_t ids[1];
    if (!m || sd_cuda_set_persist_waits(be, how) || sd_cuda_set_mma(be, mma) ||
        sd_forward_ex(m, m->kv, prompt, NP, 0, 0, NULL, 0, &e) ||
        sd_forward_top_k(m, m->kv, prompt + NP, 1, NP, 0, 1, 1, ids, &e)) {
        fprintf(stderr, "planted: %s\n", e.msg);
        return 2;
    }
    return 0;
}

/* Runs planted_child(how, mma) in a child; its stderr into buf, its status. */
static int planted_run(int how, int mma, char *buf, size_t cap) {
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        _exit(planted_child(how, mma));
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t r;
    while (len + 1 < cap && (r = read(fd[0], buf + len, cap - 1 - len)) > 0) len += (size_t)r;
    buf[len] = 0;
    close(fd[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* The step with its own waits runs clean, the planted one is reported;
 * mma: with the products on tensor cores. */
static void planted_expect(int mma) {
    static char buf[1 << 16];
    sd_cuda_available(buf, sizeof buf);
    if (!strstr(buf, "cuda-emu")) cr_skip_test("the planted wait needs the emulator's schedule check");
    int st = planted_run(SD_CUDA_WAITS_FINE, mma, buf, sizeof buf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the step with its own waits (mma %d):\n%s", mma, buf);
    st = planted_run(SD_CUDA_WAITS_PLANTED, mma, buf, sizeof buf);
    cr_expect(!WIFEXITED(st), "the wrong wait ran unnoticed (mma %d, exit %d):\n%s", mma,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf);
    cr_expect(strstr(buf, "ERROR: kernel step_kernel (cooperative, CUDA_EMU_COOP_CHECK=1): the result "
                          "depends on the order of the blocks") != NULL,
              "no schedule report (mma %d):\n%s", mma, buf);
}

Test(emu_forward, persist_planted_wrong_wait) { planted_expect(0); }
Test(emu_forward, persist_mma_planted_wrong_wait) { planted_expect(1); }
