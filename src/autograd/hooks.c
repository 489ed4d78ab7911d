/* Gradient hooks on leaves: the registry (hooks live beside the tensor, found
 * by its address; a tensor with hooks has has_grad_hooks set, so tensors
 * without any cost nothing) and the calls the engine makes. */
#include "autograd/hooks.h"
#include "core/tensor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct grad_hook {
    int id;
    int kind; /* JG_HOOK_READY, _POST or _EXPECTED */
    jg_grad_ready_fn ready;
    jg_post_accumulate_fn post;
    void *user;
    void (*free_user)(void *);
    struct grad_hook *next;
} grad_hook;

typedef struct hook_entry {
    const jg_tensor *t;
    grad_hook *hooks;
    struct hook_entry *next;
} hook_entry;

#define N_BUCKETS 256
static hook_entry *table[N_BUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int n_entries;
static int next_id = 1;

static size_t bucket_of(const jg_tensor *t) {
    uintptr_t p = (uintptr_t)t >> 6; /* tensors are 64-byte aligned */
    return (size_t)((p ^ (p >> 8)) % N_BUCKETS);
}

static hook_entry **find(const jg_tensor *t) {
    hook_entry **e = &table[bucket_of(t)];
    while (*e && (*e)->t != t)
        e = &(*e)->next;
    return e;
}

bool jg_grad_hooks_any(void) {
    return atomic_load_explicit(&n_entries, memory_order_relaxed) > 0;
}

static void free_hook(grad_hook *h) {
    if (h->free_user)
        h->free_user(h->user);
    free(h);
}

/* Called by core when a tensor with hooks dies. */
static void hooks_free(jg_tensor *t) {
    pthread_mutex_lock(&lock);
    hook_entry **e = find(t), *dead = *e;
    if (dead) {
        *e = dead->next;
        atomic_fetch_sub(&n_entries, 1);
    }
    pthread_mutex_unlock(&lock);
    t->has_grad_hooks = false;
    if (!dead)
        return;
    for (grad_hook *h = dead->hooks, *nx; h; h = nx) {
        nx = h->next;
        free_hook(h);
    }
    free(dead);
}

__attribute__((constructor)) static void hooks_init(void) {
    jg_hooks.grad_hooks_free = hooks_free;
}

static int add_hook(jg_tensor *t, grad_hook *proto, const char *what) {
    if (!t)
        return jg_errorf("%s: tensor is NULL", what);
    if (t->sym)
        return jg_errorf("%s: cannot register a hook on a traced tensor", what);
    if (!t->requires_grad)
        return jg_errorf("cannot register a hook on a tensor that doesn't require gradient");
    if (t->grad_fn)
        return jg_errorf("%s: hooks can only be registered on leaf tensors", what);
    if (!proto->ready && !proto->post)
        return jg_errorf("%s: hook function is NULL", what);
    grad_hook *h = malloc(sizeof *h);
    hook_entry *fresh = malloc(sizeof *fresh);
    if (!h || !fresh) {
        free(h);
        free(fresh);
        return jg_errorf("out of memory registering a gradient hook");
    }
    *h = *proto;
    h->next = NULL;
    pthread_mutex_lock(&lock);
    h->id = next_id++;
    hook_entry **e = find(t);
    if (!*e) {
        *fresh = (hook_entry){t, NULL, NULL};
        *e = fresh;
        fresh = NULL;
        atomic_fetch_add(&n_entries, 1);
    }
    grad_hook **tail = &(*e)->hooks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    t->has_grad_hooks = true;
    int id = h->id;
    pthread_mutex_unlock(&lock);
    free(fresh);
    return id;
}

int jg_register_grad_ready_hook(jg_tensor *t, jg_grad_ready_fn fn, void *user,
                                void (*free_user)(void *)) {
    grad_hook p = {0, JG_HOOK_READY, fn, NULL, user, free_user, NULL};
    return add_hook(t, &p, "jg_register_grad_ready_hook");
}

int jg_register_post_accumulate_grad_hook(jg_tensor *t, jg_post_accumulate_fn fn, void *user,
                                          void (*free_user)(void *)) {
    grad_hook p = {0, JG_HOOK_POST, NULL, fn, user, free_user, NULL};
    return add_hook(t, &p, "jg_register_post_accumulate_grad_hook");
}

int jg_register_grad_expected_hook(jg_tensor *t, jg_post_accumulate_fn fn, void *user,
                                   void (*free_user)(void *)) {
    grad_hook p = {0, JG_HOOK_EXPECTED, NULL, fn, user, free_user, NULL};
    return add_hook(t, &p, "jg_register_grad_expected_hook");
}

int jg_remove_grad_hook(jg_tensor *t, int handle) {
    grad_hook *dead = NULL;
    pthread_mutex_lock(&lock);
    hook_entry **e = t ? find(t) : NULL;
    if (e && *e) {
        for (grad_hook **h = &(*e)->hooks; *h; h = &(*h)->next)
            if ((*h)->id == handle) {
                dead = *h;
                *h = dead->next;
                break;
            }
    }
    pthread_mutex_unlock(&lock);
    if (!dead)
        return jg_errorf("jg_remove_grad_hook: no hook %d on this tensor", handle);
    free_hook(dead); /* (an emptied entry stays until the tensor dies) */
    return 0;
}

/* Runs t's hooks of one kind.  The list is copied first: a hook may remove
 * itself or register others (those run from the next backward on). */
int jg_grad_hooks_run(jg_tensor *t, int kind, jg_tensor *grad) {
    grad_hook small[8], *copy = small;
    int n = 0, cap = 8, rc = 0;
    pthread_mutex_lock(&lock);
    hook_entry **e = find(t);
    for (grad_hook *h = *e ? (*e)->hooks : NULL; h; h = h->next) {
        if (h->kind != kind)
            continue;
        if (n == cap) {
            grad_hook *bigger = malloc(sizeof *bigger * (size_t)cap * 2);
            if (!bigger) {
                rc = jg_errorf("out of memory running gradient hooks");
                break;
            }
            memcpy(bigger, copy, sizeof *copy * (size_t)n);
            if (copy != small)
                free(copy);
            copy = bigger;
            cap *= 2;
        }
        copy[n++] = *h;
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n && rc == 0; i++)
        rc = kind == JG_HOOK_READY ? copy[i].ready(copy[i].user, t, grad)
                                   : copy[i].post(copy[i].user, t);
    if (copy != small)
        free(copy);
    return rc < 0 ? -1 : 0;
}

bool jg_grad_hooks_has(const jg_tensor *t, int kind) {
    if (!t->has_grad_hooks)
        return false;
    bool found = false;
    pthread_mutex_lock(&lock);
    hook_entry **e = find(t);
    for (grad_hook *h = *e ? (*e)->hooks : NULL; h && !found; h = h->next)
        found = h->kind == kind;
    pthread_mutex_unlock(&lock);
    return found;
}
