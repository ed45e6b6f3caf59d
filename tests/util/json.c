#include "tests/util/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 256

struct json {
    int kind;
    double num;
    char *str;     /* JSON_STR: decoded bytes, NUL-terminated */
    size_t len;    /* JSON_STR: byte length; JSON_ARR/OBJ: element count */
    json **items;  /* JSON_ARR/OBJ elements */
    char **keys;   /* JSON_OBJ keys, parallel to items */
    size_t cap;
};

typedef struct parser {
    const char *p;
    const char *end;
    int depth;
} parser;

static json *parse_value(parser *ps);

static void skip_ws(parser *ps) {
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static json *node(int kind) {
    json *j = calloc(1, sizeof *j);
    if (j) j->kind = kind;
    return j;
}

void json_free(json *j) {
    if (!j) return;
    for (size_t i = 0; i < j->len && j->items; i++) {
        json_free(j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->str);
    free(j);
}

typedef struct sbuf {
    char *b;
    size_t n, cap;
} sbuf;

static int sbuf_put(sbuf *s, const char *src, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 16;
        while (cap < s->n + n + 1) cap *= 2;
        char *b = realloc(s->b, cap);
        if (!b) return -1;
        s->b = b;
        s->cap = cap;
    }
    memcpy(s->b + s->n, src, n);
    s->n += n;
    s->b[s->n] = 0;
    return 0;
}

static int hex4(parser *ps, unsigned *out) {
    if (ps->end - ps->p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

static int put_utf8(sbuf *s, unsigned cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return sbuf_put(s, b, n);
}

/* Parses a string literal at ps->p (which is '"') into s. */
static int parse_string_raw(parser *ps, sbuf *s) {
    ps->p++;
    if (sbuf_put(s, "", 0)) return -1;
    while (ps->p < ps->end) {
        const char *run = ps->p;
        while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' &&
               (unsigned char)*ps->p >= 0x20)
            ps->p++;
        if (ps->p > run && sbuf_put(s, run, (size_t)(ps->p - run))) return -1;
        if (ps->p >= ps->end) return -1;
        char c = *ps->p++;
        if (c == '"') return 0;
        if (c != '\\') return -1; /* raw control character */
        if (ps->p >= ps->end) return -1;
        char esc = *ps->p++;
        char ch;
        switch (esc) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            unsigned cp;
            if (hex4(ps, &cp)) return -1;
            if (cp >= 0xD800 && cp < 0xDC00) {
                unsigned lo;
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') return -1;
                ps->p += 2;
                if (hex4(ps, &lo) || lo < 0xDC00 || lo > 0xDFFF) return -1;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                return -1; /* lone low surrogate */
            }
            if (put_utf8(s, cp)) return -1;
            continue;
        }
        default: return -1;
        }
        if (sbuf_put(s, &ch, 1)) return -1;
    }
    return -1;
}

static json *parse_string(parser *ps) {
    sbuf s = {0};
    if (parse_string_raw(ps, &s)) {
        free(s.b);
        return NULL;
    }
    json *j = node(JSON_STR);
    if (!j) {
        free(s.b);
        return NULL;
    }
    j->str = s.b;
    j->len = s.n;
    return j;
}

static json *parse_number(parser *ps) {
    const char *start = ps->p;
    const char *q = ps->p;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end || *q < '0' || *q > '9') return NULL;
    if (*q == '0') q++;
    else while (q < ps->end && *q >= '0' && *q <= '9') q++;
    if (q < ps->end && *q == '.') {
        q++;
        if (q >= ps->end || *q < '0' || *q > '9') return NULL;
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || *q < '0' || *q > '9') return NULL;
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    char tmp[64];
    size_t n = (size_t)(q - start);
    char *buf = n < sizeof tmp ? tmp : malloc(n + 1);
    if (!buf) return NULL;
    memcpy(buf, start, n);
    buf[n] = 0;
    json *j = node(JSON_NUM);
    if (j) j->num = strtod(buf, NULL);
    if (buf != tmp) free(buf);
    ps->p = q;
    return j;
}

static int push_item(json *j, json *item, char *key) {
    if (j->len == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 8;
        json **items = realloc(j->items, cap * sizeof *items);
        if (!items) return -1;
        j->items = items;
        if (j->kind == JSON_OBJ) {
            char **keys = realloc(j->keys, cap * sizeof *keys);
            if (!keys) return -1;
            j->keys = keys;
        }
        j->cap = cap;
    }
    j->items[j->len] = item;
    if (j->kind == JSON_OBJ) j->keys[j->len] = key;
    j->len++;
    return 0;
}

static json *parse_container(parser *ps, int kind) {
    char close = kind == JSON_ARR ? ']' : '}';
    if (++ps->depth > JSON_MAX_DEPTH) return NULL;
    ps->p++;
    json *j = node(kind);
    if (!j) return NULL;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return j;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(ps);
        if (kind == JSON_OBJ) {
            sbuf s = {0};
            if (ps->p >= ps->end || *ps->p != '"' || parse_string_raw(ps, &s)) {
                free(s.b);
                goto fail;
            }
            key = s.b;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                goto fail;
            }
            ps->p++;
        }
        json *item = parse_value(ps);
        if (!item || push_item(j, item, key)) {
            json_free(item);
            free(key);
            goto fail;
        }
        skip_ws(ps);
        if (ps->p >= ps->end) goto fail;
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            ps->depth--;
            return j;
        }
        goto fail;
    }
fail:
    json_free(j);
    return NULL;
}

static int literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) return -1;
    ps->p += n;
    return 0;
}

static json *parse_value(parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) return NULL;
    json *j;
    switch (*ps->p) {
    case '{': return parse_container(ps, JSON_OBJ);
    case '[': return parse_container(ps, JSON_ARR);
    case '"': return parse_string(ps);
    case 't':
        if (literal(ps, "true")) return NULL;
        j = node(JSON_BOOL);
        if (j) j->num = 1;
        return j;
    case 'f':
        if (literal(ps, "false")) return NULL;
        return node(JSON_BOOL);
    case 'n':
        if (literal(ps, "null")) return NULL;
        return node(JSON_NULL);
    default: return parse_number(ps);
    }
}

json *json_parse(const char *text, size_t len) {
    if (!text) return NULL;
    parser ps = {text, text + len, 0};
    json *j = parse_value(&ps);
    if (!j) return NULL;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        json_free(j);
        return NULL;
    }
    return j;
}

int json_kind(const json *j) { return j ? j->kind : JSON_NULL; }

const json *json_get(const json *obj, const char *key) {
    if (!obj || obj->kind != JSON_OBJ || !key) return NULL;
    for (size_t i = 0; i < obj->len; i++)
        if (!strcmp(obj->keys[i], key)) return obj->items[i];
    return NULL;
}

size_t json_len(const json *arr) {
    return arr && (arr->kind == JSON_ARR || arr->kind == JSON_OBJ) ? arr->len : 0;
}

const json *json_at(const json *arr, size_t i) {
    return i < json_len(arr) ? arr->items[i] : NULL;
}

double json_num(const json *j) {
    return j && (j->kind == JSON_NUM || j->kind == JSON_BOOL) ? j->num : 0;
}

const char *json_str(const json *j, size_t *len) {
    if (!j || j->kind != JSON_STR) return NULL;
    if (len) *len = j->len;
    return j->str;
}

static char *read_file(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            char *b = realloc(buf, cap + 1);
            if (!b) {
                free(buf);
                fclose(fp);
                return NULL;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *size = n;
    return buf;
}

void jsonl_free(json **records, long n) {
    if (!records) return;
    for (long i = 0; i < n; i++) json_free(records[i]);
    free(records);
}

long jsonl_read(const char *path, json ***records) {
    size_t size;
    char *buf = read_file(path, &size);
    if (!buf) return -1;
    json **out = NULL;
    long n = 0, cap = 0;
    const char *p = buf, *end = buf + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;
        const char *q = p;
        while (q < line_end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q < line_end) {
            json *j = json_parse(p, (size_t)(line_end - p));
            if (!j) goto fail;
            if (n == cap) {
                long ncap = cap ? cap * 2 : 16;
                json **o = realloc(out, (size_t)ncap * sizeof *o);
                if (!o) {
                    json_free(j);
                    goto fail;
                }
                out = o;
                cap = ncap;
            }
            out[n++] = j;
        }
        p = nl ? nl + 1 : end;
    }
    free(buf);
    *records = out;
    return n;
fail:
    jsonl_free(out, n);
    free(buf);
    return -1;
}
