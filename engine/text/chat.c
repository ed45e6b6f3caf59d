/* Chat templates, recognised by their markers rather than executed (no
 * Jinja): ChatML (<|im_start|>), Llama-3 (<|start_header_id|>), Llama-2
 * ([INST]) and Zephyr (<|user|>). The output is one optional system turn,
 * one user turn and the assistant generation prompt, to be tokenized with
 * parse_special = 1. BOS is not written: the tokenizer adds it when the
 * model asks for it (add_bos_token).
 *
 * A ChatML template that writes a fixed system turn when the conversation
 * has none (SmolLM2: "<|im_start|>system\nYou are a helpful AI assistant
 * named SmolLM, ...<|im_end|>") has that default read out of its text. */
#include "engine/text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

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
        const char *p = find(tmpl, openers[i]);
        if (!p) continue;
        p += strlen(openers[i]);
        gguf_str rest = {p, (uint64_t)(tmpl.s + tmpl.len - p)};
        const char *end = find(rest, "<|im_end|>");
        if (!end || end == p) continue;
        size_t n = (size_t)(end - p);
        if (memchr(p, '\'', n) || memchr(p, '"', n) || memchr(p, '{', n) || memchr(p, '}', n))
            continue;
        return (gguf_str){p, n};
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
    add(b, s, n);
}

int sd_chat_format(const sd_tokenizer *t, const gguf_file *f, const char *system,
                   const char *user, char **out, sd_err *e) {
    *out = NULL;
    if (!user) return sd_fail(e, "chat format: no user message");
    gguf_str tmpl = t->chat_template;
    if (f) {
        int rc = gguf_get_str(f, "tokenizer.chat_template", &tmpl, e);
        if (rc < 0) return -1;
        if (rc == 1) tmpl.s = NULL;
    }
    if (!tmpl.s || !tmpl.len) return sd_fail(e, "model has no chat template");

    sbuf b = {NULL, 0, 0, 0};
    if (find(tmpl, "<|im_start|>")) {
        gguf_str dflt = chatml_default_system(tmpl);
        if (system || dflt.s) {
            adds(&b, "<|im_start|>system\n");
            if (system) adds(&b, system);
            else add(&b, dflt.s, dflt.len);
            adds(&b, "<|im_end|>\n");
        }
        adds(&b, "<|im_start|>user\n");
        adds(&b, user);
        adds(&b, "<|im_end|>\n<|im_start|>assistant\n");
    } else if (find(tmpl, "<|start_header_id|>")) {
        if (system) {
            adds(&b, "<|start_header_id|>system<|end_header_id|>\n\n");
            add_trimmed(&b, system);
            adds(&b, "<|eot_id|>");
        }
        adds(&b, "<|start_header_id|>user<|end_header_id|>\n\n");
        add_trimmed(&b, user);
        adds(&b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    } else if (find(tmpl, "[INST]")) {
        adds(&b, "[INST] ");
        if (system) {
            adds(&b, "<<SYS>>\n");
            adds(&b, system);
            adds(&b, "\n<</SYS>>\n\n");
        }
        adds(&b, user);
        adds(&b, " [/INST]");
    } else if (find(tmpl, "<|user|>")) {
        gguf_str eos = sd_tokenizer_piece(t, t->eos);
        if (!eos.s) eos = (gguf_str){"</s>", 4};
        if (system) {
            adds(&b, "<|system|>\n");
            adds(&b, system);
            add(&b, eos.s, eos.len);
            adds(&b, "\n");
        }
        adds(&b, "<|user|>\n");
        adds(&b, user);
        add(&b, eos.s, eos.len);
        adds(&b, "\n<|assistant|>\n");
    } else {
        char head[41];
        size_t n = tmpl.len < 40 ? (size_t)tmpl.len : 40;
        for (size_t i = 0; i < n; i++)
            head[i] = (unsigned char)tmpl.s[i] < 0x20 ? ' ' : tmpl.s[i];
        head[n] = 0;
        return sd_fail(e, "unknown chat template (%s%s)", head, tmpl.len > 40 ? "..." : "");
    }
    if (b.oom) {
        free(b.s);
        return sd_fail(e, "out of memory");
    }
    *out = b.s;
    return 0;
}
