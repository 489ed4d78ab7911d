/* The c backend's cache of compiled objects (see cache.h). */
#include "backend/cache.h"

#include "core/tensor.h" /* jg_errorf, jg_log_topic */

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CACHE_DEFAULT_LIMIT 1000
#define CC_DEFAULT_TIMEOUT 60.0 /* seconds */
#define TMP_STALE_MIN 3600      /* seconds: temporaries older than this are debris */

/* The flags the generated code is compiled with.  -ffp-contract=off as the
 * library itself: no a*b+c is ever fused into an fma.  Never -ffast-math.
 * -fno-trapping-math changes no value (the rounding mode stays the
 * default, nothing is reassociated): it only lets gcc compute both sides of
 * a select, so that a loop with where/masked_fill vectorizes (with traps
 * assumed, a product used on one side only stays a branch, "control flow
 * in loop", outside AVX-512's masked operations). */
static const char *const CC_FLAGS[] = {
    "-std=c11", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-trapping-math"};
#define N_CC_FLAGS (int)(sizeof CC_FLAGS / sizeof *CC_FLAGS)

/* ------------------------------------------------------------ settings */

/* A bad setting is said once per variable, then its default is used: a
 * typo must not pass silently, and must not stop a program either. */
static void warn_setting(const char *name, const char *value, const char *used) {
    static atomic_uint said; /* one bit per variable */
    unsigned bit = !strcmp(name, "JITGRAD_CACHE_MAX")    ? 1u
                   : !strcmp(name, "JITGRAD_CC_TIMEOUT") ? 2u
                                                         : 4u;
    if (atomic_fetch_or(&said, bit) & bit)
        return;
    fprintf(stderr, "jitgrad: ignoring %s='%.100s' (%s)\n", name, value, used);
}

/* The instruction sets the generated code may use, by level.  None of them
 * brings fma contraction (-ffp-contract=off stays), so every level gives
 * the same bits: wider vectors only compute more lanes at once.  AVX-512
 * asks for 512-bit vectors: gcc's default tuning for AVX-512 CPUs prefers
 * 256, and the loops that gain (tanh, exp, erf) are compute-bound. */
static const char *const ARCH_NAMES[] = {"none", "avx2", "avx512"};
static const char *const ARCH_AVX2[] = {"-mavx2", NULL};
static const char *const ARCH_AVX512[] = {"-mavx2",     "-mavx512f",  "-mavx512vl",
                                          "-mavx512dq", "-mavx512bw", "-mprefer-vector-width=512",
                                          NULL};
static const char *const ARCH_NONE[] = {NULL};
static const char *const *const ARCH_FLAGS[] = {ARCH_NONE, ARCH_AVX2, ARCH_AVX512};
#define MAX_ARCH_FLAGS 6

int jg_cc_arch_supported(void) {
    __builtin_cpu_init(); /* its answers include whether the OS saves the registers */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
        return JG_CC_ARCH_AVX512;
    return __builtin_cpu_supports("avx2") ? JG_CC_ARCH_AVX2 : JG_CC_ARCH_NONE;
}

int jg_cc_arch(void) {
    int cpu = jg_cc_arch_supported();
    const char *s = getenv("JITGRAD_CC_ARCH");
    if (!s || !*s)
        return cpu;
    for (int i = 0; i < (int)(sizeof ARCH_NAMES / sizeof *ARCH_NAMES); i++)
        if (!strcmp(s, ARCH_NAMES[i])) {
            if (i <= cpu)
                return i;
            char why[80];
            snprintf(why, sizeof why, "this CPU lacks it; using %s", ARCH_NAMES[cpu]);
            warn_setting("JITGRAD_CC_ARCH", s, why);
            return cpu;
        }
    char why[80];
    snprintf(why, sizeof why, "not avx512, avx2 or none; using %s", ARCH_NAMES[cpu]);
    warn_setting("JITGRAD_CC_ARCH", s, why);
    return cpu;
}

const char *jg_cc_arch_name(int level) {
    return level >= 0 && level <= JG_CC_ARCH_AVX512 ? ARCH_NAMES[level] : "?";
}

long jg_cache_limit(void) {
    const char *s = getenv("JITGRAD_CACHE_MAX");
    if (!s || !*s)
        return CACHE_DEFAULT_LIMIT;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0) {
        warn_setting("JITGRAD_CACHE_MAX", s, "not a non-negative integer; using 1000");
        return CACHE_DEFAULT_LIMIT;
    }
    return v;
}

double jg_cc_timeout(void) {
    const char *s = getenv("JITGRAD_CC_TIMEOUT");
    if (!s || !*s)
        return CC_DEFAULT_TIMEOUT;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v > 0) || v > 1e6) {
        warn_setting("JITGRAD_CC_TIMEOUT", s, "not a number of seconds in (0, 1e6]; using 60");
        return CC_DEFAULT_TIMEOUT;
    }
    return v;
}

/* ------------------------------------------------------------ the directory */

/* mkdir -p; what it creates is private (0700). */
static int make_dirs(const char *dir) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

int jg_cache_dir(char *dir, size_t n, char *why, size_t why_n) {
    const char *e = getenv("JITGRAD_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (e && *e)
        snprintf(dir, n, "%s", e);
    else if (x && *x)
        snprintf(dir, n, "%.3000s/jitgrad", x);
    else if (h && *h)
        snprintf(dir, n, "%.3000s/.cache/jitgrad", h);
    else {
        snprintf(why, why_n, "no cache directory (set JITGRAD_CACHE_DIR)");
        return -1;
    }
    errno = 0;
    struct stat st;
    if (make_dirs(dir) < 0 || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, why_n, "cannot create the cache directory %.400s: %s", dir,
                 strerror(errno ? errno : ENOTDIR));
        return -1;
    }
    /* Objects found here are loaded into the process: only a directory that
     * nobody else can write is trusted (as ssh treats ~/.ssh). */
    if (st.st_uid != geteuid()) {
        snprintf(why, why_n,
                 "the cache directory %.400s is owned by uid %ld, not by this user (uid %ld); "
                 "refusing to load code from it",
                 dir, (long)st.st_uid, (long)geteuid());
        return -2;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, why_n,
                 "the cache directory %.400s is writable by group or others (mode %04o); "
                 "refusing to load code from it",
                 dir, (unsigned)(st.st_mode & 07777));
        return -2;
    }
    if (access(dir, W_OK | X_OK) < 0) {
        snprintf(why, why_n, "cannot write the cache directory %.400s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

void jg_cache_touch(const char *path) {
    (void)utimensat(AT_FDCWD, path, NULL, 0);
}

/* ------------------------------------------------------------ pruning */

/* "<16 hex digits>.so": an object the backend made (not a temporary). */
static bool is_object(const char *name) {
    if (strlen(name) != 19 || strcmp(name + 16, ".so") != 0)
        return false;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", name[i]))
            return false;
    return true;
}

/* "<16 hex digits>.tmp.<6 chars>": a compilation's temporary file. */
static bool is_temporary(const char *name) {
    return strlen(name) == 27 && !strncmp(name + 16, ".tmp.", 5) &&
           strspn(name, "0123456789abcdef") == 16;
}

typedef struct {
    char name[20];
    struct timespec used;
} entry;

static int older_first(const void *a, const void *b) {
    const struct timespec *x = &((const entry *)a)->used, *y = &((const entry *)b)->used;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    if (x->tv_nsec != y->tv_nsec)
        return x->tv_nsec < y->tv_nsec ? -1 : 1;
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

int jg_cache_prune(const char *dir, const char *keep) {
    long limit = jg_cache_limit();
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    entry *all = NULL;
    size_t n = 0, cap = 0;
    const char *keep_name = keep ? strrchr(keep, '/') : NULL;
    keep_name = keep_name ? keep_name + 1 : keep;
    /* a compilation older than this was killed before it cleaned up */
    double stale = 2 * jg_cc_timeout();
    if (stale < TMP_STALE_MIN)
        stale = TMP_STALE_MIN;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (is_temporary(de->d_name)) {
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                difftime(now, st.st_mtim.tv_sec) > stale)
                (void)unlinkat(dirfd(d), de->d_name, 0);
            continue;
        }
        if (limit == 0 || !is_object(de->d_name) || (keep_name && !strcmp(de->d_name, keep_name)))
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, 0) < 0)
            continue; /* removed meanwhile */
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            entry *e = realloc(all, c * sizeof *e);
            if (!e)
                break; /* prune what was seen */
            all = e;
            cap = c;
        }
        memcpy(all[n].name, de->d_name, 20);
        all[n].used = st.st_mtim;
        n++;
    }
    /* the kept object counts against the limit too */
    size_t room = limit ? (size_t)limit - (keep_name ? 1 : 0) : n, removed = 0;
    if (n > room) {
        qsort(all, n, sizeof *all, older_first);
        for (size_t i = 0; i < n - room; i++) {
            if (unlinkat(dirfd(d), all[i].name, 0) == 0)
                removed++;
            char src[20];
            memcpy(src, all[i].name, 17);
            memcpy(src + 17, "c", 2); /* <hash>.c, the source kept for reading */
            (void)unlinkat(dirfd(d), src, 0);
        }
    }
    closedir(d);
    free(all);
    return (int)removed;
}

/* ------------------------------------------------------------ the compiler */

/* The compiler to run: JITGRAD_CC (a path, or a name looked up on PATH),
 * else cc.  Fills path; -1 + why if none is found. */
static int find_compiler(char *path, size_t n, char *why, size_t why_n) {
    const char *cc = getenv("JITGRAD_CC");
    if (!cc || !*cc)
        cc = "cc";
    if (strchr(cc, '/')) {
        if (access(cc, X_OK) == 0) {
            snprintf(path, n, "%s", cc);
            return 0;
        }
        snprintf(why, why_n, "C compiler '%.400s' not found or not executable (JITGRAD_CC)", cc);
        return -1;
    }
    const char *envp = getenv("PATH");
    if (!envp || !*envp)
        envp = "/usr/local/bin:/usr/bin:/bin";
    while (*envp) {
        size_t len = strcspn(envp, ":");
        char cand[4096];
        snprintf(cand, sizeof cand, "%.*s/%.1000s", (int)(len ? len > 2000 ? 2000 : len : 1),
                 len ? envp : ".", cc);
        if (access(cand, X_OK) == 0) {
            snprintf(path, n, "%s", cand);
            return 0;
        }
        envp += len + (envp[len] == ':');
    }
    snprintf(why, why_n, "no C compiler found: '%.400s' is not on PATH (set JITGRAD_CC)", cc);
    return -1;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void read_tail(const char *path, char *out, size_t n) {
    out[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    long start = len > (long)n - 1 ? len - ((long)n - 1) : 0;
    fseek(f, start, SEEK_SET);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = 0;
    fclose(f);
    while (got && (out[got - 1] == '\n' || out[got - 1] == ' '))
        out[--got] = 0;
}

/* A new private file "<so minus .so>.tmp.XXXXXX" made with exclusive
 * creation (mkstemp: O_EXCL, 0600), so nothing planted under a guessable
 * name is ever followed or overwritten.  Its fd, or -1. */
static int new_temporary(const char *so, char *path, size_t n) {
    snprintf(path, n, "%.*s.tmp.XXXXXX", (int)(strlen(so) - 3), so);
    return mkstemp(path);
}

static int write_all(int fd, const char *s, size_t n) {
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

#define CC_TIMED_OUT (-2)

/* Runs cc on src_path -> so_path, output to log_fd, for at most timeout
 * seconds (then the compiler's whole process group is killed).  Exit status,
 * -1 when it cannot run, CC_TIMED_OUT. */
static int run_compiler(const char *cc, const char *const *arch, const char *so_path,
                        const char *src_path, int log_fd, double timeout) {
    const char *argv[N_CC_FLAGS + MAX_ARCH_FLAGS + 12];
    int k = 0;
    argv[k++] = cc;
    for (int i = 0; i < N_CC_FLAGS; i++)
        argv[k++] = CC_FLAGS[i];
    for (int i = 0; arch[i]; i++)
        argv[k++] = arch[i];
    argv[k++] = "-o";
    argv[k++] = so_path;
    argv[k++] = "-x"; /* the temporary source has no .c suffix */
    argv[k++] = "c";
    argv[k++] = src_path;
    argv[k++] = "-x";
    argv[k++] = "none";
    argv[k++] = "-lm";
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0); /* its own group: a timeout kills cc1, as and ld too */
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        close(log_fd);
        execv(cc, (char *const *)argv);
        _exit(127);
    }
    setpgid(pid, pid); /* either side may run first */
    struct timespec t0, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return -1;
        if (seconds_since(&t0) > timeout) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            return CC_TIMED_OUT;
        }
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 20000000) /* 1 ms doubling to 20 ms: short compiles stay short */
            nap.tv_nsec *= 2;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status)
                             : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* ------------------------------------------------------------ the object's identity */

/* The identity of an object: its whole source, the flags and the compiler.
 * Each object exports it as jg_object_key; an object is run only when that
 * string equals the one expected, byte for byte, so a file of another graph
 * (or of anything else) under this name is never run as this graph. */
static char *object_key(const char *src, const char *cc, const char *const *arch) {
    size_t n = strlen(src) + strlen(cc) + 4; /* separators, NUL */
    for (int i = 0; i < N_CC_FLAGS; i++)
        n += strlen(CC_FLAGS[i]) + 1;
    for (int i = 0; arch[i]; i++)
        n += strlen(arch[i]) + 1;
    char *k = malloc(n);
    if (!k)
        return NULL;
    char *p = k;
    p += sprintf(p, "%s\001", src);
    for (int i = 0; i < N_CC_FLAGS; i++)
        p += sprintf(p, "%s ", CC_FLAGS[i]);
    for (int i = 0; arch[i]; i++)
        p += sprintf(p, "%s ", arch[i]);
    sprintf(p, "\001%s", cc);
    return k;
}

/* The source that is compiled: src, then the key as a C string literal.
 * Every byte outside plain printable ASCII is an octal escape, and so are
 * '?' (trigraphs), '"' and '\\'. */
static char *with_key(const char *src, const char *key) {
    size_t n = strlen(src) + 5 * strlen(key) + 128; /* "\\n\"\\n\"" is the longest */
    char *s = malloc(n);
    if (!s)
        return NULL;
    char *p = s + sprintf(s, "%s\nconst char jg_object_key[] =\n\"", src);
    for (const unsigned char *q = (const unsigned char *)key; *q; q++) {
        if (*q == '\n')
            p += sprintf(p, "\\n\"\n\"");
        else if (*q < 0x20 || *q >= 0x7f || *q == '?' || *q == '"' || *q == '\\')
            p += sprintf(p, "\\%03o", *q);
        else
            *p++ = (char)*q;
    }
    sprintf(p, "\";\n");
    return s;
}

static bool key_matches(void *dl, const char *key) {
    const char *k = dlsym(dl, "jg_object_key");
    return k && !strcmp(k, key);
}

/* Whether the file at path may be loaded: a regular file (not a link)
 * owned by this user that nobody else can write. */
static bool trusted_file(const char *path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
              !(st.st_mode & (S_IWGRP | S_IWOTH));
    close(fd);
    return ok;
}

/* ------------------------------------------------------------ load */

static void *load_cached(const char *so, const char *key) {
    if (access(so, F_OK) < 0)
        return NULL;
    if (!trusted_file(so)) {
        unlink(so); /* not ours (the directory is ours): never loaded */
        return NULL;
    }
    void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return NULL; /* unreadable (e.g. made by another system) or pruned meanwhile */
    if (!key_matches(dl, key)) {
        dlclose(dl);
        unlink(so); /* another graph's object under this name */
        return NULL;
    }
    jg_cache_touch(so); /* recently used: pruned last */
    return dl;
}

static void *compile_into_cache(const char *src, const char *key, const char *cc,
                                const char *const *arch, const char *dir, const char *so,
                                const char *final_c, const char *label, bool *fallback) {
    char tmp_c[4500], tmp_so[4500], log[4500];
    int fd_c = new_temporary(so, tmp_c, sizeof tmp_c);
    int fd_so = fd_c >= 0 ? new_temporary(so, tmp_so, sizeof tmp_so) : -1;
    int fd_log = fd_so >= 0 ? new_temporary(so, log, sizeof log) : -1;
    char *text = fd_log >= 0 ? with_key(src, key) : NULL;
    int e = errno;
    void *dl = NULL;
    if (!text || write_all(fd_c, text, strlen(text)) < 0) {
        jg_errorf("jg_compile(c): cannot write a temporary file in %s: %s", dir,
                  strerror(text ? errno : e));
        goto done;
    }
    double timeout = jg_cc_timeout();
    int st = run_compiler(cc, arch, tmp_so, tmp_c, fd_log, timeout);
    if (st == CC_TIMED_OUT) {
        *fallback = true;
        jg_errorf("jg_compile(c): the C compiler %s did not finish the %s graph within %g s "
                  "(JITGRAD_CC_TIMEOUT)",
                  cc, label, timeout);
        goto done;
    }
    if (st != 0) {
        char tail[1500];
        read_tail(log, tail, sizeof tail);
        if (st < 0)
            jg_errorf("jg_compile(c): cannot run the C compiler %s: %s", cc, strerror(errno));
        else
            jg_errorf("jg_compile(c): the C compiler %s failed (exit status %d) on the "
                      "code of the %s graph:\n%s",
                      cc, st, label, tail[0] ? tail : "(no output)");
        goto done;
    }
    (void)chmod(tmp_so, 0600);
    /* Loaded before it is moved into the cache: the mapping stays valid
     * whatever happens to the file (another process pruning the cache). */
    if (!(dl = dlopen(tmp_so, RTLD_NOW | RTLD_LOCAL))) {
        jg_errorf("jg_compile(c): cannot load %s: %s", tmp_so, dlerror());
        goto done;
    }
    if (!key_matches(dl, key)) {
        jg_errorf("jg_compile(c): the object compiled from %s does not carry its key", tmp_c);
        dlclose(dl);
        dl = NULL;
        goto done;
    }
    /* atomic: another process may be compiling the same source */
    if (rename(tmp_so, so) < 0) {
        jg_errorf("jg_compile(c): cannot move %s into the cache: %s", tmp_so, strerror(errno));
        dlclose(dl);
        dl = NULL;
        goto done;
    }
    if (rename(tmp_c, final_c) == 0) /* the source, kept for reading */
        tmp_c[0] = 0;
done:
    free(text);
    if (fd_c >= 0) {
        close(fd_c);
        if (tmp_c[0])
            unlink(tmp_c);
    }
    if (fd_so >= 0) {
        close(fd_so);
        if (!dl)
            unlink(tmp_so);
    }
    if (fd_log >= 0) {
        close(fd_log);
        unlink(log);
    }
    return dl;
}

static atomic_long n_compiled;

long jg_cache_compiles(void) {
    return atomic_load(&n_compiled);
}

void *jg_cache_load(const char *src, const char *label, bool quiet, bool *hit, bool *fallback) {
    char cc[4096], dir[4096], why[700];
    *hit = *fallback = false;
    if (find_compiler(cc, sizeof cc, why, sizeof why) < 0)
        return jg_errorf_null("jg_compile: backend \"c\" is not available: %s", why);
    int rc = jg_cache_dir(dir, sizeof dir, why, sizeof why);
    if (rc < 0) {
        *fallback = rc == -2;
        return jg_errorf_null("jg_compile: backend \"c\" is not available: %s", why);
    }
    /* read at every compilation: the flags are part of the key, so objects
     * of each level live side by side and none runs on a CPU lacking it */
    const char *const *arch = ARCH_FLAGS[jg_cc_arch()];
    char *key = object_key(src, cc, arch);
    if (!key)
        return jg_errorf_null("out of memory loading generated code");
    /* the file name is only a hash: identity is the key inside the object */
    uint64_t h = fnv1a(0xcbf29ce484222325ULL, key, strlen(key) + 1);
    char so[4400], final_c[4400];
    snprintf(so, sizeof so, "%.4000s/%016" PRIx64 ".so", dir, h);
    snprintf(final_c, sizeof final_c, "%.4000s/%016" PRIx64 ".c", dir, h);
    if (!quiet && jg_log_topic("code"))
        fprintf(stderr, "jitgrad: generated C for the %s graph (%s):\n%s", label, so, src);
    void *dl = load_cached(so, key);
    *hit = dl != NULL;
    if (!dl && (dl = compile_into_cache(src, key, cc, arch, dir, so, final_c, label, fallback))) {
        atomic_fetch_add(&n_compiled, 1);
        jg_cache_prune(dir, so);
    }
    free(key);
    return dl;
}
