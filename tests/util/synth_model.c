#include "tests/util/synth_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/gguf.h"
#include "kernels/bench/rand_blocks.h"
#include "engine/session/device.h"
#include "kernels/cpu/cpu.h"
#include "engine/format/gguf_writer.h"

/* ---- vocabulary -----------------------------------------------------------
 * Hand-picked pieces first (each splits into two earlier ones), then every
 * "▁" + two lowercase letters, then every "▁" + three, in lexicographic
 * order: "▁xy" = "▁x" + "y" and "▁xyz" = "▁xy" + "z". Generated pieces that
 * the hand list already holds are skipped, so all pieces are distinct. */

#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's word boundary */
#define N_GEN2 (26 * 26)
#define N_GEN3 (26 * 26 * 26)

static const char *const k_fixed[] = {
    SP, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p",
    "q", "r", "s", "t", "u", "v", "w", "x", "y", "z", ".", ",", "!", "?", "'", "-",
    SP "a", SP "b", SP "c", SP "d", SP "e", SP "f", SP "g", SP "h", SP "i", SP "j",
    SP "k", SP "l", SP "m", SP "n", SP "o", SP "p", SP "q", SP "r", SP "s", SP "t",
    SP "u", SP "v", SP "w", SP "x", SP "y", SP "z",
    "th", "he", "in", "er", "an", "nd", "ed", "on", "re", "at", "ou", "it", "is", "en",
    "es", "as", "ay", "ll", "ing",
    SP "th", SP "the", SP "an", SP "and", SP "to", SP "he", SP "she", SP "was", SP "in",
    SP "it", SP "is", SP "of", SP "on", SP "day", SP "ran", SP "cat", SP "hat", SP "bed",
    SP "red", SP "then", SP "there",
};
#define N_FIXED ((int)(sizeof k_fixed / sizeof k_fixed[0]))

/* Rank of p in the generated sequence, or -1 if p is not of that form. */
static int gen_rank(const char *p) {
    size_t sp = strlen(SP);
    if (strncmp(p, SP, sp) != 0) return -1;
    const char *l = p + sp;
    size_t n = strlen(l);
    if (n < 2 || n > 3) return -1;
    int r = 0;
    for (size_t i = 0; i < n; i++) {
        if (l[i] < 'a' || l[i] > 'z') return -1;
        r = r * 26 + (l[i] - 'a');
    }
    return n == 2 ? r : N_GEN2 + r;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Ranks of the hand-picked pieces the generator would repeat, ascending. */
static int fixed_gen_ranks(int out[N_FIXED]) {
    int n = 0;
    for (int i = 0; i < N_FIXED; i++) {
        int r = gen_rank(k_fixed[i]);
        if (r >= 0) out[n++] = r;
    }
    qsort(out, (size_t)n, sizeof out[0], cmp_int);
    return n;
}

int synth_max_vocab(void) {
    int ranks[N_FIXED];
    return SYNTH_FIRST_PIECE + N_FIXED + N_GEN2 + N_GEN3 - fixed_gen_ranks(ranks);
}

int synth_piece(int id, char buf[SYNTH_PIECE_MAX]) {
    static const char *const special[3] = {"<unk>", "<s>", "</s>"};
    if (id < 0 || id >= synth_max_vocab()) return -1;
    if (id < 3) {
        snprintf(buf, SYNTH_PIECE_MAX, "%s", special[id]);
    } else if (id < SYNTH_FIRST_PIECE) {
        snprintf(buf, SYNTH_PIECE_MAX, "<0x%02X>", id - 3);
    } else if (id < SYNTH_FIRST_PIECE + N_FIXED) {
        snprintf(buf, SYNTH_PIECE_MAX, "%s", k_fixed[id - SYNTH_FIRST_PIECE]);
    } else {
        /* The g-th generated piece not in the hand list: step over each
         * skipped rank at or below the candidate. */
        int ranks[N_FIXED];
        int n_skip = fixed_gen_ranks(ranks);
        int r = id - SYNTH_FIRST_PIECE - N_FIXED;
        for (int i = 0; i < n_skip && ranks[i] <= r; i++) r++;
        int len = r < N_GEN2 ? 2 : 3;
        if (len == 3) r -= N_GEN2;
        char l[4] = {0};
        for (int i = len - 1; i >= 0; i--) {
            l[i] = (char)('a' + r % 26);
            r /= 26;
        }
        snprintf(buf, SYNTH_PIECE_MAX, SP "%s", l);
    }
    return 0;
}

/* ---- weights --------------------------------------------------------------
 * splitmix64: tiny, seedable, and the same on every platform, so a config
 * names exactly one model. */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-a, a). */
static float rng_uniform(uint64_t *s, float a) {
    double u = (double)(rng_next(s) >> 11) / 9007199254740992.0; /* [0, 1) */
    return (float)((2.0 * u - 1.0) * a);
}

int synth_block_type(uint32_t t) { return t == SD_Q5_0 || t == SD_Q4_K || t == SD_Q6_K; }

/* Appends a matrix of rows x cols (GGUF ne = {cols, rows}) in `type`. */
static int add_matrix(gw *w, const char *name, uint32_t type, int64_t rows, int64_t cols,
                      uint64_t *rng, sd_err *e) {
    size_t n = (size_t)rows * (size_t)cols;
    size_t row_bytes = (size_t)sd_row_bytes(type, (uint64_t)cols);
    uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
    if (synth_block_type(type)) {
        uint8_t *q = malloc((size_t)rows * row_bytes);
        if (!q) return sd_fail(e, "synth: out of memory for %s", name);
        sd_rand_blocks(type, q, n / sd_wtype_block(type), 1.0f / sqrtf((float)cols), rng);
        gw_tensor(w, name, type, 2, ne, q, (size_t)rows * row_bytes);
        free(q);
        return 0;
    }
    float *x = malloc(n * sizeof *x);
    uint8_t *q = type == SD_F32 ? NULL : malloc((size_t)rows * row_bytes);
    if (!x || (type != SD_F32 && !q)) {
        free(x);
        free(q);
        return sd_fail(e, "synth: out of memory for %s", name);
    }
    float a = 1.0f / sqrtf((float)cols);
    for (size_t i = 0; i < n; i++) x[i] = rng_uniform(rng, a);
    for (int64_t r = 0; q && r < rows; r++) {
        if (sd_quantize_row(type, x + (size_t)r * (size_t)cols, q + (size_t)r * row_bytes,
                            cols) < 0) {
            free(x);
            free(q);
            return sd_fail(e, "synth: cannot convert %s to %s", name, sd_wtype_name(type));
        }
    }
    if (q)
        gw_tensor(w, name, type, 2, ne, q, (size_t)rows * row_bytes);
    else
        gw_tensor(w, name, SD_F32, 2, ne, x, n * sizeof *x);
    free(x);
    free(q);
    return 0;
}

static int add_norm(gw *w, const char *name, int dim, uint64_t *rng, sd_err *e) {
    float *x = malloc((size_t)dim * sizeof *x);
    if (!x) return sd_fail(e, "synth: out of memory for %s", name);
    for (int i = 0; i < dim; i++) x[i] = 1.0f + rng_uniform(rng, 0.1f);
    uint64_t ne[1] = {(uint64_t)dim};
    gw_tensor(w, name, SD_F32, 1, ne, x, (size_t)dim * sizeof *x);
    free(x);
    return 0;
}

/* A bias vector (qwen2): uniform in +-0.5. */
static int add_bias(gw *w, const char *name, int dim, uint64_t *rng, sd_err *e) {
    float *x = malloc((size_t)dim * sizeof *x);
    if (!x) return sd_fail(e, "synth: out of memory for %s", name);
    for (int i = 0; i < dim; i++) x[i] = rng_uniform(rng, 0.5f);
    uint64_t ne[1] = {(uint64_t)dim};
    gw_tensor(w, name, SD_F32, 1, ne, x, (size_t)dim * sizeof *x);
    free(x);
    return 0;
}

/* ---- model ---------------------------------------------------------------- */

synth_cfg synth_default(void) {
    synth_cfg c = {
        .dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .ffn = 96, .vocab = 320,
        .ctx = 256, .rope_base = 10000.0f, .wtype = SD_F32, .tied = 0, .seed = 1,
    };
    return c;
}

static int check_cfg(const synth_cfg *c, sd_err *e) {
    if (c->dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->ffn <= 0 || c->ctx <= 0 || !(c->rope_base > 0.0f))
        return sd_fail(e, "synth: sizes and rope_base must be positive");
    if (c->dim % c->n_heads != 0 || (c->dim / c->n_heads) % 2 != 0)
        return sd_fail(e, "synth: dim %d is not n_heads %d x an even head_dim", c->dim,
                       c->n_heads);
    if (c->n_heads % c->n_kv_heads != 0)
        return sd_fail(e, "synth: n_kv_heads %d does not divide n_heads %d", c->n_kv_heads,
                       c->n_heads);
    if (c->vocab < SYNTH_FIRST_PIECE || c->vocab > synth_max_vocab())
        return sd_fail(e, "synth: vocab %d outside [%d, %d]", c->vocab, SYNTH_FIRST_PIECE,
                       synth_max_vocab());
    uint32_t t = c->wtype;
    if (t != SD_F32 && t != SD_F16 && t != SD_BF16 && t != SD_Q8_0 && t != SD_Q4_0 &&
        t != SD_Q4_1 && !synth_block_type(t))
        return sd_fail(e, "synth: unsupported weight type %u", t);
    uint32_t blk = sd_wtype_block(t);
    if (c->dim % (int)blk != 0 || c->ffn % (int)blk != 0)
        return sd_fail(e, "synth: dim %d and ffn %d must be multiples of %s's block %u",
                       c->dim, c->ffn, sd_wtype_name(t), blk);
    return 0;
}

/* llama.cpp's general.file_type for a model that is all `t`. */
static uint32_t file_type(uint32_t t) {
    switch (t) {
    case SD_F16: return 1;
    case SD_Q4_0: return 2;
    case SD_Q4_1: return 3;
    case SD_Q8_0: return 7;
    case SD_Q5_0: return 8;
    case SD_Q4_K: return 14; /* Q4_K_S */
    case SD_Q6_K: return 18;
    case SD_BF16: return 32;
    default: return 0;
    }
}

static int add_vocab(gw *w, int vocab, sd_err *e) {
    char *text = malloc((size_t)vocab * SYNTH_PIECE_MAX);
    const char **pieces = malloc((size_t)vocab * sizeof *pieces);
    float *scores = malloc((size_t)vocab * sizeof *scores);
    int32_t *types = malloc((size_t)vocab * sizeof *types);
    int rc = 0;
    if (!text || !pieces || !scores || !types) {
        rc = sd_fail(e, "synth: out of memory for the vocabulary");
    } else {
        for (int i = 0; i < vocab; i++) {
            char *p = text + (size_t)i * SYNTH_PIECE_MAX;
            synth_piece(i, p); /* i < vocab <= synth_max_vocab(), checked */
            pieces[i] = p;
            scores[i] = i < SYNTH_FIRST_PIECE ? 0.0f : -(float)(i - SYNTH_FIRST_PIECE);
            types[i] = i == 0 ? 2 : i < 3 ? 3 : i < SYNTH_FIRST_PIECE ? 6 : 1;
        }
        gw_str(w, "tokenizer.ggml.model", "llama");
        gw_arr_str(w, "tokenizer.ggml.tokens", pieces, (size_t)vocab);
        gw_arr_f32(w, "tokenizer.ggml.scores", scores, (size_t)vocab);
        gw_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)vocab);
        gw_u32(w, "tokenizer.ggml.unknown_token_id", 0);
        gw_u32(w, "tokenizer.ggml.bos_token_id", 1);
        gw_u32(w, "tokenizer.ggml.eos_token_id", 2);
    }
    free(text);
    free(pieces);
    free(scores);
    free(types);
    return rc;
}

static gw *build(const synth_cfg *c, sd_err *e) {
    if (check_cfg(c, e) < 0) return NULL;
    gw *w = gw_new(3);
    if (!w) {
        sd_fail(e, "synth: out of memory");
        return NULL;
    }
    int head_dim = c->dim / c->n_heads, kv_dim = head_dim * c->n_kv_heads;
    const char *arch = c->qwen2 ? "qwen2" : "llama";
    char key[96];
#define KEY(s) (snprintf(key, sizeof key, "%s." s, arch), key)
    gw_str(w, "general.architecture", arch);
    gw_str(w, "general.name", "synth");
    gw_u32(w, "general.file_type", file_type(c->wtype));
    gw_u32(w, KEY("context_length"), (uint32_t)c->ctx);
    gw_u32(w, KEY("embedding_length"), (uint32_t)c->dim);
    gw_u32(w, KEY("block_count"), (uint32_t)c->n_layers);
    gw_u32(w, KEY("feed_forward_length"), (uint32_t)c->ffn);
    gw_u32(w, KEY("attention.head_count"), (uint32_t)c->n_heads);
    gw_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    gw_u32(w, KEY("rope.dimension_count"), (uint32_t)head_dim);
    gw_f32(w, KEY("rope.freq_base"), c->rope_base);
    gw_f32(w, KEY("attention.layer_norm_rms_epsilon"), SYNTH_NORM_EPS);
#undef KEY
    if (add_vocab(w, c->vocab, e) < 0) goto fail;

    uint64_t rng = c->seed;
    uint32_t t = c->wtype;
    if (add_matrix(w, "token_embd.weight", t, c->vocab, c->dim, &rng, e) < 0 ||
        add_norm(w, "output_norm.weight", c->dim, &rng, e) < 0 ||
        (!c->tied && add_matrix(w, "output.weight", t, c->vocab, c->dim, &rng, e) < 0))
        goto fail;
    for (int l = 0; l < c->n_layers; l++) {
        char name[64];
        /* Formats blk.<l>.<s>.weight into name; an expression, so the
         * tensors below read as one chain of checked calls. */
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s ".weight", l), name)
        if (add_norm(w, NAME("attn_norm"), c->dim, &rng, e) < 0 ||
            add_matrix(w, NAME("attn_q"), t, c->dim, c->dim, &rng, e) < 0 ||
            add_matrix(w, NAME("attn_k"), t, kv_dim, c->dim, &rng, e) < 0 ||
            add_matrix(w, NAME("attn_v"), t, kv_dim, c->dim, &rng, e) < 0 ||
            add_matrix(w, NAME("attn_output"), t, c->dim, c->dim, &rng, e) < 0 ||
            add_norm(w, NAME("ffn_norm"), c->dim, &rng, e) < 0 ||
            add_matrix(w, NAME("ffn_gate"), t, c->ffn, c->dim, &rng, e) < 0 ||
            add_matrix(w, NAME("ffn_up"), t, c->ffn, c->dim, &rng, e) < 0 ||
            add_matrix(w, NAME("ffn_down"), t, c->dim, c->ffn, &rng, e) < 0)
            goto fail;
#define BIAS(s) (snprintf(name, sizeof name, "blk.%d." s ".bias", l), name)
        if (c->qwen2 && (add_bias(w, BIAS("attn_q"), c->dim, &rng, e) < 0 ||
                         add_bias(w, BIAS("attn_k"), kv_dim, &rng, e) < 0 ||
                         add_bias(w, BIAS("attn_v"), kv_dim, &rng, e) < 0))
            goto fail;
#undef BIAS
#undef NAME
    }
    return w;
fail:
    gw_free(w);
    return NULL;
}

int synth_model_bytes(const synth_cfg *cfg, uint8_t **out, size_t *len, sd_err *e) {
    gw *w = build(cfg, e);
    if (!w) return -1;
    int rc = gw_bytes(w, out, len);
    gw_free(w);
    return rc < 0 ? sd_fail(e, "synth: out of memory serialising the model") : 0;
}

int synth_model_write(const synth_cfg *cfg, const char *path, sd_err *e) {
    gw *w = build(cfg, e);
    if (!w) return -1;
    int rc = gw_write(w, path);
    gw_free(w);
    return rc < 0 ? sd_fail(e, "synth: cannot write %s", path) : 0;
}

int synth_model_load(const synth_cfg *cfg, int n_ctx, int threads, synth_model *s, sd_err *e) {
    size_t len;
    memset(s, 0, sizeof *s);
    if (synth_model_bytes(cfg, &s->bytes, &len, e)) return -1;
    gguf_file *f = gguf_open_mem(s->bytes, len, "synth", e);
    if (f) {
        sd_model_opts o = {.n_ctx = n_ctx};
        s->m = sd_model_from_gguf(f, sd_backend_open(SD_DEVICE_CPU, threads, e), &o, e);
    }
    if (s->m) return 0;
    synth_model_free(s);
    return -1;
}

void synth_model_free(synth_model *s) {
    sd_model_free(s->m);
    free(s->bytes);
    memset(s, 0, sizeof *s);
}
