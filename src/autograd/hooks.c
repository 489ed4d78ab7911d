/* Gradient hooks: the registry (hooks live beside their owner, found by its
 * address: a leaf's beside the leaf, which has has_grad_hooks set, so
 * tensors without any cost nothing; a non-leaf's tensor hooks and
 * retain_grad beside its grad_fn node, as PyTorch keeps them on grad_fn)
 * and the calls the engine makes. */
#include "autograd/hooks.h"
#include "core/tensor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct grad_hook {
    int id;
    int kind; /* JG_HOOK_READY, _POST, _EXPECTED, _TENSOR or _RETAIN */
    int nr;   /* a node's hooks: the output whose gradient they see */
    jg_grad_ready_fn ready;
    jg_post_accumulate_fn post;
    jg_tensor_hook_fn tensor;
    jg_tensor *retain; /* _RETAIN: the non-leaf whose .grad it writes (weak) */
    void *user;
    void (*free_user)(void *);
    struct grad_hook *next;
} grad_hook;

typedef struct hook_entry {
    const void *t; /* a tensor (leaf) or a node */
    grad_hook *hooks;
    struct hook_entry *next;
    bool node; /* t is a node */
} hook_entry;

#define N_BUCKETS 256
static hook_entry *table[N_BUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int n_entries;
static atomic_int n_node_entries; /* (the engine looks nodes up only while > 0) */
static int n_retain;              /* _RETAIN hooks (under lock) */
static int next_id = 1;

static size_t bucket_of(const void *t) {
    uintptr_t p = (uintptr_t)t >> 6; /* tensors are 64-byte aligned */
    return (size_t)((p ^ (p >> 8)) % N_BUCKETS);
}

static hook_entry **find(const void *t) {
    hook_entry **e = &table[bucket_of(t)];
    while (*e && (*e)->t != t)
        e = &(*e)->next;
    return e;
}

bool jg_grad_hooks_any(void) {
    return atomic_load_explicit(&n_entries, memory_order_relaxed) > 0;
}

bool jg_node_hooks_any(void) {
    return atomic_load_explicit(&n_node_entries, memory_order_relaxed) > 0;
}

static void free_hook(grad_hook *h) {
    if (h->free_user)
        h->free_user(h->user);
    free(h);
}

/* Drops the entry of owner (a tensor or a node) and its hooks. */
static void entry_free(const void *owner) {
    pthread_mutex_lock(&lock);
    hook_entry **e = find(owner), *dead = *e;
    if (dead) {
        *e = dead->next;
        atomic_fetch_sub(&n_entries, 1);
        if (dead->node)
            atomic_fetch_sub(&n_node_entries, 1);
        for (grad_hook *h = dead->hooks; h; h = h->next)
            n_retain -= h->kind == JG_HOOK_RETAIN;
    }
    pthread_mutex_unlock(&lock);
    if (!dead)
        return;
    for (grad_hook *h = dead->hooks, *nx; h; h = nx) {
        nx = h->next;
        free_hook(h);
    }
    free(dead);
}

/* Called by core when a tensor with hooks dies: its own hooks go, and a
 * retain_grad that names it stops writing (the node may outlive it, or be
 * another than its grad_fn now, after an in-place op). */
static void hooks_free(jg_tensor *t) {
    entry_free(t);
    t->has_grad_hooks = false;
    pthread_mutex_lock(&lock);
    for (size_t b = 0; n_retain > 0 && b < N_BUCKETS; b++)
        for (hook_entry *e = table[b]; e; e = e->next)
            for (grad_hook **h = &e->hooks; *h;) {
                if ((*h)->kind == JG_HOOK_RETAIN && (*h)->retain == t) {
                    grad_hook *dead = *h;
                    *h = dead->next;
                    n_retain--;
                    free(dead); /* (no user data) */
                } else {
                    h = &(*h)->next;
                }
            }
    pthread_mutex_unlock(&lock);
}

void jg_node_hooks_free(const void *node) {
    if (jg_node_hooks_any())
        entry_free(node);
}

__attribute__((constructor)) static void hooks_init(void) {
    jg_hooks.grad_hooks_free = hooks_free;
}

/* Appends a copy of proto to owner's hooks; flag: the owner is a tensor
 * whose death must drop them.  Returns the handle. */
static int add_entry(const void *owner, bool node, jg_tensor *flag, const grad_hook *proto) {
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
    hook_entry **e = find(owner);
    if (!*e) {
        *fresh = (hook_entry){owner, NULL, NULL, node};
        *e = fresh;
        fresh = NULL;
        atomic_fetch_add(&n_entries, 1);
        if (node)
            atomic_fetch_add(&n_node_entries, 1);
    }
    grad_hook **tail = &(*e)->hooks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    n_retain += h->kind == JG_HOOK_RETAIN;
    if (flag)
        flag->has_grad_hooks = true;
    int id = h->id;
    pthread_mutex_unlock(&lock);
    free(fresh);
    return id;
}

/* A tensor being traced has no gradient yet to hook: a graph break (the
 * program runs eagerly, where the hook works), with the reason as error. */
static int traced_hook(const char *what) {
    char why[200];
    snprintf(why, sizeof why, "%s on a tensor inside the program cannot be traced: it runs eagerly",
             what);
    if (jg_hooks.on_untraceable)
        jg_hooks.on_untraceable(why);
    return jg_errorf("%s", why);
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
    return add_entry(t, false, t, proto);
}

int jg_register_tensor_hook(jg_tensor *t, jg_tensor_hook_fn fn, void *user,
                            void (*free_user)(void *)) {
    if (!t)
        return jg_errorf("jg_register_tensor_hook: tensor is NULL");
    if (!fn)
        return jg_errorf("jg_register_tensor_hook: hook function is NULL");
    if (t->sym)
        return traced_hook("register_hook()");
    if (!t->requires_grad)
        return jg_errorf("cannot register a hook on a tensor that doesn't require gradient");
    grad_hook p = {.id = 0};
    p.kind = JG_HOOK_TENSOR;
    p.tensor = fn;
    p.user = user;
    p.free_user = free_user;
    if (!t->grad_fn)
        return add_entry(t, false, t, &p);
    p.nr = t->output_nr;
    return add_entry(t->grad_fn, true, NULL, &p);
}

/* An in-place op gives a tensor a new grad_fn; its retain_grad follows it
 * there (PyTorch 1.13 moves it; its tensor hooks stay on the old node).
 * Called at the start of each backward while some retain_grad exists. */
void jg_retain_grad_relocate(void) {
    pthread_mutex_lock(&lock);
    for (size_t b = 0; n_retain > 0 && b < N_BUCKETS; b++)
        for (hook_entry *e = table[b]; e; e = e->next)
            for (grad_hook **h = &e->hooks; *h;) {
                grad_hook *r = *h;
                const jg_tensor *t = r->retain;
                if (r->kind != JG_HOOK_RETAIN || (t->grad_fn == e->t && t->output_nr == r->nr)) {
                    h = &(*h)->next;
                    continue;
                }
                *h = r->next; /* stale: unlink, then append where t's gradient is now */
                r->next = NULL;
                hook_entry **to = t->grad_fn ? find(t->grad_fn) : NULL;
                if (to && !*to && (*to = malloc(sizeof **to))) {
                    **to = (hook_entry){t->grad_fn, NULL, NULL, true};
                    atomic_fetch_add(&n_entries, 1);
                    atomic_fetch_add(&n_node_entries, 1);
                }
                if (!to || !*to) { /* (no grad_fn any more, or out of memory) */
                    n_retain--;
                    free(r);
                    continue;
                }
                r->nr = t->output_nr;
                grad_hook **tail = &(*to)->hooks;
                while (*tail)
                    tail = &(*tail)->next;
                *tail = r;
            }
    pthread_mutex_unlock(&lock);
}

bool jg_retains_grad(const jg_tensor *t) {
    if (!t || !t->grad_fn || !t->has_grad_hooks)
        return false;
    jg_retain_grad_relocate();
    bool found = false;
    pthread_mutex_lock(&lock);
    hook_entry **e = find(t->grad_fn);
    for (grad_hook *h = *e ? (*e)->hooks : NULL; h && !found; h = h->next)
        found = h->kind == JG_HOOK_RETAIN && h->retain == t;
    pthread_mutex_unlock(&lock);
    return found;
}

int jg_retain_grad(jg_tensor *t) {
    if (!t)
        return jg_errorf("jg_retain_grad: tensor is NULL");
    if (t->sym)
        return traced_hook("retain_grad()");
    if (!t->requires_grad)
        return jg_errorf("can't retain_grad on Tensor that has requires_grad=False");
    if (!t->grad_fn || jg_retains_grad(t))
        return 0; /* a leaf keeps its gradient anyway */
    grad_hook p = {.id = 0};
    p.kind = JG_HOOK_RETAIN;
    p.nr = t->output_nr;
    p.retain = t;
    return add_entry(t->grad_fn, true, t, &p) < 0 ? -1 : 0;
}

int jg_register_grad_ready_hook(jg_tensor *t, jg_grad_ready_fn fn, void *user,
                                void (*free_user)(void *)) {
    grad_hook p = {.kind = JG_HOOK_READY, .ready = fn, .user = user, .free_user = free_user};
    return add_hook(t, &p, "jg_register_grad_ready_hook");
}

int jg_register_post_accumulate_grad_hook(jg_tensor *t, jg_post_accumulate_fn fn, void *user,
                                          void (*free_user)(void *)) {
    grad_hook p = {.kind = JG_HOOK_POST, .post = fn, .user = user, .free_user = free_user};
    return add_hook(t, &p, "jg_register_post_accumulate_grad_hook");
}

int jg_register_grad_expected_hook(jg_tensor *t, jg_post_accumulate_fn fn, void *user,
                                   void (*free_user)(void *)) {
    grad_hook p = {.kind = JG_HOOK_EXPECTED, .post = fn, .user = user, .free_user = free_user};
    return add_hook(t, &p, "jg_register_grad_expected_hook");
}

int jg_remove_grad_hook(jg_tensor *t, int handle) {
    grad_hook *dead = NULL;
    pthread_mutex_lock(&lock);
    /* a non-leaf's tensor hooks are its grad_fn's */
    const void *owners[2] = {t, t ? (const void *)t->grad_fn : NULL};
    for (int o = 0; o < 2 && !dead && owners[o]; o++) {
        hook_entry **e = find(owners[o]);
        if (!*e)
            continue;
        for (grad_hook **h = &(*e)->hooks; *h; h = &(*h)->next)
            if ((*h)->id == handle && (*h)->kind != JG_HOOK_RETAIN) {
                dead = *h;
                *h = dead->next;
                break;
            }
    }
    pthread_mutex_unlock(&lock);
    if (!dead)
        return jg_errorf("jg_remove_grad_hook: no hook %d on this tensor", handle);
    free_hook(dead); /* (an emptied entry stays until its owner dies) */
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

bool jg_tensor_hooks_has(const void *owner) {
    bool found = false;
    pthread_mutex_lock(&lock);
    hook_entry **e = find(owner);
    for (grad_hook *h = *e ? (*e)->hooks : NULL; h && !found; h = h->next)
        found = h->kind == JG_HOOK_TENSOR || h->kind == JG_HOOK_RETAIN;
    pthread_mutex_unlock(&lock);
    return found;
}

/* One hook's answer: PyTorch's checks (type first, then size). */
static int check_replacement(int id, const jg_tensor *old, const jg_tensor *rep) {
    if (rep->sym)
        return jg_errorf("hook %d returned a traced tensor", id);
    if (rep->dtype != old->dtype)
        return jg_errorf("hook %d has changed the type of value (was %s got %s)", id,
                         jg_dtype_name(old->dtype), jg_dtype_name(rep->dtype));
    if (rep->ndim != old->ndim ||
        memcmp(rep->shape, old->shape, sizeof(int64_t) * (size_t)old->ndim))
        return jg_errorf("hook %d has changed the size of value", id);
    return 0;
}

/* Runs owner's tensor hooks (and retain_grad) for output nr, in
 * registration order, on *grad (owned; replaced by each hook's answer).
 * The list is copied first (a hook may remove itself or add others: those
 * run from the next backward on); a retain's tensor is held meanwhile. */
int jg_tensor_hooks_run(const void *owner, int nr, jg_tensor **grad,
                        int (*retain)(void *ctx, jg_tensor *t, jg_tensor *g), void *ctx) {
    grad_hook small[8], *copy = small;
    int n = 0, cap = 8, rc = 0;
    pthread_mutex_lock(&lock);
    hook_entry **e = find(owner);
    for (grad_hook *h = *e ? (*e)->hooks : NULL; h; h = h->next) {
        if ((h->kind != JG_HOOK_TENSOR && h->kind != JG_HOOK_RETAIN) || h->nr != nr ||
            (h->kind == JG_HOOK_RETAIN && !retain))
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
        copy[n] = *h;
        if (h->kind == JG_HOOK_RETAIN)
            jg_retain(h->retain);
        n++;
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n && rc == 0; i++) {
        if (copy[i].kind == JG_HOOK_RETAIN) {
            rc = retain(ctx, copy[i].retain, *grad);
            continue;
        }
        jg_tensor *rep = NULL;
        jg_scope_push(); /* (what the hook makes) */
        rc = copy[i].tensor(copy[i].user, *grad, &rep) < 0 ? -1 : 0;
        if (rc == 0 && rep)
            rc = check_replacement(copy[i].id, *grad, rep);
        jg_scope_pop();
        if (rep && rc == 0) {
            jg_release(*grad);
            *grad = rep;
        } else {
            jg_release(rep);
        }
    }
    for (int i = 0; i < n; i++)
        if (copy[i].kind == JG_HOOK_RETAIN)
            jg_release(copy[i].retain);
    if (copy != small)
        free(copy);
    return rc < 0 ? -1 : 0;
}
