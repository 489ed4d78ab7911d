/* Tensors and storages: allocation, views, reference counting without
 * recursion, scopes and the read accessors of the public API. */
#include "core/iter.h"
#include "core/tensor.h"
#include "core/thread.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

jg_core_hooks jg_hooks;
_Thread_local bool jg_grad_mode = true;
_Thread_local uint32_t jg_trace_capture;

/* ---------------------------------------------------------------- storage */

#define JG_STORAGE_HDR 64 /* header padded so data is 64-byte aligned */

/* Per-thread caches of freed blocks.  aligned_alloc and calloc cost hundreds
 * of instructions for the tiny tensors of eager mode, and for large storages
 * glibc hands freed memory back to the kernel, so every eager iteration
 * page-faults its temporaries in again.  Freed storage blocks are kept on
 * LIFO lists, one per exact block size (JG_POOL_BINS sizes at a time), freed
 * tensor structs on one more list, up to JG_POOL_MAX_BYTES per thread in all;
 * everything is freed when the thread exits.  Off under AddressSanitizer, so
 * a use after free is still caught there; -DJG_POOL_BINS=0 turns it off. */
#ifndef JG_POOL_BINS
#if defined(__SANITIZE_ADDRESS__)
#define JG_POOL_BINS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JG_POOL_BINS 0
#endif
#endif
#endif
#ifndef JG_POOL_BINS
#define JG_POOL_BINS 8
#endif
/* Large enough for the handful of full-size buffers one step of a large
 * elementwise program frees and allocates again (a forward + backward over
 * 4M-float tensors cycles four of 16 MiB): a block that does not fit is
 * unmapped, and the next one of its size is faulted in again, 4096 faults
 * per 16 MiB, 6 ms on the development VM, three times the time to write it. */
#define JG_POOL_MAX_BYTES ((size_t)256 << 20)

typedef struct pool_blk {
    struct pool_blk *next;
} pool_blk;

typedef struct {
    size_t size; /* block size of every entry (kept while empty; 0: unused) */
    pool_blk *head;
} pool_bin;

/* bins[0..JG_POOL_BINS) hold storages; bins[JG_POOL_BINS] tensor structs */
static _Thread_local pool_bin pool_bins[JG_POOL_BINS + 1];
static _Thread_local size_t pool_bytes;
static _Thread_local bool pool_registered;

static size_t storage_total(size_t nbytes) {
    return JG_STORAGE_HDR + ((nbytes + 63) & ~(size_t)63);
}

/* At thread exit: the cached blocks go back to malloc. */
static void pool_flush(void) {
    for (int i = 0; i <= JG_POOL_BINS; i++)
        while (pool_bins[i].head) {
            pool_blk *b = pool_bins[i].head;
            pool_bins[i].head = b->next;
            free(b);
        }
    pool_bytes = 0;
    pool_registered = false;
}

/* Makes pool_flush run at this thread's exit; false if that is impossible. */
static __attribute__((noinline)) bool pool_register(void) {
    return pool_registered = jg_at_thread_exit(pool_flush);
}

static inline bool pool_put_bin(int bin, void *p, size_t size) {
    if (pool_bytes + size > JG_POOL_MAX_BYTES)
        return false;
    if (!pool_registered && !pool_register())
        return false;
    pool_blk *b = p;
    b->next = pool_bins[bin].head;
    pool_bins[bin].head = b;
    pool_bins[bin].size = size;
    pool_bytes += size;
    return true;
}

static inline void *pool_get_bin(int bin, size_t size) {
    pool_blk *b = pool_bins[bin].head;
    if (!b || pool_bins[bin].size != size)
        return NULL;
    pool_bins[bin].head = b->next;
    pool_bytes -= size;
    return b;
}

static _Thread_local int pool_last; /* the bin last used for storages */

/* A storage bin keeps its block size while it is empty (size 0: never
 * used), so the common cycle -- take the one cached block of a size, give it
 * back -- finds its bin at pool_last without a search. */
static bool storage_pool_put(jg_storage *s) {
    size_t total = storage_total(s->nbytes);
    if (JG_POOL_BINS && pool_bins[pool_last].size == total)
        return pool_put_bin(pool_last, s, total);
    int empty = -1;
    for (int i = 0; i < JG_POOL_BINS; i++) {
        if (pool_bins[i].size == total) {
            pool_last = i;
            return pool_put_bin(i, s, total);
        }
        if (!pool_bins[i].head && empty < 0)
            empty = i;
    }
    if (empty < 0)
        return false;
    pool_last = empty;
    return pool_put_bin(empty, s, total);
}

static jg_storage *storage_pool_get(size_t total) {
    if (JG_POOL_BINS == 0)
        return NULL;
    int i = pool_last;
    if (pool_bins[i].head && pool_bins[i].size == total)
        return pool_get_bin(i, total);
    for (i = 0; i < JG_POOL_BINS; i++)
        if (pool_bins[i].head && pool_bins[i].size == total) {
            pool_last = i;
            return pool_get_bin(i, total);
        }
    return NULL;
}

/* jg_memory_allocated's counters: relaxed atomics (a compiled call may run
 * on another thread), the peak raised only when the count passes it. */
static _Atomic int64_t mem_now, mem_peak;

static inline void mem_add(size_t nbytes) {
    int64_t now = atomic_fetch_add_explicit(&mem_now, (int64_t)nbytes, memory_order_relaxed) +
                  (int64_t)nbytes;
    int64_t peak = atomic_load_explicit(&mem_peak, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(
                             &mem_peak, &peak, now, memory_order_relaxed, memory_order_relaxed))
        ;
}

int64_t jg_memory_allocated(void) {
    return atomic_load_explicit(&mem_now, memory_order_relaxed);
}

int64_t jg_max_memory_allocated(void) {
    return atomic_load_explicit(&mem_peak, memory_order_relaxed);
}

void jg_reset_peak_memory_stats(void) {
    atomic_store_explicit(&mem_peak, atomic_load_explicit(&mem_now, memory_order_relaxed),
                          memory_order_relaxed);
}

static jg_storage *storage_new(size_t nbytes) {
    size_t total = storage_total(nbytes);
    jg_storage *s = storage_pool_get(total);
    if (!s && !(s = aligned_alloc(64, total)))
        return NULL;
    s->refcount = 1;
    s->version = 0;
    s->nbytes = nbytes;
    s->data = (char *)s + JG_STORAGE_HDR;
    s->kind = JG_STORAGE_BLOCK;
    s->trace_id = jg_trace_capture;
    s->pinned = false;
    mem_add(nbytes);
    return s;
}

static inline void tensor_block_free(jg_tensor *t);

/* EXTERNAL storage: the header lives in its own allocation, the data is the
 * caller's, and the caller's release function runs with the last reference. */
typedef struct {
    jg_storage base;
    void (*release)(void *);
    void *release_ctx;
} external_storage;

/* A storage of JG_INLINE_BYTES or less lives inside the tensor struct that
 * made it: one allocation instead of two for the small tensors of eager
 * mode.  Views reference it like any storage, so the struct's memory is
 * freed when both the tensor and the last reference to its storage are
 * gone: the tensor's destruction marks the storage ORPHAN if views remain,
 * and the release that takes an orphan's count to zero frees the block. */
static void storage_release(jg_storage *s) {
    if (!s || --s->refcount > 0)
        return;
    switch ((jg_storage_kind)s->kind) {
    case JG_STORAGE_BLOCK:
        atomic_fetch_sub_explicit(&mem_now, (int64_t)s->nbytes, memory_order_relaxed);
        if (!storage_pool_put(s))
            free(s);
        break;
    case JG_STORAGE_ORPHAN:
        tensor_block_free((jg_tensor *)(void *)((char *)s - offsetof(jg_tensor, inline_storage)));
        break;
    case JG_STORAGE_EXTERNAL: {
        external_storage *e = (external_storage *)s;
        if (e->release)
            e->release(e->release_ctx);
        free(e);
        break;
    }
    case JG_STORAGE_INLINE: /* its tensor holds a reference until it dies */
        JG_ASSERT(!"inline storage released by its own tensor outside tensor_destroy");
    }
}

/* ------------------------------------------------- deferred destruction */

/* Destroying a tensor releases its grad_fn, whose destruction releases the
 * next nodes and saved tensors, and so on down a chain of any length.  Doing
 * that recursively would overflow the C stack on long histories, so objects
 * whose count drops to zero are pushed here and destroyed by one loop. */
typedef struct {
    void *obj;
    bool is_node;
} dead_obj;

static _Thread_local dead_obj *dead_stack;
static _Thread_local size_t dead_len, dead_cap;
static _Thread_local bool draining;

static void arrays_register(void);

static void push_dead(void *obj, bool is_node) {
    if (dead_len == dead_cap) {
        size_t cap = dead_cap ? dead_cap * 2 : 64;
        dead_obj *d = realloc(dead_stack, cap * sizeof *d);
        if (!d)
            jg_fatal("out of memory while releasing tensors");
        arrays_register();
        dead_stack = d;
        dead_cap = cap;
    }
    dead_stack[dead_len++] = (dead_obj){obj, is_node};
}

/* Node refcount (nodes start with it, see autograd/node.h). */
typedef struct {
    int64_t refcount;
} node_head;

/* Drops t's references; what dies on the way is pushed (drain runs it). */
static void tensor_destroy(jg_tensor *t) {
    jg_storage *s = t->storage;
    bool orphan = false;
    if (s == &t->inline_storage) {
        if (--s->refcount > 0) { /* views outlive the tensor: they free it */
            s->kind = JG_STORAGE_ORPHAN;
            orphan = true;
        }
    } else {
        storage_release(s);
    }
    if (t->has_grad_hooks)
        jg_hooks.grad_hooks_free(t);
    if (t->grad && --t->grad->refcount == 0)
        push_dead(t->grad, false);
    if (t->grad_fn && --((node_head *)t->grad_fn)->refcount == 0)
        push_dead(t->grad_fn, true);
    if (t->view) {
        jg_view_info *v = t->view;
        if (--v->base->refcount == 0)
            push_dead(v->base, false);
        free(v->steps);
        free(v);
        t->view = NULL;
    }
    if (!orphan)
        tensor_block_free(t);
}

static inline __attribute__((always_inline)) void tensor_block_free(jg_tensor *t) {
    if (JG_POOL_BINS == 0 || !pool_put_bin(JG_POOL_BINS, t, sizeof *t))
        free(t);
}

static void drain(void) {
    if (draining)
        return;
    draining = true;
    while (dead_len) {
        dead_obj d = dead_stack[--dead_len];
        if (d.is_node)
            jg_hooks.node_destroy(d.obj);
        else
            tensor_destroy(d.obj);
    }
    draining = false;
    if (dead_cap > 4096) { /* give back the memory of a freak long chain */
        free(dead_stack);
        dead_stack = NULL;
        dead_cap = 0;
    }
}

jg_tensor *jg_retain(jg_tensor *t) {
    if (t)
        t->refcount++;
    return t;
}

static void release_dead(jg_tensor *t);

void jg_release(jg_tensor *t) {
    if (!t)
        return;
    JG_ASSERT(t->refcount > 0);
    if (--t->refcount > 0)
        return;
    release_dead(t);
}

/* t's count reached zero (out of line: jg_release's common path saves no
 * registers). */
static __attribute__((noinline)) void release_dead(jg_tensor *t) {
    if (draining) { /* inside a destruction: the running drain loop gets it */
        push_dead(t, false);
        return;
    }
    /* destroy t here and whatever dies with it in the loop, without a stack
     * round trip for t itself */
    draining = true;
    tensor_destroy(t);
    draining = false;
    if (dead_len)
        drain();
}

void jg_node_retain(jg_node *n) {
    if (n)
        ((node_head *)n)->refcount++;
}

void jg_node_release(jg_node *n) {
    if (!n)
        return;
    node_head *h = (node_head *)n;
    JG_ASSERT(h->refcount > 0);
    if (--h->refcount > 0)
        return;
    if (draining) {
        push_dead(n, true);
        return;
    }
    draining = true;
    jg_hooks.node_destroy(n);
    draining = false;
    if (dead_len)
        drain();
}

/* ----------------------------------------------------------------- scopes */

static _Thread_local jg_tensor **scope_items;
static _Thread_local size_t scope_len, scope_cap;
static _Thread_local size_t *scope_starts;
static _Thread_local size_t scope_depth, scope_starts_cap;

/* The scope and dead-object arrays are freed when their thread exits (the
 * tensors a thread leaves in its scopes are not: ending a thread inside a
 * scope leaks them, as an unmatched jg_scope_push does). */
static _Thread_local bool arrays_registered;

static void arrays_free(void) {
    free(scope_items);
    free(scope_starts);
    free(dead_stack);
    scope_items = NULL;
    scope_starts = NULL;
    dead_stack = NULL;
    scope_len = scope_cap = scope_depth = scope_starts_cap = dead_len = dead_cap = 0;
    arrays_registered = false;
}

/* (without it the arrays stay allocated after the thread ends) */
static void arrays_register(void) {
    if (!arrays_registered)
        arrays_registered = jg_at_thread_exit(arrays_free);
}

void jg_scope_push(void) {
    if (scope_depth == scope_starts_cap) {
        size_t cap = scope_starts_cap ? scope_starts_cap * 2 : 16;
        size_t *s = realloc(scope_starts, cap * sizeof *s);
        if (!s)
            jg_fatal("out of memory in jg_scope_push");
        arrays_register();
        scope_starts = s;
        scope_starts_cap = cap;
    }
    scope_starts[scope_depth++] = scope_len;
}

void jg_scope_pop(void) {
    if (scope_depth == 0)
        jg_fatal("jg_scope_pop without a matching jg_scope_push");
    size_t start = scope_starts[--scope_depth];
    while (scope_len > start) {
        jg_tensor *t = scope_items[--scope_len];
        JG_ASSERT(t->refcount > 0);
        if (t->refcount > 1) /* jg_release's common case, without the call */
            t->refcount--;
        else
            jg_release(t);
    }
    if (scope_depth == 0 && scope_cap > 65536) {
        free(scope_items);
        scope_items = NULL;
        scope_cap = 0;
    }
}

size_t jg_scope_mark(void) {
    JG_ASSERT(scope_depth > 0);
    return scope_len;
}

void jg_scope_release_to(size_t mark) {
    JG_ASSERT(scope_depth > 0 && mark >= scope_starts[scope_depth - 1] && mark <= scope_len);
    while (scope_len > mark) {
        jg_tensor *t = scope_items[--scope_len];
        if (t->refcount > 1) /* jg_release's common case, without the call */
            t->refcount--;
        else
            jg_release(t);
    }
}

static __attribute__((noinline, cold)) void scope_grow(void) {
    size_t cap = scope_cap ? scope_cap * 2 : 256;
    jg_tensor **it = realloc(scope_items, cap * sizeof *it);
    if (!it)
        jg_fatal("out of memory in a scope");
    arrays_register();
    scope_items = it;
    scope_cap = cap;
}

jg_tensor *jg_scope_track(jg_tensor *t) {
    if (!t || scope_depth == 0)
        return t;
    if (scope_len == scope_cap)
        scope_grow(); /* (out of line: the common path saves no registers) */
    scope_items[scope_len++] = t;
    return t;
}

jg_tensor *jg_keep(jg_tensor *t) {
    if (!t || scope_depth == 0)
        return t;
    size_t start = scope_starts[scope_depth - 1];
    for (size_t i = scope_len; i > start; i--) {
        if (scope_items[i - 1] == t) {
            scope_items[i - 1] = scope_items[scope_len - 1];
            scope_len--;
            return t;
        }
    }
    return t;
}

/* ---------------------------------------------------------- construction */

/* -1 when the product of the non-zero dims overflows, even if another dim
 * is 0: such a shape has no contiguous strides. */
int64_t jg_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    bool zero = false, ovf = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            zero = true;
        else
            ovf |= __builtin_mul_overflow(n, shape[i], &n);
    }
    return ovf ? -1 : zero ? 0 : n;
}

void jg_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

/* A tensor struct with the fields before shape zeroed and the shape set;
 * shape and stride entries past ndim are left as they are (nothing reads
 * them), which saves most of the stores for the common small ndim. */
static inline __attribute__((always_inline)) jg_tensor *tensor_struct(jg_dtype dtype, int ndim,
                                                                      const int64_t *shape) {
    jg_tensor *t = JG_POOL_BINS ? pool_get_bin(JG_POOL_BINS, sizeof *t) : NULL;
    if (!t && !(t = aligned_alloc(64, sizeof *t)))
        return NULL;
    t->storage = NULL;
    t->grad = NULL;
    t->grad_fn = NULL;
    t->sym = NULL;
    t->output_nr = 0;
    t->requires_grad = false;
    t->is_view = false;
    t->no_grad_view = false;
    t->has_grad_hooks = false;
    t->custom_view = t->custom_view_multi = false;
    t->offset = 0;
    t->view = NULL;
    t->refcount = 1;
    t->dtype = dtype;
    t->ndim = ndim;
    /* as jg_shape_numel: numel -1 marks an overflow, refused by the callers */
    int64_t n = 1;
    bool zero = false, ovf = false;
    for (int i = 0; i < ndim; i++) {
        int64_t d = t->shape[i] = shape[i];
        if (d == 0)
            zero = true;
        else
            ovf |= __builtin_mul_overflow(n, d, &n);
    }
    t->numel = ovf ? -1 : zero ? 0 : n;
    return t;
}

/* Largest element count whose bytes (8 per element at most) fit a size_t
 * and a ptrdiff_t. */
#define MAX_NUMEL ((int64_t)(PTRDIFF_MAX / 8))

/* A shape whose elements or bytes do not fit: PyTorch's message. */
static __attribute__((noinline, cold)) jg_tensor *too_large(jg_tensor *t, bool view) {
    char shp[256];
    jg_format_shape(shp, sizeof shp, t->ndim, t->shape);
    if (view && t->numel < 0)
        jg_errorf("numel: integer multiplication overflow (sizes=%s)", shp);
    else
        jg_errorf("Storage size calculation overflowed with sizes=%s", shp);
    tensor_block_free(t);
    return NULL;
}

/* t with a storage block of its own (out of line, so the inline-data path
 * of jg_tensor_alloc stays small). */
static __attribute__((noinline)) jg_tensor *tensor_with_block(jg_tensor *t, size_t nbytes) {
    t->storage = storage_new(nbytes);
    if (!t->storage) {
        char shp[256];
        jg_format_shape(shp, sizeof shp, t->ndim, t->shape);
        jg_errorf("out of memory allocating a %s tensor of shape %s", jg_dtype_name(t->dtype), shp);
        tensor_block_free(t);
        return NULL;
    }
    return t;
}

jg_tensor *jg_tensor_alloc(jg_dtype dtype, int ndim, const int64_t *shape) {
    jg_tensor *t = tensor_struct(dtype, ndim, shape);
    if (!t)
        return jg_errorf_null("out of memory allocating a tensor");
    if (__builtin_expect((uint64_t)t->numel > (uint64_t)MAX_NUMEL, 0))
        return too_large(t, false);
    if (ndim == 1)
        t->stride[0] = 1;
    else
        jg_contiguous_strides(ndim, shape, t->stride);
    size_t nbytes = (size_t)t->numel * jg_dtype_size(dtype);
    if (nbytes <= JG_INLINE_BYTES) {
        jg_storage *s = &t->inline_storage;
        s->refcount = 1;
        s->version = 0;
        s->nbytes = nbytes;
        s->data = t->inline_data;
        s->kind = JG_STORAGE_INLINE;
        s->trace_id = jg_trace_capture;
        s->pinned = false;
        t->storage = s;
        return t;
    }
    return tensor_with_block(t, nbytes);
}

jg_tensor *jg_tensor_view_of(jg_tensor *src, int ndim, const int64_t *shape, const int64_t *stride,
                             int64_t offset) {
    jg_tensor *t = tensor_struct(src->dtype, ndim, shape);
    if (!t)
        return jg_errorf_null("out of memory allocating a view");
    if (__builtin_expect(t->numel < 0, 0)) /* a view may be larger than memory */
        return too_large(t, true);
    if (ndim)
        memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
    t->offset = offset;
    t->storage = src->storage;
    t->storage->refcount++;
    t->is_view = true;
    t->custom_view = src->custom_view; /* (PyTorch: a view's creation meta passes on) */
    t->custom_view_multi = src->custom_view_multi;
    return t;
}

jg_tensor *jg_tensor_symbolic(const jg_meta *m, const jg_sym *sym) {
    jg_tensor *t = tensor_struct(m->dtype, m->ndim, m->shape);
    if (!t)
        return jg_errorf_null("out of memory allocating a symbolic tensor");
    if (t->numel < 0)
        return too_large(t, true);
    jg_contiguous_strides(m->ndim, m->shape, t->stride);
    /* a symbolic tensor has no data: its record lives where inline data
     * would, and goes with the tensor; its version counts in-place writes
     * while tracing (compile/mutation.c) */
    _Static_assert(sizeof(jg_sym) <= JG_INLINE_BYTES, "jg_sym fits the inline data");
    t->sym = (jg_sym *)(void *)t->inline_data;
    *t->sym = *sym;
    t->inline_storage.version = 0;
    if (jg_hooks.on_symbolic_new)
        jg_hooks.on_symbolic_new(t);
    return t;
}

void jg_tensor_become(jg_tensor *s, jg_tensor *r) {
    JG_ASSERT(s->sym && !r->sym && s->dtype == r->dtype && jg_same_shape(s, r));
    /* as jg_tensor_view_of shares memory: r's storage (inline in r or not)
     * lives while s does */
    s->storage = r->storage;
    s->storage->refcount++;
    s->offset = r->offset;
    memcpy(s->stride, r->stride, sizeof(int64_t) * (size_t)r->ndim);
    jg_node_retain(r->grad_fn);
    jg_node_release(s->grad_fn);
    s->grad_fn = r->grad_fn;
    s->output_nr = r->output_nr;
    s->requires_grad = r->requires_grad;
    s->no_grad_view = r->no_grad_view;
    s->sym = NULL;
}

/* (plain stores: the zeroing loop would otherwise become a memset call) */
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void jg_meta_of(const jg_tensor *t,
                                                                              jg_meta *m) {
    int nd = t->ndim;
    m->dtype = t->dtype;
    m->ndim = nd;
#pragma GCC unroll 8
    for (int i = 0; i < JG_MAX_DIMS; i++)
        m->shape[i] = i < nd ? t->shape[i] : 0;
}

bool jg_meta_equal(const jg_meta *a, const jg_meta *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

static int check_geometry(const char *fn, jg_dtype dtype, int ndim, const int64_t *shape) {
    if (!jg_dtype_valid((int)dtype))
        return jg_errorf("%s: invalid dtype %d", fn, (int)dtype);
    if (ndim < 0 || ndim > JG_MAX_DIMS)
        return jg_errorf("%s: ndim must be between 0 and %d, got %d", fn, JG_MAX_DIMS, ndim);
    if (ndim > 0 && !shape)
        return jg_errorf("%s: shape is NULL for ndim %d", fn, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return jg_errorf("%s: negative dimension %lld at index %d", fn, (long long)shape[i], i);
    if ((uint64_t)jg_shape_numel(ndim, shape) > (uint64_t)MAX_NUMEL) {
        char shp[256];
        jg_format_shape(shp, sizeof shp, ndim, shape);
        return jg_errorf("%s: Storage size calculation overflowed with sizes=%s", fn, shp);
    }
    return 0;
}

jg_tensor *jg_tensor_new(jg_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    if (check_geometry("jg_tensor_new", dtype, ndim, shape) < 0)
        return NULL;
    jg_tensor *t = jg_tensor_alloc(dtype, ndim, shape);
    if (!t)
        return NULL;
    if (data && dtype == JG_BOOL) { /* any nonzero byte is true; stored as 0 or 1 */
        const unsigned char *src = data;
        bool *dst = t->storage->data;
        for (int64_t i = 0; i < t->numel; i++)
            dst[i] = src[i] != 0;
    } else if (data)
        memcpy(t->storage->data, data, t->storage->nbytes);
    else
        memset(t->storage->data, 0, t->storage->nbytes);
    return jg_scope_track(t);
}

jg_tensor *jg_tensor_from_blob(jg_dtype dtype, int ndim, const int64_t *shape,
                               const int64_t *strides, void *data, void (*release)(void *),
                               void *release_ctx) {
    if (check_geometry("jg_tensor_from_blob", dtype, ndim, shape) < 0)
        return NULL;
    int64_t st[JG_MAX_DIMS], numel = 1, rowmajor = 1, last = 0; /* last: furthest element */
    for (int i = 0; i < ndim; i++) /* (rowmajor: what the row-major strides reach) */
        if (__builtin_mul_overflow(rowmajor, shape[i] ? shape[i] : 1, &rowmajor) ||
            __builtin_mul_overflow(numel, shape[i], &numel))
            return jg_errorf_null("jg_tensor_from_blob: the shape's element count overflows");
    if (strides)
        memcpy(st, strides, sizeof(int64_t) * (size_t)ndim);
    else
        jg_contiguous_strides(ndim, shape, st);
    for (int i = 0; i < ndim; i++)
        if (st[i] < 0)
            return jg_errorf_null("jg_tensor_from_blob: negative stride %lld at index %d",
                                  (long long)st[i], i);
    size_t es = jg_dtype_size(dtype), nbytes = 0;
    if (numel > 0) {
        for (int i = 0; i < ndim; i++) {
            int64_t span;
            if (__builtin_mul_overflow(shape[i] - 1, st[i], &span) ||
                __builtin_add_overflow(last, span, &last))
                return jg_errorf_null("jg_tensor_from_blob: the strides reach past 2^63 elements");
        }
        if (__builtin_mul_overflow((size_t)last + 1, es, &nbytes))
            return jg_errorf_null("jg_tensor_from_blob: the byte size overflows");
        if (!data)
            return jg_errorf_null("jg_tensor_from_blob: data is NULL");
    }
    external_storage *e = malloc(sizeof *e);
    jg_tensor *t = e ? tensor_struct(dtype, ndim, shape) : NULL;
    if (!t) {
        free(e);
        return jg_errorf_null("out of memory in jg_tensor_from_blob");
    }
    e->base = (jg_storage){.refcount = 1,
                           .nbytes = nbytes,
                           .data = data,
                           .kind = JG_STORAGE_EXTERNAL,
                           .trace_id = jg_trace_capture};
    e->release = release;
    e->release_ctx = release_ctx;
    if (ndim)
        memcpy(t->stride, st, sizeof(int64_t) * (size_t)ndim);
    t->storage = &e->base;
    return jg_scope_track(t);
}

static void fill(jg_tensor *t, double v) {
    int64_t n = t->numel;
    void *p = t->storage->data;
    switch (t->dtype) {
    case JG_F32:
        for (int64_t i = 0; i < n; i++)
            ((float *)p)[i] = (float)v;
        break;
    case JG_F64:
        for (int64_t i = 0; i < n; i++)
            ((double *)p)[i] = v;
        break;
    case JG_I64:
        for (int64_t i = 0; i < n; i++)
            ((int64_t *)p)[i] = (int64_t)v;
        break;
    case JG_BOOL:
        for (int64_t i = 0; i < n; i++)
            ((bool *)p)[i] = (bool)v;
        break;
    case JG_I32:
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)p)[i] = (int32_t)v;
        break;
    }
}

jg_tensor *jg_full(jg_dtype dtype, int ndim, const int64_t *shape, double value) {
    if (check_geometry("jg_full", dtype, ndim, shape) < 0)
        return NULL;
    jg_tensor *t = jg_tensor_alloc(dtype, ndim, shape);
    if (!t)
        return NULL;
    fill(t, value);
    return jg_scope_track(t);
}

jg_tensor *jg_scalar(jg_dtype dtype, double value) {
    return jg_full(dtype, 0, NULL, value);
}

/* -------------------------------------------------------------- accessors */

/* The accessors answer NULL with an error and a value no tensor has. */
#define NULL_CHECK(t, fn, bad)                                                                     \
    do {                                                                                           \
        if (__builtin_expect(!(t), 0)) {                                                           \
            jg_errorf(fn ": tensor is NULL");                                                      \
            return bad;                                                                            \
        }                                                                                          \
    } while (0)

jg_dtype jg_dtype_of(const jg_tensor *t) {
    NULL_CHECK(t, "jg_dtype_of", (jg_dtype)-1);
    return t->dtype;
}
int jg_ndim(const jg_tensor *t) {
    NULL_CHECK(t, "jg_ndim", -1);
    return t->ndim;
}
const int64_t *jg_shape(const jg_tensor *t) {
    NULL_CHECK(t, "jg_shape", NULL);
    return t->shape;
}
const int64_t *jg_strides(const jg_tensor *t) {
    NULL_CHECK(t, "jg_strides", NULL);
    return t->stride;
}
int64_t jg_storage_offset(const jg_tensor *t) {
    NULL_CHECK(t, "jg_storage_offset", -1);
    return t->offset;
}
int64_t jg_numel(const jg_tensor *t) {
    NULL_CHECK(t, "jg_numel", -1);
    return t->numel;
}
uint64_t jg_version(const jg_tensor *t) {
    NULL_CHECK(t, "jg_version", 0);
    return t->storage ? t->storage->version : t->inline_storage.version;
}

bool jg_is_contiguous(const jg_tensor *t) {
    NULL_CHECK(t, "jg_is_contiguous", false);
    return jg_dense(t);
}

bool jg_same_storage(const jg_tensor *a, const jg_tensor *b) {
    return a && b && a->storage && a->storage == b->storage;
}

int jg_check_concrete(const jg_tensor *t, const char *what) {
    if (!t)
        return jg_errorf("%s: tensor is NULL", what);
    if (!t->sym && !jg_trace_captured(t))
        return 0;
    if (jg_hooks.on_symbolic_read && jg_hooks.on_symbolic_read(t, what))
        return 0; /* the piece before the read ran: t holds its values */
    char d[64];
    jg_describe(t, d, sizeof d);
    if (!t->sym)
        return jg_errorf("%s: cannot read the values of captured tensor %s while jg_compile traces "
                         "the program: they are read again at every call, so code that depends on "
                         "them cannot be captured in a graph",
                         what, d);
    return jg_errorf("%s: cannot read the values of a traced tensor %s: its data does not exist "
                     "while jg_compile traces the program (data-dependent code cannot be captured "
                     "in a graph)",
                     what, d);
}

int jg_copy_to(const jg_tensor *t, void *dst, size_t bytes) {
    if (jg_check_concrete(t, "jg_copy_to") < 0)
        return -1;
    size_t need = (size_t)t->numel * jg_dtype_size(t->dtype);
    if (!dst && need)
        return jg_errorf("jg_copy_to: destination is NULL");
    if (bytes != need) {
        char d[64];
        jg_describe(t, d, sizeof d);
        return jg_errorf("jg_copy_to: destination holds %zu bytes but %s needs %zu", bytes, d,
                         need);
    }
    jg_tensor tmp = *t; /* a contiguous tensor over dst, same dtype */
    jg_storage st = {.refcount = 1, .nbytes = need, .data = dst, .kind = JG_STORAGE_BLOCK};
    tmp.storage = &st;
    tmp.offset = 0;
    jg_contiguous_strides(t->ndim, t->shape, tmp.stride);
    jg_copy_data(&tmp, t);
    return 0;
}

double jg_item(const jg_tensor *t) {
    if (jg_check_concrete(t, "jg_item") < 0)
        return NAN;
    if (t->numel != 1) {
        jg_errorf("a Tensor with %lld elements cannot be converted to Scalar", (long long)t->numel);
        return NAN;
    }
    return jg_elem_to_double(t->dtype, jg_tensor_ptr(t));
}

double jg_elem_to_double(jg_dtype d, const void *p) {
    switch (d) {
    case JG_F32:
        return *(const float *)p;
    case JG_F64:
        return *(const double *)p;
    case JG_I64:
        return (double)*(const int64_t *)p;
    case JG_BOOL:
        return *(const bool *)p ? 1.0 : 0.0;
    case JG_I32:
        return *(const int32_t *)p;
    }
    jg_dtype_bad(d);
}

bool jg_is_traced(const jg_tensor *t) {
    return t && t->sym;
}

void *jg_data(jg_tensor *t) {
    if (jg_check_concrete(t, "jg_data") < 0)
        return NULL;
    t->storage->pinned = true; /* the caller may keep the address: never swapped away */
    return jg_tensor_ptr(t);
}

/* t is the one tensor over its memory and covers all of it (is_view may
 * still be set: the tensor it was made from is gone, as for an
 * nn.Parameter made over a temporary). */
static bool sole_block(const jg_tensor *t) {
    const jg_storage *s = t->storage;
    return s && s->kind == JG_STORAGE_BLOCK && s->refcount == 1 && !s->pinned && !t->view &&
           t->offset == 0 && jg_is_contiguous(t) &&
           (size_t)t->numel * jg_dtype_size(t->dtype) == s->nbytes;
}

bool jg_tensor_claim(jg_tensor *t) {
    const jg_storage *s = t->storage;
    /* a view made without grad mode is tracked (ops/viewtrack.c) and holds
     * its base: when nothing else holds that base, the two are the only
     * tensors over the memory */
    jg_tensor *base = t->view ? t->view->base : NULL;
    if (t->refcount != 1 || !s || s->refcount != (base ? 2 : 1) ||
        (base && (base->refcount != 1 || base->storage != s)) || s->kind == JG_STORAGE_EXTERNAL ||
        s->pinned || t->offset != 0 || !jg_is_contiguous(t) ||
        (size_t)t->numel * jg_dtype_size(t->dtype) != s->nbytes)
        return false;
    if (base) {
        jg_view_info *v = t->view;
        t->view = NULL;
        free(v->steps);
        free(v);
        jg_release(base);
    }
    t->is_view = false;
    t->custom_view = false;
    t->custom_view_multi = false;
    return true;
}

bool jg_tensor_take_memory(jg_tensor *dst, jg_tensor *src) {
    if (dst == src || src->refcount != 1 || dst->dtype != src->dtype || !jg_same_shape(dst, src) ||
        !sole_block(dst) || !sole_block(src))
        return false;
    jg_storage *d = dst->storage, *s = src->storage;
    uint64_t v = d->version;
    uint32_t id = d->trace_id;
    d->version = s->version;
    d->trace_id = s->trace_id;
    s->version = v;
    s->trace_id = id;
    dst->storage = s;
    src->storage = d;
    return true;
}
