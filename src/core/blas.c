/* OpenBLAS's kernels for this CPU.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels by CPU model when it
 * loads.  On a model it does not know it falls back to generic ones:
 * OpenBLAS 0.3.21 runs its SSE3 "Prescott" kernels on Intel family 6 model
 * 207 (an AVX-512 CPU), sgemm at a quarter of the SkylakeX kernels' speed,
 * and Nehalem or Sandybridge ones where it believes AVX unusable.
 * OPENBLAS_CORETYPE fixes that only when set before the library loads,
 * which a library cannot do for its programs; so at load jitgrad asks
 * OpenBLAS to choose again (gotoblas = NULL, then gotoblas_dynamic_init
 * with OPENBLAS_CORETYPE set for the call) when its kernels have no AVX2
 * while cpuid says the CPU has it: AVX-512 F/CD/BW/DQ/VL -> SkylakeX, else
 * AVX2 + FMA -> Haswell.  cpuid is read through __builtin_cpu_supports,
 * which also checks that the OS saves the AVX registers (and sees what a
 * CPU emulator such as valgrind offers, not the host).
 *
 * JITGRAD_BLAS_CORETYPE=keep leaves OpenBLAS's choice; =NAME asks for the
 * core NAME (as OPENBLAS_CORETYPE would).  A user's OPENBLAS_CORETYPE is
 * left alone.  JITGRAD_LOG=blas prints what was chosen and why.
 *
 * The symbols are looked up with dlsym, so jitgrad links and runs against
 * any CBLAS; without OpenBLAS's dynamic ones nothing is done.  The switch
 * happens once, in the library's constructor (before main, or while the
 * shared library is being loaded), before jitgrad's first gemm: OpenBLAS's
 * tables must not change under a running call.  setenv is not
 * thread-safe against other threads' getenv; at load there are normally
 * none, and the variable is set for the one call only. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "core/blas.h"

#include "core/tensor.h" /* jg_log_topic */

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    void **gotoblas;               /* the kernel table in use */
    void (*dynamic_init)(void);    /* selects a table when gotoblas is NULL */
    const char *(*corename)(void); /* the name of the table in use */
} openblas_dyn;

static const char *(*corename_fn)(void);

static bool lookup(openblas_dyn *o) {
    o->gotoblas = (void **)dlsym(RTLD_DEFAULT, "gotoblas");
    *(void **)&o->dynamic_init = dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    *(void **)&o->corename = dlsym(RTLD_DEFAULT, "gotoblas_corename");
    return o->gotoblas && o->dynamic_init && o->corename;
}

/* What a core's kernels need of the CPU (x86). */
enum {
    NEED_AVX = 1,
    NEED_AVX2 = 2, /* AVX2 and FMA */
    NEED_FMA4 = 4,
    NEED_AVX512 = 8, /* F, CD, BW, DQ, VL */
    NEED_BF16 = 16,
};

static const struct {
    const char *name;
    unsigned need;
} needs[] = {
    {"Sandybridge", NEED_AVX},
    {"Haswell", NEED_AVX2},
    {"Zen", NEED_AVX2},
    {"SkylakeX", NEED_AVX2 | NEED_AVX512},
    {"Cooperlake", NEED_AVX2 | NEED_AVX512 | NEED_BF16},
    {"Sapphirerapids", NEED_AVX2 | NEED_AVX512 | NEED_BF16},
    {"Bulldozer", NEED_AVX | NEED_FMA4},
    {"Piledriver", NEED_AVX | NEED_FMA4},
    {"Steamroller", NEED_AVX | NEED_FMA4},
    {"Excavator", NEED_AVX2 | NEED_FMA4},
};

static unsigned core_needs(const char *name) {
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
        if (!strcasecmp(name, needs[i].name))
            return needs[i].need;
    return 0;
}

static unsigned cpu_has(void) {
    unsigned has = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init(); /* needed in a constructor */
    if (__builtin_cpu_supports("avx"))
        has |= NEED_AVX;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        has |= NEED_AVX2;
    if (__builtin_cpu_supports("fma4"))
        has |= NEED_FMA4;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        has |= NEED_AVX512;
    if (__builtin_cpu_supports("avx512bf16"))
        has |= NEED_BF16;
#endif
    return has;
}

/* OpenBLAS's table for a core name: gotoblas_SKYLAKEX for "SkylakeX". */
static void *core_table(const char *name) {
    char sym[64] = "gotoblas_";
    size_t at = strlen(sym), n = strlen(name);
    if (n == 0 || at + n >= sizeof sym)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            return NULL;
        sym[at + i] = (char)toupper((unsigned char)name[i]);
    }
    sym[at + n] = 0;
    return dlsym(RTLD_DEFAULT, sym);
}

/* Selects the core NAME as OpenBLAS does at load with
 * OPENBLAS_CORETYPE=NAME.  On failure the previous table (already
 * initialized) is put back. */
static bool switch_core(const openblas_dyn *o, const char *name, void *table) {
    const char *user = getenv("OPENBLAS_CORETYPE");
    char *saved = user ? strdup(user) : NULL;
    if (user && !saved)
        return false;
    void *old = *o->gotoblas;
    setenv("OPENBLAS_CORETYPE", name, 1);
    /* OpenBLAS now and then (about 1 process in 100 on a loaded machine)
     * ignores the name and detects again, falling back to the old core:
     * asking again has always given it */
    for (int attempt = 0; attempt < 4 && *o->gotoblas != table; attempt++) {
        *o->gotoblas = NULL;
        o->dynamic_init();
    }
    if (saved)
        setenv("OPENBLAS_CORETYPE", saved, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
    free(saved);
    if (*o->gotoblas == table)
        return true;
    *o->gotoblas = old;
    return false;
}

static void select_core(void) {
    openblas_dyn o;
    bool log = jg_log_topic("blas");
    if (!lookup(&o)) {
        /* an OpenBLAS built for one CPU still names it */
        *(void **)&corename_fn = dlsym(RTLD_DEFAULT, "openblas_get_corename");
        if (log)
            fprintf(stderr, "jitgrad: BLAS: not a DYNAMIC_ARCH OpenBLAS, its kernels are kept\n");
        return;
    }
    corename_fn = o.corename;
    const char *before = o.corename(), *want = NULL, *why = NULL;
    const char *forced = getenv("JITGRAD_BLAS_CORETYPE");
    unsigned has = cpu_has();
    if (forced && *forced) {
        if (!strcasecmp(forced, "keep")) {
            if (log)
                fprintf(stderr, "jitgrad: OpenBLAS core %s (kept: JITGRAD_BLAS_CORETYPE=keep)\n",
                        before);
            return;
        }
        want = forced;
        why = "JITGRAD_BLAS_CORETYPE";
    } else if (getenv("OPENBLAS_CORETYPE")) {
        if (log)
            fprintf(stderr, "jitgrad: OpenBLAS core %s (kept: OPENBLAS_CORETYPE is set)\n", before);
        return;
    } else if (!(core_needs(before) & NEED_AVX2) && (has & NEED_AVX2)) {
        /* OpenBLAS fell back to kernels older than the CPU */
        want = has & NEED_AVX512 ? "SkylakeX" : "Haswell";
        why = has & NEED_AVX512 ? "cpuid: AVX-512 F/CD/BW/DQ/VL" : "cpuid: AVX2 and FMA";
    } else {
        if (log)
            fprintf(stderr, "jitgrad: OpenBLAS core %s (kept: OpenBLAS's choice)\n", before);
        return;
    }
    if (!strcasecmp(before, want)) {
        if (log)
            fprintf(stderr, "jitgrad: OpenBLAS core %s (%s)\n", before, why);
        return;
    }
    void *table = core_table(want);
    unsigned missing = core_needs(want) & ~has;
    const char *fail = NULL;
    if (!table)
        fail = "this OpenBLAS has no such core";
    else if (missing)
        fail = missing & NEED_AVX512 ? "this CPU lacks AVX-512 for it"
               : missing & NEED_AVX2 ? "this CPU lacks AVX2/FMA for it"
               : missing & NEED_FMA4 ? "this CPU lacks FMA4 for it"
               : missing & NEED_BF16 ? "this CPU lacks AVX512-BF16 for it"
                                     : "this CPU lacks AVX for it";
    else if (!switch_core(&o, want, table))
        fail = "OpenBLAS did not select it";
    if (fail) {
        /* a forced name that cannot be had is the user's mistake: said always */
        if (forced && *forced)
            fprintf(stderr, "jitgrad: JITGRAD_BLAS_CORETYPE=%s: %s; OpenBLAS core %s kept\n",
                    forced, fail, before);
        else if (log)
            fprintf(stderr, "jitgrad: OpenBLAS core %s kept: %s (%s): %s\n", before, want, why,
                    fail);
        return;
    }
    if (log)
        fprintf(stderr, "jitgrad: OpenBLAS core %s (was %s; %s)\n", o.corename(), before, why);
}

/* OpenBLAS's SkylakeX kernels (Cooperlake's and Sapphirerapids' are the
 * same) multiply small matrices (m n k <= 100^3) in place, without packing
 * them, except for a row-major A B^T: that product takes the packing path
 * at 1.5-2.5x the time of A B (64x64x32: 3.1 vs 1.7 us).  Copying B^T with
 * OpenBLAS's own transpose (cblas_somatcopy, an extension looked up by
 * name) costs an eighth of the product, so matmul does that
 * (ops/linalg.c).  Other cores pack every product: no gain there. */
static jg_blas_somatcopy_fn somatcopy_fn;

static void select_core_and_extras(void) {
    select_core();
    const char *core = corename_fn ? corename_fn() : NULL;
    if (core && (!strcasecmp(core, "SkylakeX") || !strcasecmp(core, "Cooperlake") ||
                 !strcasecmp(core, "Sapphirerapids")))
        *(void **)&somatcopy_fn = dlsym(RTLD_DEFAULT, "cblas_somatcopy");
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

void jg_blas_init(void) {
    pthread_once(&once, select_core_and_extras);
}

jg_blas_somatcopy_fn jg_blas_small_nt_transpose(void) {
    jg_blas_init();
    return somatcopy_fn;
}

const char *jg_blas_corename(void) {
    jg_blas_init();
    return corename_fn ? corename_fn() : NULL;
}

__attribute__((constructor)) static void blas_ctor(void) {
    jg_blas_init();
}
