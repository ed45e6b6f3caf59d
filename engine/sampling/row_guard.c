#include "engine/sampling/row_guard.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A NaN with a payload no arithmetic produces. */
#define CANARY_BITS 0x7fc0deadu

int sd_row_alloc(sd_guarded_row *r, int max) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t body = ((size_t)max + SD_ROW_CANARY) * sizeof(float);
    size_t len = (body + page - 1) / page * page + page;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        r->p = NULL;
        return -1;
    }
    if (mprotect((char *)m + len - page, page, PROT_NONE)) {
        munmap(m, len);
        r->p = NULL;
        return -1;
    }
    r->p = m;
    r->map_len = len;
    return 0;
}

void sd_row_free(sd_guarded_row *r) {
    if (r->p)
        munmap(r->p, r->map_len);
    r->p = NULL;
}

void sd_row_arm(float *row, int n) {
    const uint32_t bits = CANARY_BITS;
    for (int i = 0; i < SD_ROW_CANARY; i++)
        memcpy(&row[n + i], &bits, sizeof bits);
}

int sd_row_overrun(const float *row, int n) {
    uint32_t diff = 0;
    for (int i = 0; i < SD_ROW_CANARY; i++) {
        uint32_t b;
        memcpy(&b, &row[n + i], sizeof b);
        diff |= b ^ CANARY_BITS;
    }
    if (!diff)
        return -1;
    for (int i = 0;; i++) {
        uint32_t b;
        memcpy(&b, &row[n + i], sizeof b);
        if (b != CANARY_BITS)
            return i;
    }
}
