/* Random numbers: SplitMix64 as a counter-based generator, so a seed fixes
 * the sequence on every machine; normals by Box-Muller. */
#include "core/tensor.h"
#include "core/thread.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct jg_generator {
    uint64_t own, initial;
    /* the state: own, or once jg_rng_state_tensor made state_t, that
     * tensor's element (so a compiled program holding the tensor never
     * reads freed memory, even after the generator or its thread is gone) */
    uint64_t *state;
    jg_tensor *state_t;
};

/* The global generator (jg_manual_seed) and the one this thread draws from
 * (NULL: the global one; jg_generator_use). */
static _Thread_local jg_generator global_gen = {0x853c49e6748fea9bULL, 0x853c49e6748fea9bULL, NULL,
                                                NULL};
static _Thread_local jg_generator *cur_gen;

static uint64_t *gen_state(jg_generator *g) {
    return g->state ? g->state : &g->own;
}

static uint64_t *state_ptr(void) {
    return gen_state(cur_gen ? cur_gen : &global_gen);
}

void jg_manual_seed(uint64_t seed) {
    *gen_state(&global_gen) = global_gen.initial = seed;
}

void jg_global_rng_get(uint64_t *initial, uint64_t *state) {
    *initial = global_gen.initial;
    *state = *gen_state(&global_gen);
}

void jg_global_rng_set(uint64_t initial, uint64_t state) {
    global_gen.initial = initial;
    *gen_state(&global_gen) = state;
}

uint64_t jg_rng_state(void) {
    return *state_ptr();
}

void jg_rng_set_state(uint64_t state) {
    *state_ptr() = state;
}

/* Draws that jg_rng_rollback can undo: while a checkpoint is open, the
 * first draw from each generator since the innermost checkpoint records
 * the state it had. */
typedef struct {
    jg_generator *g;
    uint64_t state;
} rng_mark;
static _Thread_local rng_mark *journal;
static _Thread_local int n_journal, cap_journal, n_open;
static _Thread_local int open_marks[64]; /* each open checkpoint's journal start */

static void journal_note(jg_generator *g) {
    for (int i = open_marks[n_open - 1]; i < n_journal; i++)
        if (journal[i].g == g)
            return;
    if (n_journal == cap_journal) {
        int cap = cap_journal ? 2 * cap_journal : 8;
        rng_mark *j = realloc(journal, sizeof *j * (size_t)cap);
        if (!j)
            jg_fatal("out of memory recording random draws");
        journal = j;
        cap_journal = cap;
    }
    journal[n_journal++] = (rng_mark){g, *gen_state(g)};
}

int jg_rng_checkpoint(void) {
    if (n_open == (int)(sizeof open_marks / sizeof *open_marks))
        jg_fatal("jg_rng_checkpoint: too deeply nested");
    open_marks[n_open++] = n_journal;
    return n_journal;
}

void jg_rng_rollback(int mark) {
    for (int i = n_journal - 1; i >= mark; i--)
        if (journal[i].g)
            *gen_state(journal[i].g) = journal[i].state;
    n_journal = mark;
    if (--n_open == 0) {
        free(journal);
        journal = NULL;
        n_journal = cap_journal = 0;
    }
}

uint64_t jg_rng_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t jg_rng_take(uint64_t n) {
    jg_generator *g = cur_gen ? cur_gen : &global_gen;
    if (n_open)
        journal_note(g);
    uint64_t *st = gen_state(g), s = *st;
    *st = s + n * JG_RNG_GAMMA;
    return s;
}

static uint64_t next_u64(void) {
    return jg_rng_mix(jg_rng_take(1) + JG_RNG_GAMMA);
}

static void free_state_tensor(void) {
    global_gen.own = *gen_state(&global_gen);
    global_gen.state = NULL;
    jg_release(global_gen.state_t);
    global_gen.state_t = NULL;
}

jg_tensor *jg_rng_state_tensor(void) {
    jg_generator *g = cur_gen ? cur_gen : &global_gen;
    if (!g->state_t) {
        if (g == &global_gen && !jg_at_thread_exit(free_state_tensor))
            return jg_errorf_null("out of memory");
        int64_t v;
        uint64_t u = g->own;
        memcpy(&v, &u, sizeof v);
        jg_tensor *t = jg_tensor_alloc(JG_I64, 0, NULL); /* the generator's reference */
        if (!t)
            return NULL;
        memcpy(jg_tensor_ptr(t), &v, sizeof v);
        t->storage->trace_id = 0; /* from outside any program, even if made while one is traced */
        g->state_t = t;
        g->state = (uint64_t *)(void *)jg_tensor_ptr(t);
    }
    return g->state_t;
}

jg_generator *jg_generator_new(uint64_t seed) {
    jg_generator *g = malloc(sizeof *g);
    if (!g)
        return jg_errorf_null("out of memory");
    g->own = g->initial = seed;
    g->state = NULL;
    g->state_t = NULL;
    return g;
}

void jg_generator_free(jg_generator *g) {
    if (g && g == cur_gen)
        cur_gen = NULL;
    for (int i = 0; i < n_journal; i++) /* a rollback must not write it */
        if (journal[i].g == g)
            journal[i].g = NULL;
    if (g)
        jg_release(g->state_t);
    free(g);
}

void jg_generator_manual_seed(jg_generator *g, uint64_t seed) {
    *gen_state(g) = g->initial = seed;
}

uint64_t jg_generator_initial_seed(const jg_generator *g) {
    return g->initial;
}

uint64_t jg_generator_get_state(const jg_generator *g) {
    return g->state ? *g->state : g->own;
}

void jg_generator_set_state(jg_generator *g, uint64_t state) {
    *gen_state(g) = state;
}

jg_generator *jg_generator_use(jg_generator *g) {
    jg_generator *prev = cur_gen;
    cur_gen = g;
    return prev;
}

uint64_t jg_rng_next(void) {
    return next_u64();
}

static int check(const char *fn, jg_dtype dtype, int ndim, const int64_t *shape) {
    if (dtype != JG_F32 && dtype != JG_F64)
        return jg_errorf("%s: expected a floating dtype, got %s", fn,
                         jg_dtype_valid((int)dtype) ? jg_dtype_name(dtype) : "an invalid dtype");
    if (ndim < 0 || ndim > JG_MAX_DIMS)
        return jg_errorf("%s: ndim must be between 0 and %d, got %d", fn, JG_MAX_DIMS, ndim);
    if (ndim > 0 && !shape)
        return jg_errorf("%s: shape is NULL for ndim %d", fn, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return jg_errorf("%s: negative dimension %lld at index %d", fn, (long long)shape[i], i);
    return 0;
}

static void store(jg_tensor *t, int64_t i, double v) {
    if (t->dtype == JG_F32)
        ((float *)t->storage->data)[i] = (float)v;
    else
        ((double *)t->storage->data)[i] = v;
}

uint64_t jg_rng_fill_uniform(jg_tensor *t, uint64_t s) {
    for (int64_t i = 0; i < t->numel; i++)
        store(t, i, (double)(jg_rng_mix(s + (uint64_t)(i + 1) * JG_RNG_GAMMA) >> 11) * 0x1.0p-53);
    return (uint64_t)t->numel;
}

/* Box-Muller on draws 2j+1, 2j+2 for elements 2j, 2j+1 */
uint64_t jg_rng_fill_normal(jg_tensor *t, uint64_t s) {
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t i = 0; i < t->numel; i += 2) {
        double u1 = (double)(jg_rng_mix(s + (uint64_t)(i + 1) * JG_RNG_GAMMA) >> 11) * 0x1.0p-53;
        double u2 = (double)(jg_rng_mix(s + (uint64_t)(i + 2) * JG_RNG_GAMMA) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(1.0 - u1)); /* 1 - u1 in (0, 1]: log is finite */
        store(t, i, r * cos(two_pi * u2));
        if (i + 1 < t->numel)
            store(t, i + 1, r * sin(two_pi * u2));
    }
    return (uint64_t)((t->numel + 1) / 2 * 2);
}

/* jg_rand and jg_randn (ops/random.c) draw through these (eager) or record
 * the graph ops computing the same from the state (traced). */
jg_tensor *jg_rng_draw(bool normal, jg_dtype dtype, int ndim, const int64_t *shape) {
    if (check(normal ? "jg_randn" : "jg_rand", dtype, ndim, shape) < 0)
        return NULL;
    jg_tensor *t = jg_tensor_alloc(dtype, ndim, shape);
    if (!t)
        return NULL;
    uint64_t n = normal ? (uint64_t)((t->numel + 1) / 2 * 2) : (uint64_t)t->numel;
    uint64_t s = jg_rng_take(n);
    if (normal)
        jg_rng_fill_normal(t, s);
    else
        jg_rng_fill_uniform(t, s);
    return jg_scope_track(t);
}
