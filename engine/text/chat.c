/* Chat templates, recognised by their markers rather than executed (no
 * Jinja): ChatML (<|im_start|>), Llama-3 (<|start_header_id|>), Llama-2
 * ([INST]) and Zephyr (<|user|>). The output is one optional system turn,
 * one user turn and the assistant generation prompt. sd_chat_tokenize
 * tokenizes it with parse_special = 1 while keeping the caller's system and
 * user text plain (sd_tokenize_ex spans), so only the template's markers
 * become control tokens. BOS is not written: the tokenizer adds it when the
 * model asks for it (add_bos_token).
 *
 * A ChatML template that writes a fixed system turn when the conversation
 * has none (SmolLM2: "<|im_start|>system\nYou are a helpful AI assistant
 * named SmolLM, ...<|im_end|>"; Qwen2.5: "You are Qwen, created by Alibaba
 * Cloud. You are a helpful assistant.") has that default read out of its
 * text. A qwen2 tokenizer without a template gets Qwen's ChatML built in. */
#include "engine/text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
    sd_span plain[2]; /* the system and user text */
    int n_plain;
} sbuf;

/* What Qwen2.5's own template writes when no system message is given. */
static const char qwen_chatml[] =
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\n";

static void add(sbuf *b, const char *p, size_t n) {
    if (b->oom) return;
    if (sd_grow((void **)&b->s, &b->cap, b->n + n + 1, 1)) {
        b->oom = 1;
        return;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void adds(sbuf *b, const char *p) { add(b, p, strlen(p)); }

/* The caller's own text: recorded as a plain span. */
static void add_plain(sbuf *b, const char *p, size_t n) {
    b->plain[b->n_plain++] = (sd_span){b->n, n};
    add(b, p, n);
}

static void adds_plain(sbuf *b, const char *p) { add_plain(b, p, strlen(p)); }

static const char *find(gguf_str hay, const char *needle) {
    return memmem(hay.s, hay.len, needle, strlen(needle));
}

/* The fixed system text of a ChatML template, if it has one: literal text
 * between "<|im_start|>system" + newline and "<|im_end|>" that holds no
 * template syntax (quotes or braces). */
static gguf_str chatml_default_system(gguf_str tmpl) {
    static const char *const openers[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
    gguf_str none = {NULL, 0};
    for (size_t i = 0; i < sizeof openers / sizeof openers[0]; i++) {
        gguf_str rest = tmpl;
        const char *p;
        while ((p = find(rest, openers[i]))) {
            p += strlen(openers[i]);
            rest = (gguf_str){p, (uint64_t)(tmpl.s + tmpl.len - p)};
            const char *end = find(rest, "<|im_end|>");
            if (!end) break;
            size_t n = (size_t)(end - p);
            if (!n || memchr(p, '\'', n) || memchr(p, '"', n) || memchr(p, '{', n) ||
                memchr(p, '}', n))
                continue;
            return (gguf_str){p, n};
        }
    }
    return none;
}

/* Content without leading and trailing whitespace (Llama-3 templates trim). */
static void add_trimmed(sbuf *b, const char *s) {
    size_t n = strlen(s);
    while (n && strchr(" \t\r\n", s[n - 1])) n--;
    while (n && strchr(" \t\r\n", *s)) {
        s++;
        n--;
    }
    add_plain(b, s, n);
}

/* Renders the chat into *b (its spans mark the system and user text). */
static int render(const sd_tokenizer *t, const gguf_file *f, const char *system,
                  const char *user, sbuf *b, sd_err *e) {
    if (!user) return sd_fail(e, "chat format: no user message");
    gguf_str tmpl = t->chat_template;
    if (f) {
        int rc = gguf_get_str(f, "tokenizer.chat_template", &tmpl, e);
        if (rc < 0) return -1;
        if (rc == 1) tmpl.s = NULL;
    }
    if ((!tmpl.s || !tmpl.len) && t->pre && !strcmp(t->pre, "qwen2"))
        tmpl = (gguf_str){qwen_chatml, sizeof qwen_chatml - 1};
    if (!tmpl.s || !tmpl.len) return sd_fail(e, "model has no chat template");

    if (find(tmpl, "<|im_start|>")) {
        gguf_str dflt = chatml_default_system(tmpl);
        if (system || dflt.s) {
            adds(b, "<|im_start|>system\n");
            if (system) adds_plain(b, system);
            else add(b, dflt.s, dflt.len);
            adds(b, "<|im_end|>\n");
        }
        adds(b, "<|im_start|>user\n");
        adds_plain(b, user);
        adds(b, "<|im_end|>\n<|im_start|>assistant\n");
    } else if (find(tmpl, "<|start_header_id|>")) {
        if (system) {
            adds(b, "<|start_header_id|>system<|end_header_id|>\n\n");
            add_trimmed(b, system);
            adds(b, "<|eot_id|>");
        }
        adds(b, "<|start_header_id|>user<|end_header_id|>\n\n");
        add_trimmed(b, user);
        adds(b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    } else if (find(tmpl, "[INST]")) {
        adds(b, "[INST] ");
        if (system) {
            adds(b, "<<SYS>>\n");
            adds_plain(b, system);
            adds(b, "\n<</SYS>>\n\n");
        }
        adds_plain(b, user);
        adds(b, " [/INST]");
    } else if (find(tmpl, "<|user|>")) {
        gguf_str eos = sd_tokenizer_piece(t, t->eos);
        if (!eos.s) eos = (gguf_str){"</s>", 4};
        if (system) {
            adds(b, "<|system|>\n");
            adds_plain(b, system);
            add(b, eos.s, eos.len);
            adds(b, "\n");
        }
        adds(b, "<|user|>\n");
        adds_plain(b, user);
        add(b, eos.s, eos.len);
        adds(b, "\n<|assistant|>\n");
    } else {
        char head[41];
        size_t n = tmpl.len < 40 ? (size_t)tmpl.len : 40;
        for (size_t i = 0; i < n; i++)
            head[i] = (unsigned char)tmpl.s[i] < 0x20 ? ' ' : tmpl.s[i];
        head[n] = 0;
        return sd_fail(e, "unknown chat template (%s%s)", head, tmpl.len > 40 ? "..." : "");
    }
    if (b->oom) return sd_fail(e, "out of memory");
    return 0;
}

int sd_chat_format(const sd_tokenizer *t, const gguf_file *f, const char *system,
                   const char *user, char **out, sd_err *e) {
    sbuf b = {0};
    *out = NULL;
    if (render(t, f, system, user, &b, e)) {
        free(b.s);
        return -1;
    }
    *out = b.s;
    return 0;
}

int sd_chat_tokenize(const sd_tokenizer *t, const gguf_file *f, const char *system,
                     const char *user, int add_bos, int32_t **ids, int *n, sd_err *e) {
    sbuf b = {0};
    *ids = NULL;
    *n = 0;
    int rc = render(t, f, system, user, &b, e);
    if (!rc) rc = sd_tokenize_ex(t, b.s, b.n, add_bos, 1, b.plain, b.n_plain, ids, n, e);
    free(b.s);
    return rc;
}
