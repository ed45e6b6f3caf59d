/* A plugin is native code: its constructor, its descriptor function or its
 * self-test may crash, hang or call abort(). Each file is therefore first
 * opened and self-tested in a forked child, which reports back over a pipe;
 * the parent dlopens only a file its child found good, and a probe that
 * dies or overruns SD_PROBE_TIMEOUT_MS becomes a warning naming the signal,
 * the exit status or the time limit, and the phase it was in. */
#include "engine/sampling/plugin_probe.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/sampling/sampler_host.h"
#include "engine/sampling/self_test.h"
#include "engine/sampling/stage_v1.h"

/* Phases the child announces, one byte each, before the report ('R'). */
#define PHASE_LOAD 'L'
#define PHASE_DESC 'D'
#define PHASE_TEST 'T'
#define PHASE_REPORT 'R'


static void format_entry(FILE *out, const stage_def *d, const char *file) {
    fprintf(out, "%s  (%s)\n    ABI v%d, %s stage%s\n", d->d.name, file, d->abi,
            d->d.kind == SD_STAGE_LOGITS ? "logits" : "sampling", d->history ? ", keeps history" : "");
    if (d->d.description && d->d.description[0])
        fprintf(out, "    %s\n", d->d.description);
    for (int j = 0; j < d->d.n_params; j++) {
        const sd_sampler_param *p = &d->d.params[j];
        if (p->type == SD_SAMPLER_STRING) {
            sd_sampler_value v[SD_SAMPLER_MAX_PARAMS];
            sd_stage_defaults(d, v);
            fprintf(out, "    %-14s string default \"%.60s\" %s\n", p->name, v[j].s,
                    p->help ? p->help : "");
            continue;
        }
        char r[96];
        sd_param_range(p, r, sizeof r);
        fprintf(out, "    %-14s %-5s default %-8.15g range %-18s %s\n", p->name,
                p->type == SD_SAMPLER_INT ? "int" : "float", p->def, r, p->help ? p->help : "");
    }
}

/* dlerror() usually starts with the path it was given; the warning already
 * does. */
static const char *strip_path(const char *msg, const char *path) {
    size_t n = strlen(path);
    if (!strncmp(msg, path, n) && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

static const char *machine_name(unsigned m) {
    switch (m) {
    case EM_386: return "x86";
    case EM_X86_64: return "x86-64";
    case EM_ARM: return "ARM";
    case EM_AARCH64: return "AArch64";
    case EM_PPC64: return "PowerPC64";
    case EM_RISCV: return "RISC-V";
    case EM_S390: return "S390";
    default: return "unknown";
    }
}

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#else
#define HOST_MACHINE 0
#endif
#define HOST_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)

/* Reads the ELF header, without running anything: glibc reports a foreign
 * machine as "No such file or directory" (it skips such files while
 * searching), so the class and machine are compared here. Returns 1 with
 * why filled when the file is an ELF object for another architecture. */
static int foreign_elf(const char *path, char *why, size_t len) {
    unsigned char h[20];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got < sizeof h || memcmp(h, ELFMAG, SELFMAG))
        return 0;
    unsigned machine = h[EI_DATA] == ELFDATA2MSB ? (unsigned)h[18] << 8 | h[19]
                                                 : (unsigned)h[19] << 8 | h[18];
    int bits = h[EI_CLASS] == ELFCLASS64 ? 64 : h[EI_CLASS] == ELFCLASS32 ? 32 : 0;
    if (h[EI_CLASS] == HOST_CLASS && (HOST_MACHINE == 0 || machine == HOST_MACHINE))
        return 0;
    snprintf(why, len,
             "built for another architecture (ELF %d-bit, machine %u %s; this engine is "
             "%d-bit %s)",
             bits, machine, machine_name(machine), HOST_CLASS == ELFCLASS64 ? 64 : 32,
             machine_name(HOST_MACHINE));
    return 1;
}

/* A dlopen failure, with glibc's architecture messages named as such. */
static void dlopen_reason(const char *path, char *why, size_t len) {
    const char *msg = dlerror();
    msg = msg ? strip_path(msg, path) : "unknown error";
    if (strstr(msg, "wrong ELF class") || strstr(msg, "ELF file's machine") ||
        strstr(msg, "ELF load command"))
        snprintf(why, len, "built for another architecture (dlopen failed: %s)", msg);
    else
        snprintf(why, len, "dlopen failed: %s", msg);
}

/* Opens path and fills def with its checked descriptor (-1 with why).
 * phase, when given, is told each step before plugin code runs. The
 * version-2 entry point wins when a file has both. */
int sd_plugin_open(const char *path, void **dl, stage_def *def, void (*phase)(int c), char *why,
                   size_t len) {
    dlerror();
    if (phase)
        phase(PHASE_LOAD);
    /* RTLD_NOW: unresolved symbols fail here, not in the middle of a run. */
    *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) {
        dlopen_reason(path, why, len);
        return -1;
    }
    void *sym2 = dlsym(*dl, SD_SAMPLER_V2_ENTRY_SYMBOL);
    void *sym = sym2 ? sym2 : dlsym(*dl, SD_SAMPLER_ENTRY_SYMBOL);
    if (!sym) {
        snprintf(why, len, "missing symbol %s (ABI v1) or %s (ABI v2)", SD_SAMPLER_ENTRY_SYMBOL,
                 SD_SAMPLER_V2_ENTRY_SYMBOL);
        return -1;
    }
    if (phase)
        phase(PHASE_DESC);
    if (sym2) {
        const sd_stage_desc *(*entry)(void);
        memcpy(&entry, &sym, sizeof entry);
        const sd_stage_desc *d = entry();
        if (!d) {
            snprintf(why, len, "%s() returned NULL", SD_SAMPLER_V2_ENTRY_SYMBOL);
            return -1;
        }
        return sd_stage_from_v2(d, def, why, len);
    }
    const sd_sampler_desc *(*entry)(void);
    memcpy(&entry, &sym, sizeof entry);
    const sd_sampler_desc *d = entry();
    if (!d) {
        snprintf(why, len, "%s() returned NULL", SD_SAMPLER_ENTRY_SYMBOL);
        return -1;
    }
    return sd_stage_from_v1(d, def, why, len);
}

static int child_fd = -1;

static void child_write(const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(child_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(3);
        p += w;
        n -= (size_t)w;
    }
}

static void child_phase(int c) {
    char b = (char)c;
    child_write(&b, 1);
}

/* The child: load, check, self-test, report, _exit (no atexit handlers, no
 * flushing of stdio buffers copied from the parent). */
static void probe_child(const char *path, int fd) {
    static probe_report r;
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    static const int sigs[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGINT, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        signal(sigs[i], SIG_DFL);
    child_fd = fd;
    void *dl;
    stage_def d;
    if (!sd_plugin_open(path, &dl, &d, child_phase, r.why, sizeof r.why)) {
        child_phase(PHASE_TEST);
        if (!sd_self_test(&d, r.why, sizeof r.why)) {
            r.ok = 1;
            sd_v1_looks_stateful(&d, r.note, sizeof r.note);
            snprintf(r.name, sizeof r.name, "%s", d.d.name);
            FILE *out = fmemopen(r.entry, sizeof r.entry, "w");
            if (out) {
                format_entry(out, &d, path);
                fclose(out);
            }
            r.entry[sizeof r.entry - 1] = '\0';
        }
    }
    child_phase(PHASE_REPORT);
    child_write(&r, sizeof r);
    _exit(0);
}

static const char *phase_text(int c) {
    switch (c) {
    case PHASE_LOAD: return "while loading (dlopen, its constructors)";
    case PHASE_DESC: return "in its entry point (" SD_SAMPLER_V2_ENTRY_SYMBOL " or "
                            SD_SAMPLER_ENTRY_SYMBOL ")";
    case PHASE_TEST: return "during the self-test";
    default: return "before loading";
    }
}

static const char *signal_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGTRAP: return "SIGTRAP";
    case SIGPIPE: return "SIGPIPE";
    default: return NULL;
    }
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Runs probe_child for path and fills r from its report, or with why it
 * gave none. Returns -1 only when no child could be started. */
int sd_probe_file(const char *path, probe_report *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (foreign_elf(path, r->why, sizeof r->why))
        return 0;
    int fds[2];
    if (pipe(fds)) {
        snprintf(err, errlen, "%s: cannot create a pipe for the probe: %s", path, strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "%s: cannot fork the probe: %s", path, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        probe_child(path, fds[1]);
    }
    close(fds[1]);
    /* Phase bytes, then 'R' and the report: read until EOF or the limit. */
    int phase = 0, timed_out = 0;
    size_t got = 0;
    long long end = now_ms() + SD_PROBE_TIMEOUT_MS;
    for (;;) {
        long long left = end - now_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        ssize_t k;
        if (phase == PHASE_REPORT) {
            k = read(fds[0], (char *)r + got, sizeof *r - got);
            if (k > 0)
                got += (size_t)k;
        } else {
            char c;
            k = read(fds[0], &c, 1);
            if (k == 1)
                phase = c;
        }
        if (k == 0 || (k < 0 && errno != EINTR) || got == sizeof *r)
            break;
    }
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (got == sizeof *r) {
        r->name[sizeof r->name - 1] = '\0';
        r->why[sizeof r->why - 1] = '\0';
        r->entry[sizeof r->entry - 1] = '\0';
        r->note[sizeof r->note - 1] = '\0';
        return 0;
    }
    memset(r, 0, sizeof *r);
    if (timed_out)
        snprintf(r->why, sizeof r->why, "no answer in %g s %s; killed",
                 SD_PROBE_TIMEOUT_MS / 1000.0, phase_text(phase));
    else if (WIFSIGNALED(st) && signal_name(WTERMSIG(st)))
        snprintf(r->why, sizeof r->why, "killed by %s %s", signal_name(WTERMSIG(st)),
                 phase_text(phase));
    else if (WIFSIGNALED(st))
        snprintf(r->why, sizeof r->why, "killed by signal %d %s", WTERMSIG(st),
                 phase_text(phase));
    else if (WIFEXITED(st))
        snprintf(r->why, sizeof r->why, "exited with status %d %s", WEXITSTATUS(st),
                 phase_text(phase));
    else
        snprintf(r->why, sizeof r->why, "the probe ended without a report %s", phase_text(phase));
    return 0;
}
