#include "engine/cli/json_out.h"

#include <math.h>

#include "engine/cli/settings.h"

static void key(sd_json_obj *j, const char *k) {
    fprintf(j->out, "%s\"%s\":", j->n++ ? "," : "", k);
}

/* Length of the valid UTF-8 sequence at s, or 0 when it is not valid. */
static int utf8_len(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    int n = (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || (n == 2 && s[0] < 0xc2)) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && s[0] == 0xe0 && s[1] < 0xa0) return 0;
    if (n == 3 && s[0] == 0xed && s[1] >= 0xa0) return 0;
    if (n == 4 && (s[0] > 0xf4 || (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)))
        return 0;
    return n;
}

static void str(FILE *out, const char *v) {
    const unsigned char *s = (const unsigned char *)v;
    fputc('"', out);
    while (*s) {
        unsigned char c = *s;
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
            s++;
        } else if (c == '\n') {
            fputs("\\n", out);
            s++;
        } else if (c == '\t') {
            fputs("\\t", out);
            s++;
        } else if (c == '\r') {
            fputs("\\r", out);
            s++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            s++;
        } else {
            int n = utf8_len(s);
            if (n == 0) {
                fputs("\\ufffd", out);
                s++;
            } else {
                fwrite(s, 1, (size_t)n, out);
                s += n;
            }
        }
    }
    fputc('"', out);
}

void sd_json_begin(sd_json_obj *j, FILE *out) {
    j->out = out;
    j->n = 0;
    fputc('{', out);
}

void sd_json_str(sd_json_obj *j, const char *k, const char *v) {
    key(j, k);
    str(j->out, v);
}

void sd_json_int(sd_json_obj *j, const char *k, long v) {
    key(j, k);
    fprintf(j->out, "%ld", v);
}

void sd_json_u64(sd_json_obj *j, const char *k, uint64_t v) {
    key(j, k);
    fprintf(j->out, "%llu", (unsigned long long)v);
}

static void num(FILE *out, double v) {
    if (isfinite(v))
        fprintf(out, "%.6g", v);
    else
        fputs("null", out);
}

void sd_json_num(sd_json_obj *j, const char *k, double v) {
    key(j, k);
    num(j->out, v);
}

void sd_json_nums(sd_json_obj *j, const char *k, const double *v, int n) {
    key(j, k);
    fputc('[', j->out);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', j->out);
        num(j->out, v[i]);
    }
    fputc(']', j->out);
}

void sd_json_ids(sd_json_obj *j, const char *k, const int32_t *ids, int n) {
    key(j, k);
    fputc('[', j->out);
    for (int i = 0; i < n; i++) fprintf(j->out, "%s%d", i ? "," : "", ids[i]);
    fputc(']', j->out);
}

void sd_json_end(sd_json_obj *j) {
    fputc('}', j->out);
}

void sd_json_obj_in(sd_json_obj *j, const char *k, sd_json_obj *inner) {
    key(j, k);
    sd_json_begin(inner, j->out);
}

void sd_json_key(sd_json_obj *j, const char *k) { key(j, k); }

void sd_json_bool(sd_json_obj *j, const char *k, int v) {
    key(j, k);
    fputs(v ? "true" : "false", j->out);
}

void sd_json_null(sd_json_obj *j, const char *k) {
    key(j, k);
    fputs("null", j->out);
}

void sd_json_settings(sd_json_obj *j, const sd_args *a) {
    for (size_t i = 0; i < sd_n_settings; i++) {
        const sd_setting *s = &sd_settings[i];
        if (!s->echo) continue;
        char name[64], v[512];
        sd_setting_name(s, name, sizeof name);
        const char *field = (const char *)a + s->off;
        switch (s->kind) {
        case SD_SET_ON:
        case SD_SET_OFF: sd_json_bool(j, name, (*(const int *)field) == (s->kind == SD_SET_ON)); break;
        case SD_SET_INT: sd_json_int(j, name, *(const int *)field); break;
        case SD_SET_NUM: sd_json_num(j, name, *(const double *)field); break;
        case SD_SET_U64: sd_json_u64(j, name, *(const uint64_t *)field); break;
        case SD_SET_STR:
            if (*(const char *const *)field) sd_json_str(j, name, *(const char *const *)field);
            else sd_json_null(j, name);
            break;
        case SD_SET_LIST: {
            const char *const *list = (const char *const *)field;
            int n = *(const int *)((const char *)a + s->count_off);
            key(j, name);
            fputc('[', j->out);
            for (int k = 0; k < n; k++) {
                if (k) fputc(',', j->out);
                str(j->out, list[k]);
            }
            fputc(']', j->out);
            break;
        }
        case SD_SET_CHOICE:
        case SD_SET_STRATEGIES:
            if (sd_setting_format(s, a, v, sizeof v)[0]) sd_json_str(j, name, v);
            else sd_json_null(j, name); /* --draft-device: as --device */
            break;
        }
    }
}
