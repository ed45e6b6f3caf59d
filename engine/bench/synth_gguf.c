/* Synthetic GGUF models at real shapes, for the GPU check
 * (scripts/gpu-check.sh) on a machine the real files cannot travel to.
 *
 * The presets (shapes, weight types, tensor table, vocabulary) are those
 * of engine/bench/synth_presets.h; this program gives them random weights:
 * valid random blocks (kernels/bench/rand_blocks.h) of amplitude
 * 1/sqrt(cols), so each matrix-vector product keeps activations of order
 * one, BF16 values uniform in the same range, norm weights 1 +- 0.1,
 * biases +- 0.1.
 *
 * The file is streamed through the GGUF writer (engine/format/gguf_writer.h,
 * gw_write_with): header and tensor table first, then each tensor as it is
 * generated (on the kernels' worker pool over chunks, each chunk seeded from
 * the tensor and chunk index), so a 6 GB model needs one tensor's memory
 * and the same seed gives the same bytes whatever the thread count.
 *
 *   usage: synth_gguf PRESET OUT.gguf [--layers N] [--vocab N] [--seed S]
 *          synth_gguf --list
 * --layers and --vocab shrink a preset (tests, quick checks); the other
 * shapes stay. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bench/synth_presets.h"
#include "engine/format/gguf_writer.h"
#include "kernels/bench/rand_blocks.h"
#include "kernels/common/fp16.h"
#include "kernels/common/wtype.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/pool.h"

static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t s = a ^ (b * 0x9e3779b97f4a7c15ull);
    return sd_rb_next(&s);
}

static float uniform(uint64_t *s, float a) {
    return (float)(((double)(sd_rb_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0) * a);
}

/* Chunks of CHUNK elements (a multiple of every block size) are generated
 * independently, each from its own seed. */
#define CHUNK 65536

typedef struct {
    const synth_tensor *t;
    uint8_t *dst;
    uint64_t seed, n;
    float amp;
    size_t bs, bb;
} fill_job;

static void fill_chunk(void *v, int64_t task, int thread) {
    const fill_job *j = v;
    const synth_tensor *t = j->t;
    (void)thread;
    uint64_t c = (uint64_t)task, s = mix(j->seed, c);
    uint64_t i0 = c * CHUNK, m = j->n - i0 < CHUNK ? j->n - i0 : CHUNK;
    if (t->kind == 1 || t->kind == 2) {
        float *f = (float *)j->dst + i0;
        for (uint64_t i = 0; i < m; i++) f[i] = (t->kind == 1 ? 1.0f : 0.0f) + uniform(&s, 0.1f);
    } else if (t->type == SD_BF16) {
        uint16_t *h = (uint16_t *)j->dst + i0;
        for (uint64_t i = 0; i < m; i++) h[i] = sd_f32_to_bf16(uniform(&s, j->amp));
    } else if (t->type == SD_F32) {
        float *f = (float *)j->dst + i0;
        for (uint64_t i = 0; i < m; i++) f[i] = uniform(&s, j->amp);
    } else {
        sd_rand_blocks(t->type, j->dst + i0 / j->bs * j->bb, m / j->bs, j->amp, &s);
    }
}

/* The chunks on the kernels' worker pool (every core): a chunk's bytes
 * depend only on its seed, so the file does not depend on the threads. */
static void fill(sd_pool *pool, const synth_tensor *t, uint8_t *dst, uint64_t seed) {
    fill_job j = {t, dst, seed, t->ne[0] * t->ne[1], 1.0f / sqrtf((float)t->ne[0]),
                  sd_wtype_block(t->type), sd_wtype_block_bytes(t->type)};
    sd_pool_run(pool, fill_chunk, &j, (int64_t)((j.n + CHUNK - 1) / CHUNK), 1);
}

typedef struct fill_ctx {
    const synth_plan *p;
    sd_pool *pool;
    uint64_t seed;
} fill_ctx;

/* gw_write_with's source of tensor idx's bytes. */
static int fill_tensor(void *ud, size_t idx, uint8_t *buf) {
    const fill_ctx *f = ud;
    fill(f->pool, &f->p->t[idx], buf, mix(f->seed, (uint64_t)idx + 1));
    return 0;
}

/* The files' alignment of tensor data. */
#define ALIGN 32

static int write_model(const synth_preset *c, const char *path, uint64_t seed) {
    synth_plan p = {0};
    synth_make_plan(c, &p);
    gw *w = gw_new(3);
    synth_add_keys(w, c, ALIGN);
    int rc = p.failed || synth_add_vocab(w, c->vocab) ? -1 : 0;
    for (int i = 0; i < p.n; i++)
        gw_tensor_later(w, p.t[i].name, p.t[i].type, p.t[i].n_dims, p.t[i].ne, p.t[i].bytes);
    sd_err e;
    fill_ctx f = {&p, sd_pool_create(sd_cpu_physical_cores(), &e), seed};
    if (!f.pool) {
        fprintf(stderr, "synth_gguf: %s\n", e.msg);
        rc = -1;
    } else if (rc || !w || gw_write_with(w, path, fill_tensor, &f)) {
        fprintf(stderr, "synth_gguf: cannot write %s (out of memory or an I/O error)\n", path);
        rc = -1;
    }
    sd_pool_destroy(f.pool);
    gw_free(w);
    free(p.t);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < SYNTH_N_PRESETS; i++)
            printf("%-20s %s\n", k_synth_presets[i].name, k_synth_presets[i].what);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: synth_gguf PRESET OUT.gguf [--layers N] [--vocab N] [--seed S]\n"
                        "       synth_gguf --list\n");
        return 2;
    }
    const synth_preset *c = synth_find(argv[1]);
    if (!c) {
        fprintf(stderr, "synth_gguf: unknown preset '%s' (synth_gguf --list)\n", argv[1]);
        return 2;
    }
    synth_preset cfg = *c;
    uint64_t seed = 1;
    for (int i = 3; i < argc; i += 2) {
        long v = i + 1 < argc ? strtol(argv[i + 1], NULL, 10) : 0;
        if (!strcmp(argv[i], "--layers") && v > 0 && v <= 256) cfg.n_layers = (int)v;
        else if (!strcmp(argv[i], "--vocab") && v >= SYNTH_FIRST_WORD && v <= c->vocab) cfg.vocab = (int)v;
        else if (!strcmp(argv[i], "--seed") && v > 0) seed = (uint64_t)v;
        else {
            fprintf(stderr, "synth_gguf: bad option '%s'%s%s\n", argv[i], i + 1 < argc ? " " : "",
                    i + 1 < argc ? argv[i + 1] : "");
            return 2;
        }
    }
    return write_model(&cfg, argv[2], seed) ? 1 : 0;
}
