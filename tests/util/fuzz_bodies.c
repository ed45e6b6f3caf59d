/* Harness bodies for the GGUF, tokenizer and sampler-argument fuzzers (see
 * fuzz_bodies.h). Each keeps the input in the buffer libFuzzer hands over
 * (exactly size bytes, so an over-read is an ASan report) or in an
 * exactly-sized copy when the library needs a NUL-terminated string. */
#include "tests/util/fuzz_bodies.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/model/model.h"
#include "engine/session/device.h"
#include "engine/sampling/sampler_host.h"
#include "engine/text/tokenizer_int.h"
#include "engine/format/gguf_writer.h"

/* Setting up a fixture is not fuzzing: a missing file is a broken checkout,
 * reported loudly instead of silently fuzzing nothing. */
static void fixture_fail(const char *what, const sd_err *e) {
    fprintf(stderr, "fuzz fixture: %s: %s\n", what, e ? e->msg : "out of memory");
    abort();
}

/* A NUL-terminated copy of data[0..n) (the input may hold NUL bytes: the
 * C-string APIs then see its first part only). */
static char *cstr(const uint8_t *data, size_t n) {
    char *s = malloc(n + 1);
    if (!s) fixture_fail("copy", NULL);
    memcpy(s, data, n);
    s[n] = 0;
    return s;
}

/* ---- what every harness does with a tokenizer ----------------------------
 * Encode text both ways, decode the result (whole and streamed through an
 * output buffer of cap bytes), format it as a chat turn and encode that. */
static void decode_all(const sd_tokenizer *t, const int32_t *ids, int n, int strip, size_t cap) {
    sd_err e;
    char *whole;
    if (!sd_detokenize(t, ids, n, strip, &whole, &e)) free(whole);
    char *buf = malloc(cap);
    if (!buf) fixture_fail("decode buffer", NULL);
    sd_detok st = {{0}, 0, strip};
    for (int i = 0; i < n; i++) sd_detok_push(t, &st, ids[i], buf, cap, &e);
    sd_detok_flush(&st, buf, cap);
    free(buf);
}

static void exercise_tokenizer(const sd_tokenizer *t, const gguf_file *f, const char *text,
                               size_t len, unsigned flags) {
    sd_err e;
    int32_t *ids;
    int n;
    static const size_t caps[] = {1, 2, 3, 4, 8, 16, 64, 256};
    size_t cap = caps[(flags >> 5) & 7];
    if (!sd_tokenize(t, text, len, flags & 8, flags & 4, &ids, &n, &e)) {
        decode_all(t, ids, n, flags & 16, cap);
        free(ids);
    }
    int32_t stop[16];
    sd_tokenizer_stop_ids(t, stop, 16);
    char *user = malloc(len + 1), *chat;
    if (!user) fixture_fail("chat text", NULL);
    memcpy(user, text, len);
    user[len] = 0;
    if (!sd_chat_format(t, f, (flags & 1) ? user : NULL, user, &chat, &e)) free(chat);
    if (!sd_chat_tokenize(t, f, (flags & 1) ? user : NULL, user, 1, &ids, &n, &e)) free(ids);
    free(user);
}

/* ---- fuzz_gguf: reader, then tokenizer and model from the parsed file ---- */
void sd_fuzz_gguf(const uint8_t *data, size_t size) {
    sd_err e;
    gguf_file *f = gguf_open_mem(data, size, "fuzz.gguf", &e);
    if (!f) return;
    int64_t iv;
    double fv;
    gguf_str sv;
    const gguf_value *av;
    gguf_get_int(f, "general.alignment", &iv, &e);
    gguf_get_float(f, "llama.rope.freq_base", &fv, &e);
    gguf_get_str(f, "general.architecture", &sv, &e);
    gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &av, &e);

    /* A forged vocabulary drives every tokenizer path the fixed ones cannot. */
    sd_tokenizer *t = sd_tokenizer_load(f, &e);
    if (t) {
        static const char text[] = "Hello world, <|im_start|>user\n123 4567 \xE2\x96\x81x \xF0\x9F\x98\x80 "
                                   "<s>\xC3(\xFF</s> it's  done.\n\n";
        exercise_tokenizer(t, f, text, sizeof text - 1, 0x3d);
        int nv = sd_tokenizer_n_vocab(t);
        int n = nv < 512 ? nv : 512;
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        if (!ids) fixture_fail("ids", NULL);
        for (int i = 0; i < n; i++) ids[i] = nv - 1 - i;
        decode_all(t, ids, n, 1, 16);
        free(ids);
        sd_tokenizer_free(t);
    }

    /* Model construction takes the file; a tiny context keeps it cheap. */
    sd_model_opts o = {.n_ctx = 16};
    sd_model *m = sd_model_from_gguf(f, sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e);
    if (!m) return;
    int32_t tok = sd_tokenizer_bos(m->tok) >= 0 ? sd_tokenizer_bos(m->tok) : 0;
    float *logits = malloc((size_t)m->hp.vocab * sizeof *logits);
    if (!logits) fixture_fail("logits", NULL);
    sd_forward(m, &tok, 1, 0, logits, &e);
    free(logits);
    char desc[256];
    sd_model_describe(m, desc, sizeof desc);
    sd_model_free(m);
}

/* ---- fuzz_tokenizer: fixed tokenizers, fuzzed text and ids ----------------
 * stories260K (llama kind), a small in-memory gpt2-kind vocabulary with the
 * llama3 pre-tokenizer (merges, ignore_merges, control and user-defined
 * tokens, a ChatML template), and SmolLM2's real byte-level BPE when the
 * model has been fetched. */
#define MAX_TOK 3
static struct {
    int ready, n;
    gguf_file *file[MAX_TOK];
    sd_tokenizer *tok[MAX_TOK];
    uint8_t *mem; /* the in-memory gpt2 file */
} tk;

static uint8_t *gpt2_vocab_gguf(size_t *len) {
    static const char *const extra[][2] = {
        {"\xC4\xA0", "t"}, {"h", "e"}, {"t", "he"}, {"\xC4\xA0t", "he"}, {"i", "n"},
        {"\xC4\xA0", "a"}, {"1", "2"}, {"12", "3"}};
    static const char *const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                           "<tool>"};
    enum { N_EXTRA = sizeof extra / sizeof extra[0], N_SPECIAL = sizeof specials / sizeof specials[0] };
    enum { N = 256 + N_EXTRA + N_SPECIAL };
    char bytes[256][3], cat[N_EXTRA][16], merge[N_EXTRA][16];
    const char *tokens[N], *merges[N_EXTRA];
    int32_t types[N];
    for (unsigned b = 0; b < 256; b++) {
        int n = sd_bpe_byte_utf8(b, bytes[b]);
        bytes[b][n] = 0;
        tokens[b] = bytes[b];
        types[b] = SD_TT_NORMAL;
    }
    for (int i = 0; i < N_EXTRA; i++) {
        snprintf(cat[i], sizeof cat[i], "%s%s", extra[i][0], extra[i][1]);
        snprintf(merge[i], sizeof merge[i], "%s %s", extra[i][0], extra[i][1]);
        tokens[256 + i] = cat[i];
        types[256 + i] = SD_TT_NORMAL;
        merges[i] = merge[i];
    }
    for (int i = 0; i < N_SPECIAL; i++) {
        tokens[256 + N_EXTRA + i] = specials[i];
        types[256 + N_EXTRA + i] = i == N_SPECIAL - 1 ? SD_TT_USER_DEFINED : SD_TT_CONTROL;
    }
    gw *w = gw_new(3);
    gw_str(w, "tokenizer.ggml.model", "gpt2");
    gw_str(w, "tokenizer.ggml.pre", "llama3");
    gw_arr_str(w, "tokenizer.ggml.tokens", tokens, N);
    gw_arr_i32(w, "tokenizer.ggml.token_type", types, N);
    gw_arr_str(w, "tokenizer.ggml.merges", merges, N_EXTRA);
    gw_u32(w, "tokenizer.ggml.bos_token_id", 256 + N_EXTRA);
    gw_u32(w, "tokenizer.ggml.eos_token_id", 256 + N_EXTRA + 2);
    gw_str(w, "tokenizer.chat_template",
           "{% for m in messages %}<|im_start|>system\nYou are a test.<|im_end|>{% endfor %}");
    uint8_t *out = NULL;
    if (gw_bytes(w, &out, len)) fixture_fail("gpt2 vocabulary", NULL);
    gw_free(w);
    return out;
}

static void add_tokenizer(gguf_file *f, const char *what) {
    sd_err e;
    if (!f) fixture_fail(what, NULL);
    sd_tokenizer *t = sd_tokenizer_load(f, &e);
    if (!t) fixture_fail(what, &e);
    tk.file[tk.n] = f;
    tk.tok[tk.n++] = t;
}

static void tokenizers_init(void) {
    sd_err e;
    const char *llama = "tests/data/models/stories260K.gguf";
    const char *smollm = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    gguf_file *f = gguf_open(llama, &e);
    if (!f) fixture_fail(llama, &e);
    add_tokenizer(f, llama);
    size_t len;
    tk.mem = gpt2_vocab_gguf(&len);
    f = gguf_open_mem(tk.mem, len, "gpt2-vocab", &e);
    if (!f) fixture_fail("gpt2 vocabulary", &e);
    add_tokenizer(f, "gpt2 vocabulary");
    struct stat st;
    if (stat(smollm, &st) == 0) {
        f = gguf_open(smollm, &e);
        if (!f) fixture_fail(smollm, &e);
        add_tokenizer(f, smollm);
    }
    tk.ready = 1;
}

/* Input: byte 0 picks the tokenizer (bits 0-1) and the flags exercise_tokenizer
 * reads (system message, parse_special, BOS, strip_space, decode buffer size);
 * the rest is the text, and, read as 16-bit values, ids to decode (a few
 * below 0 and past the vocabulary included). */
void sd_fuzz_tokenizer(const uint8_t *data, size_t size) {
    if (!tk.ready) tokenizers_init();
    if (size < 1) return;
    unsigned flags = data[0];
    const sd_tokenizer *t = tk.tok[(flags & 3) % tk.n];
    const gguf_file *f = tk.file[(flags & 3) % tk.n];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    exercise_tokenizer(t, f, text, len, flags);
    int nv = sd_tokenizer_n_vocab(t), n = (int)(len / 2);
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) fixture_fail("ids", NULL);
    for (int i = 0; i < n; i++) {
        unsigned v = (unsigned)data[1 + 2 * i] | (unsigned)data[2 + 2 * i] << 8;
        ids[i] = (int32_t)(v % (unsigned)(nv + 8)) - 4;
    }
    decode_all(t, ids, n, flags & 16, 64);
    free(ids);
}

/* ---- fuzz_sampler_args: parameter parsing against the built plugins -------
 * Input: byte 0 picks a sampler (one past the last: the first line is taken
 * as the name), byte 1 the vocabulary size; the rest is newline-separated
 * "key=value" strings. sd_sampler_check must reject exactly what
 * sd_sampler_create rejects before calling the plugin; a sampler that gets
 * made also runs once. */
#define MAX_KV 16
static sd_sampler_set *samplers;

void sd_fuzz_sampler_args(const uint8_t *data, size_t size) {
    sd_err e;
    if (!samplers) {
        const char *dirs[] = {"plugins", "plugins/example"};
        samplers = sd_samplers_open(dirs, 2, &e);
        if (!samplers || sd_samplers_count(samplers) == 0) fixture_fail("plugins/ (run make)", &e);
    }
    if (size < 2) return;
    int pick = data[0] % (sd_samplers_count(samplers) + 1);
    int vocab = 1 + data[1] % 64;
    char *text = cstr(data + 2, size - 2);
    const char *kv[MAX_KV];
    int n_kv = 0;
    const char *name = pick < sd_samplers_count(samplers) ? sd_samplers_name(samplers, pick) : NULL;
    for (char *p = text, *nl; p && n_kv < MAX_KV; p = nl) {
        nl = strchr(p, '\n');
        if (nl) *nl++ = 0;
        if (!name) name = p;
        else kv[n_kv++] = p;
    }
    int bad;
    int checked = sd_sampler_check(samplers, name ? name : "", kv, n_kv, &bad, &e) == 0;
    sd_sampler *smp = sd_sampler_create(samplers, name ? name : "", kv, n_kv, vocab, &e);
    /* The built-ins' create() fails only when out of memory. */
    if (checked != (smp != NULL)) abort();
    if (smp) {
        char desc[256];
        sd_sampler_describe(smp, desc, sizeof desc);
        sd_sampler_is_greedy(smp);
        float logits[64], probs[64];
        for (int i = 0; i < vocab; i++) logits[i] = (float)(3.0 * sin(i * 1.7)) + (i % 3 == 0);
        sd_rng r;
        sd_rng_seed(&r, size);
        int32_t id;
        if (!sd_sampler_probs(smp, logits, probs, 1, vocab, &e))
            sd_sampler_sample(smp, probs, vocab, &r, &id, &e);
        sd_sampler_destroy(smp);
    }
    free(text);
}

void sd_fuzz_teardown(void) {
    for (int i = 0; i < tk.n; i++) {
        sd_tokenizer_free(tk.tok[i]);
        gguf_close(tk.file[i]);
    }
    free(tk.mem);
    memset(&tk, 0, sizeof tk);
    sd_samplers_close(samplers);
    samplers = NULL;
}
