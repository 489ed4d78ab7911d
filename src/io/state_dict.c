/* state_dicts in PyTorch's checkpoint format (what torch.save writes for
 * model.state_dict(); python/jitgrad/serialization.py is the Python side):
 * a zip of <stem>/data.pkl (a protocol-2 pickle of an OrderedDict of
 * torch._utils._rebuild_tensor_v2(persistent storage id, offset, size,
 * stride, requires_grad, OrderedDict())), <stem>/data/<key> (each storage's
 * little-endian bytes, once however many tensors view it) and
 * <stem>/version. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jitgrad.h>

#include "io/zip.h"

struct jg_state_dict {
    char **names;
    jg_tensor **tensors;
    int n, cap;
};

jg_state_dict *jg_state_dict_new(void) {
    jg_state_dict *sd = calloc(1, sizeof *sd);
    if (!sd)
        jg_set_error("jg_state_dict_new: out of memory");
    return sd;
}

void jg_state_dict_free(jg_state_dict *sd) {
    if (!sd)
        return;
    for (int i = 0; i < sd->n; i++) {
        free(sd->names[i]);
        jg_release(sd->tensors[i]);
    }
    free(sd->names);
    free(sd->tensors);
    free(sd);
}

static int find(const jg_state_dict *sd, const char *name) {
    for (int i = 0; i < sd->n; i++)
        if (strcmp(sd->names[i], name) == 0)
            return i;
    return -1;
}

int jg_state_dict_set(jg_state_dict *sd, const char *name, jg_tensor *t) {
    if (!sd || !name || !t)
        return jg_set_error("jg_state_dict_set: %s is NULL", !sd     ? "the state_dict"
                                                             : !name ? "the name"
                                                                     : "the tensor");
    if (jg_is_traced(t))
        return jg_set_error("jg_state_dict_set: '%s' is a traced (symbolic) tensor, which has "
                            "no values to save",
                            name);
    int i = find(sd, name);
    if (i >= 0) { /* replaced in place: the order stays the first insertion's */
        jg_retain(t);
        jg_release(sd->tensors[i]);
        sd->tensors[i] = t;
        return 0;
    }
    if (sd->n == sd->cap) {
        int cap = sd->cap ? 2 * sd->cap : 16;
        char **nn = realloc(sd->names, (size_t)cap * sizeof *nn);
        if (!nn)
            return jg_set_error("jg_state_dict_set: out of memory");
        sd->names = nn;
        jg_tensor **nt = realloc(sd->tensors, (size_t)cap * sizeof *nt);
        if (!nt)
            return jg_set_error("jg_state_dict_set: out of memory");
        sd->tensors = nt;
        sd->cap = cap;
    }
    size_t len = strlen(name);
    char *copy = malloc(len + 1);
    if (!copy)
        return jg_set_error("jg_state_dict_set: out of memory");
    memcpy(copy, name, len + 1);
    sd->names[sd->n] = copy;
    sd->tensors[sd->n] = jg_retain(t);
    sd->n++;
    return 0;
}

jg_tensor *jg_state_dict_get(const jg_state_dict *sd, const char *name) {
    if (!sd || !name) {
        jg_set_error("jg_state_dict_get: %s is NULL", !sd ? "the state_dict" : "the name");
        return NULL;
    }
    int i = find(sd, name);
    if (i < 0) {
        jg_set_error("jg_state_dict_get: no entry '%s' in the state_dict", name);
        return NULL;
    }
    return sd->tensors[i];
}

int jg_state_dict_size(const jg_state_dict *sd) {
    return sd ? sd->n : jg_set_error("jg_state_dict_size: the state_dict is NULL");
}

const char *jg_state_dict_name(const jg_state_dict *sd, int i) {
    if (!sd || i < 0 || i >= sd->n) {
        jg_set_error("jg_state_dict_name: index %d out of range (size %d)", i, sd ? sd->n : 0);
        return NULL;
    }
    return sd->names[i];
}

jg_tensor *jg_state_dict_tensor(const jg_state_dict *sd, int i) {
    if (!sd || i < 0 || i >= sd->n) {
        jg_set_error("jg_state_dict_tensor: index %d out of range (size %d)", i, sd ? sd->n : 0);
        return NULL;
    }
    return sd->tensors[i];
}

/* ------------------------------------------------------------ dtypes */

static const struct {
    jg_dtype dtype;
    const char *storage;
    size_t size;
} STORAGES[] = {
    {JG_F32, "FloatStorage", 4}, {JG_F64, "DoubleStorage", 8}, {JG_I64, "LongStorage", 8},
    {JG_I32, "IntStorage", 4},   {JG_BOOL, "BoolStorage", 1},
};
#define N_STORAGES ((int)(sizeof STORAGES / sizeof STORAGES[0]))

static size_t elsize(jg_dtype d) {
    for (int i = 0; i < N_STORAGES; i++)
        if (STORAGES[i].dtype == d)
            return STORAGES[i].size;
    return 0;
}

/* ------------------------------------------------------------ writing */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} buf;

static void bput(buf *b, const void *data, size_t n) {
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}
static void bbyte(buf *b, unsigned char c) {
    bput(b, &c, 1);
}

static void p_str(buf *b, const char *s) {
    size_t n = strlen(s);
    unsigned char h[5] = {'X', (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 24)};
    bput(b, h, 5);
    bput(b, s, n);
}

static void p_global(buf *b, const char *module, const char *name) {
    bbyte(b, 'c');
    bput(b, module, strlen(module));
    bbyte(b, '\n');
    bput(b, name, strlen(name));
    bbyte(b, '\n');
}

/* Python's pickler's choice for a non-negative int */
static void p_int(buf *b, int64_t v) {
    if (v >= 0 && v < 256) {
        unsigned char h[2] = {'K', (unsigned char)v};
        bput(b, h, 2);
    } else if (v >= 0 && v < 65536) {
        unsigned char h[3] = {'M', (unsigned char)v, (unsigned char)(v >> 8)};
        bput(b, h, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)v;
        unsigned char h[5] = {'J', (unsigned char)u, (unsigned char)(u >> 8),
                              (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
        bput(b, h, 5);
    } else { /* LONG1: 8 bytes two's complement (always enough for int64) */
        uint64_t u = (uint64_t)v;
        unsigned char h[10] = {0x8a, 8};
        for (int i = 0; i < 8; i++)
            h[2 + i] = (unsigned char)(u >> (8 * i));
        bput(b, h, 10);
    }
}

static void p_tuple(buf *b, int n, const int64_t *v) {
    if (n == 0) {
        bbyte(b, ')');
        return;
    }
    if (n > 3)
        bbyte(b, '(');
    for (int i = 0; i < n; i++)
        p_int(b, v[i]);
    bbyte(b, n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 't');
}

static const char *path_stem(const char *path, char *out, size_t cap) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot)
        n = (size_t)(dot - base);
    if (n == 0) /* as jitgrad.save: "archive" for a name without a stem */
        base = "archive", n = 7;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, base, n);
    out[n] = 0;
    return out;
}

int jg_state_dict_save(const jg_state_dict *sd, const char *path) {
    if (!sd || !path)
        return jg_set_error("jg_state_dict_save: %s is NULL", !sd ? "the state_dict" : "the path");
    int rc = -1;
    int n = sd->n, n_st = 0;
    jg_tensor **whole = calloc((size_t)(n ? n : 1), sizeof *whole); /* one per storage */
    int *st_of = calloc((size_t)(n ? n : 1), sizeof *st_of);
    buf pk = {0};
    FILE *f = NULL;
    jg_scope_push();
    if (!whole || !st_of) {
        jg_set_error("jg_state_dict_save: out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        jg_tensor *t = sd->tensors[i];
        jg_dtype d = jg_dtype_of(t);
        if (!elsize(d)) {
            jg_set_error("jg_state_dict_save: '%s' has dtype %s, which has no PyTorch storage "
                         "here",
                         sd->names[i], jg_dtype_name(d));
            goto out;
        }
        int s = 0;
        while (s < n_st && !jg_same_storage(whole[s], t))
            s++;
        if (s == n_st) {
            int64_t nb = jg_storage_nbytes(t);
            if (nb < 0)
                goto out;
            int64_t numel = nb / (int64_t)elsize(d), one = 1;
            jg_tensor *w = jg_storage_view(t, 1, &numel, &one, 0);
            if (!w)
                goto out;
            whole[n_st++] = w;
        } else if (jg_dtype_of(whole[s]) != d) {
            jg_set_error("jg_state_dict_save: '%s' views the memory of an earlier entry as "
                         "another dtype (%s, not %s), which a checkpoint cannot hold",
                         sd->names[i], jg_dtype_name(d), jg_dtype_name(jg_dtype_of(whole[s])));
            goto out;
        }
        st_of[i] = s;
    }

    /* data.pkl: an OrderedDict built by REDUCE and filled by SETITEMS */
    bput(&pk, "\x80\x02", 2);
    p_global(&pk, "collections", "OrderedDict");
    bput(&pk, ")R", 2);
    if (n) {
        bbyte(&pk, '(');
        for (int i = 0; i < n; i++) {
            jg_tensor *t = sd->tensors[i];
            int s = st_of[i];
            char key[24];
            snprintf(key, sizeof key, "%d", s);
            p_str(&pk, sd->names[i]);
            p_global(&pk, "torch._utils", "_rebuild_tensor_v2");
            bput(&pk, "((", 2);
            p_str(&pk, "storage");
            for (int k = 0; k < N_STORAGES; k++)
                if (STORAGES[k].dtype == jg_dtype_of(t))
                    p_global(&pk, "torch", STORAGES[k].storage);
            p_str(&pk, key);
            p_str(&pk, "cpu");
            p_int(&pk, jg_numel(whole[s]));
            bput(&pk, "tQ", 2);
            p_int(&pk, jg_storage_offset(t));
            p_tuple(&pk, jg_ndim(t), jg_shape(t));
            p_tuple(&pk, jg_ndim(t), jg_strides(t));
            bbyte(&pk, jg_requires_grad(t) ? 0x88 : 0x89);
            p_global(&pk, "collections", "OrderedDict");
            bput(&pk, ")RtR", 4);
        }
        bbyte(&pk, 'u');
    }
    bbyte(&pk, '.');
    if (pk.oom) {
        jg_set_error("jg_state_dict_save: out of memory");
        goto out;
    }

    f = fopen(path, "wb");
    if (!f) {
        jg_set_error("jg_state_dict_save: cannot open '%s' for writing: %s", path, strerror(errno));
        goto out;
    }
    char stem[256], name[300];
    path_stem(path, stem, sizeof stem);
    jg_zip_writer zw;
    jg_zip_writer_init(&zw, f);
    snprintf(name, sizeof name, "%s/data.pkl", stem);
    int ok = jg_zip_add(&zw, name, pk.p, pk.n) == 0;
    /* PyTorch's record order: keys sorted as strings ("10" before "2") */
    char **keys = calloc((size_t)(n_st ? n_st : 1), sizeof *keys);
    for (int s = 0; ok && keys && s < n_st; s++) {
        keys[s] = malloc(24);
        if (!keys[s]) {
            ok = 0;
            break;
        }
        snprintf(keys[s], 24, "%d", s);
    }
    if (!keys)
        ok = 0;
    for (int a = 0; ok && a < n_st; a++)
        for (int c = a + 1; c < n_st; c++)
            if (strcmp(keys[c], keys[a]) < 0) {
                char *tmp = keys[a];
                keys[a] = keys[c];
                keys[c] = tmp;
            }
    for (int a = 0; ok && a < n_st; a++) {
        int s = atoi(keys[a]);
        snprintf(name, sizeof name, "%s/data/%s", stem, keys[a]);
        size_t bytes = (size_t)jg_numel(whole[s]) * elsize(jg_dtype_of(whole[s]));
        ok = jg_zip_add(&zw, name, jg_data(whole[s]), bytes) == 0;
    }
    if (keys)
        for (int s = 0; s < n_st; s++)
            free(keys[s]);
    free(keys);
    snprintf(name, sizeof name, "%s/version", stem);
    if (ok)
        ok = jg_zip_add(&zw, name, "3\n", 2) == 0;
    if (!ok && !keys)
        jg_set_error("jg_state_dict_save: out of memory");
    ok = (jg_zip_finish(&zw) == 0) && ok;
    if (fclose(f) != 0 && ok) {
        jg_set_error("jg_state_dict_save: cannot write '%s': %s", path, strerror(errno));
        ok = 0;
    }
    f = NULL;
    if (!ok) {
        remove(path);
        goto out;
    }
    rc = 0;
out:
    jg_scope_pop();
    free(whole);
    free(st_of);
    free(pk.p);
    return rc;
}

/* ------------------------------------------------------------ reading */

/* The values a state_dict's pickle builds; all live in an arena freed
 * after loading. */
typedef enum {
    PV_MARK,
    PV_NONE,
    PV_BOOL,
    PV_INT,
    PV_FLOAT,
    PV_STR,
    PV_TUPLE,
    PV_LIST,
    PV_DICT,
    PV_GLOBAL,
    PV_STORAGE,
    PV_TENSOR
} pv_kind;

typedef struct pv {
    pv_kind kind;
    int64_t i;         /* INT, BOOL */
    char *s, *s2;      /* STR; GLOBAL module and name; STORAGE key */
    struct pv **items; /* TUPLE, LIST; DICT as key, value pairs */
    int n, cap;
    jg_dtype dtype; /* STORAGE */
    int64_t numel;
    struct pv *storage; /* TENSOR */
    int64_t offset;
    int ndim;
    int64_t size[JG_MAX_DIMS], stride[JG_MAX_DIMS];
    bool requires_grad;
} pv;

typedef struct vm {
    const char *what; /* "jg_state_dict_load: <path>" */
    const unsigned char *p;
    size_t n, pos;
    pv **arena;
    int n_arena, cap_arena;
    pv **stack;
    int sp, cap_stack;
    pv **memo;
    int64_t cap_memo;
    int64_t n_memo; /* MEMOIZE's next index */
} vm;

static pv MARK_PV = {.kind = PV_MARK};

static pv *pv_new(vm *m, pv_kind kind) {
    if (m->n_arena == m->cap_arena) {
        int cap = m->cap_arena ? 2 * m->cap_arena : 64;
        pv **a = realloc(m->arena, (size_t)cap * sizeof *a);
        if (!a)
            return NULL;
        m->arena = a;
        m->cap_arena = cap;
    }
    pv *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->kind = kind;
    m->arena[m->n_arena++] = v;
    return v;
}

static void vm_free(vm *m) {
    for (int i = 0; i < m->n_arena; i++) {
        free(m->arena[i]->s);
        free(m->arena[i]->s2);
        free(m->arena[i]->items);
        free(m->arena[i]);
    }
    free(m->arena);
    free(m->stack);
    free(m->memo);
}

static int pv_append(pv *c, pv *x) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 8;
        pv **it = realloc(c->items, (size_t)cap * sizeof *it);
        if (!it)
            return -1;
        c->items = it;
        c->cap = cap;
    }
    c->items[c->n++] = x;
    return 0;
}

static const char *kind_name(pv_kind k) {
    static const char *names[] = {"mark",  "None", "bool", "int",    "float",   "str",
                                  "tuple", "list", "dict", "global", "storage", "tensor"};
    return names[k];
}

#define FAIL(...) (jg_set_error(__VA_ARGS__), (pv *)NULL)

static int push(vm *m, pv *v) {
    if (!v)
        return -1;
    if (m->sp == m->cap_stack) {
        int cap = m->cap_stack ? 2 * m->cap_stack : 64;
        pv **s = realloc(m->stack, (size_t)cap * sizeof *s);
        if (!s)
            return jg_set_error("%s: out of memory", m->what);
        m->stack = s;
        m->cap_stack = cap;
    }
    m->stack[m->sp++] = v;
    return 0;
}

static pv *pop(vm *m) {
    if (m->sp == 0 || m->stack[m->sp - 1] == &MARK_PV)
        return FAIL("%s: damaged data.pkl (stack underflow at byte %zu)", m->what, m->pos);
    return m->stack[--m->sp];
}

/* index of the topmost mark, or -1 + error */
static int top_mark(vm *m) {
    for (int i = m->sp - 1; i >= 0; i--)
        if (m->stack[i] == &MARK_PV)
            return i;
    return jg_set_error("%s: damaged data.pkl (no mark at byte %zu)", m->what, m->pos);
}

static const unsigned char *take(vm *m, size_t k) {
    if (k > m->n - m->pos) {
        jg_set_error("%s: data.pkl is truncated (at byte %zu)", m->what, m->pos);
        return NULL;
    }
    const unsigned char *q = m->p + m->pos;
    m->pos += k;
    return q;
}

static char *dup_n(const unsigned char *q, size_t k) {
    char *s = malloc(k + 1);
    if (s) {
        memcpy(s, q, k);
        s[k] = 0;
    }
    return s;
}

static pv *new_str(vm *m, const unsigned char *q, size_t k) {
    pv *v = pv_new(m, PV_STR);
    if (!v || !(v->s = dup_n(q, k)))
        return FAIL("%s: out of memory", m->what);
    return v;
}

static pv *new_int(vm *m, int64_t i) {
    pv *v = pv_new(m, PV_INT);
    if (!v)
        return FAIL("%s: out of memory", m->what);
    v->i = i;
    return v;
}

static int memo_put(vm *m, int64_t idx) {
    if (m->sp == 0 || m->stack[m->sp - 1] == &MARK_PV)
        return jg_set_error("%s: damaged data.pkl (memo of nothing at byte %zu)", m->what, m->pos);
    if (idx < 0 || idx > (int64_t)m->n) /* each memo entry costs a byte at least */
        return jg_set_error("%s: damaged data.pkl (memo index %lld)", m->what, (long long)idx);
    if (idx >= m->cap_memo) {
        int64_t cap = m->cap_memo ? m->cap_memo : 64;
        while (cap <= idx)
            cap *= 2;
        pv **mm = realloc(m->memo, (size_t)cap * sizeof *mm);
        if (!mm)
            return jg_set_error("%s: out of memory", m->what);
        memset(mm + m->cap_memo, 0, (size_t)(cap - m->cap_memo) * sizeof *mm);
        m->memo = mm;
        m->cap_memo = cap;
    }
    m->memo[idx] = m->stack[m->sp - 1];
    return 0;
}

static pv *memo_get(vm *m, int64_t idx) {
    if (idx < 0 || idx >= m->cap_memo || !m->memo[idx])
        return FAIL("%s: damaged data.pkl (memo %lld unset at byte %zu)", m->what, (long long)idx,
                    m->pos);
    return m->memo[idx];
}

/* pops the items above the topmost mark into a new container */
static pv *collect(vm *m, pv_kind kind) {
    int mk = top_mark(m);
    if (mk < 0)
        return NULL;
    pv *c = pv_new(m, kind);
    if (!c)
        return FAIL("%s: out of memory", m->what);
    for (int i = mk + 1; i < m->sp; i++)
        if (pv_append(c, m->stack[i]) < 0)
            return FAIL("%s: out of memory", m->what);
    m->sp = mk;
    return c;
}

static bool is_global(const pv *g, const char *module, const char *name) {
    return g->kind == PV_GLOBAL && strcmp(g->s, module) == 0 && strcmp(g->s2, name) == 0;
}

static int int_tuple(vm *m, const pv *t, const char *what, int64_t *out) {
    if (t->kind != PV_TUPLE || t->n > JG_MAX_DIMS)
        return jg_set_error("%s: a tensor's %s is not a tuple of at most %d ints", m->what, what,
                            JG_MAX_DIMS);
    for (int i = 0; i < t->n; i++) {
        if (t->items[i]->kind != PV_INT)
            return jg_set_error("%s: a tensor's %s holds a %s", m->what, what,
                                kind_name(t->items[i]->kind));
        out[i] = t->items[i]->i;
    }
    return 0;
}

static pv *reduce(vm *m, pv *fn, pv *args) {
    if (fn->kind != PV_GLOBAL)
        return FAIL("%s: data.pkl calls a %s, not a global", m->what, kind_name(fn->kind));
    if (args->kind != PV_TUPLE)
        return FAIL("%s: data.pkl calls %s.%s with a %s of arguments", m->what, fn->s, fn->s2,
                    kind_name(args->kind));
    if (is_global(fn, "collections", "OrderedDict") || is_global(fn, "builtins", "dict")) {
        pv *d = pv_new(m, PV_DICT);
        return d ? d : FAIL("%s: out of memory", m->what);
    }
    if (is_global(fn, "torch._utils", "_rebuild_tensor_v2") ||
        is_global(fn, "torch._utils", "_rebuild_tensor")) {
        bool v2 = strcmp(fn->s2, "_rebuild_tensor_v2") == 0;
        if (args->n < (v2 ? 6 : 4))
            return FAIL("%s: %s.%s with %d arguments", m->what, fn->s, fn->s2, args->n);
        pv *t = pv_new(m, PV_TENSOR);
        if (!t)
            return FAIL("%s: out of memory", m->what);
        pv **a = args->items;
        if (a[0]->kind != PV_STORAGE)
            return FAIL("%s: a tensor rebuilt from a %s, not a storage", m->what,
                        kind_name(a[0]->kind));
        if (a[1]->kind != PV_INT)
            return FAIL("%s: a tensor's storage offset is a %s", m->what, kind_name(a[1]->kind));
        t->storage = a[0];
        t->offset = a[1]->i;
        if (int_tuple(m, a[2], "size", t->size) < 0 || int_tuple(m, a[3], "stride", t->stride) < 0)
            return NULL;
        if (a[2]->n != a[3]->n)
            return FAIL("%s: a tensor's size has %d dims and its stride %d", m->what, a[2]->n,
                        a[3]->n);
        t->ndim = a[2]->n;
        t->requires_grad = v2 && (a[4]->kind == PV_BOOL || a[4]->kind == PV_INT) && a[4]->i;
        return t;
    }
    if (is_global(fn, "torch._utils", "_rebuild_parameter") ||
        is_global(fn, "torch._utils", "_rebuild_parameter_with_state")) {
        if (args->n < 2 || args->items[0]->kind != PV_TENSOR)
            return FAIL("%s: %s.%s without a tensor", m->what, fn->s, fn->s2);
        pv *t = args->items[0];
        t->requires_grad = args->items[1]->i != 0;
        return t;
    }
    return FAIL("%s: data.pkl needs %s.%s, which a state_dict of tensors does not hold "
                "(jitgrad reads state_dicts only)",
                m->what, fn->s, fn->s2);
}

static pv *persistent(vm *m, pv *pid) {
    if (pid->kind != PV_TUPLE || pid->n != 5 || pid->items[0]->kind != PV_STR ||
        strcmp(pid->items[0]->s, "storage") != 0)
        return FAIL("%s: unknown persistent id in data.pkl", m->what);
    pv **a = pid->items;
    if (a[1]->kind != PV_GLOBAL || strcmp(a[1]->s, "torch") != 0)
        return FAIL("%s: bad storage type in data.pkl", m->what);
    pv *st = pv_new(m, PV_STORAGE);
    if (!st)
        return FAIL("%s: out of memory", m->what);
    int k = 0;
    while (k < N_STORAGES && strcmp(STORAGES[k].storage, a[1]->s2) != 0)
        k++;
    if (k == N_STORAGES)
        return FAIL("%s: the checkpoint holds a torch.%s, whose dtype jitgrad does not support; "
                    "convert it with PyTorch first (e.g. .float() or .long())",
                    m->what, a[1]->s2);
    if (a[2]->kind != PV_STR || a[3]->kind != PV_STR || a[4]->kind != PV_INT)
        return FAIL("%s: bad storage id in data.pkl", m->what);
    if (strncmp(a[3]->s, "cpu", 3) != 0)
        return FAIL("%s: a storage on device '%s'; jitgrad runs on the CPU only", m->what, a[3]->s);
    st->dtype = STORAGES[k].dtype;
    if (!(st->s = dup_n((const unsigned char *)a[2]->s, strlen(a[2]->s))))
        return FAIL("%s: out of memory", m->what);
    st->numel = a[4]->i;
    return st;
}

/* Runs data.pkl; returns the object STOP leaves. */
static pv *run_pickle(vm *m) {
    for (;;) {
        const unsigned char *q = take(m, 1);
        if (!q)
            return NULL;
        unsigned char op = *q;
        size_t at = m->pos - 1;
        int rc = 0;
        switch (op) {
        case 0x80: /* PROTO */
            if (!(q = take(m, 1)))
                return NULL;
            if (*q > 5)
                return FAIL("%s: data.pkl uses pickle protocol %d", m->what, *q);
            break;
        case 0x95: /* FRAME */
            if (!take(m, 8))
                return NULL;
            break;
        case '.': { /* STOP */
            pv *v = pop(m);
            return v;
        }
        case '(':
            rc = push(m, &MARK_PV);
            break;
        case ')':
        case ']':
        case '}':
            rc = push(m, pv_new(m, op == ')' ? PV_TUPLE : op == ']' ? PV_LIST : PV_DICT));
            break;
        case 't':
        case 'l':
        case 'd': {
            pv *c = collect(m, op == 't' ? PV_TUPLE : op == 'l' ? PV_LIST : PV_DICT);
            if (!c)
                return NULL;
            if (op == 'd' && c->n % 2)
                return FAIL("%s: damaged data.pkl (odd dict at byte %zu)", m->what, at);
            rc = push(m, c);
            break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {
            int k = op - 0x84;
            pv *c = pv_new(m, PV_TUPLE);
            if (!c)
                return FAIL("%s: out of memory", m->what);
            pv *items[3];
            for (int i = k - 1; i >= 0; i--)
                if (!(items[i] = pop(m)))
                    return NULL;
            for (int i = 0; i < k; i++)
                if (pv_append(c, items[i]) < 0)
                    return FAIL("%s: out of memory", m->what);
            rc = push(m, c);
            break;
        }
        case 'a':
        case 's':
        case 'e':
        case 'u': {
            pv *c;
            if (op == 'e' || op == 'u') {
                pv *items = collect(m, PV_LIST);
                if (!items)
                    return NULL;
                if (m->sp == 0 || !(c = m->stack[m->sp - 1]) || c == &MARK_PV)
                    return FAIL("%s: damaged data.pkl (nothing to fill at byte %zu)", m->what, at);
                if ((op == 'u' && (c->kind != PV_DICT || items->n % 2)) ||
                    (op == 'e' && c->kind != PV_LIST))
                    return FAIL("%s: damaged data.pkl (bad %s at byte %zu)", m->what,
                                op == 'u' ? "SETITEMS" : "APPENDS", at);
                for (int i = 0; i < items->n; i++)
                    if (pv_append(c, items->items[i]) < 0)
                        return FAIL("%s: out of memory", m->what);
            } else {
                int k = op == 's' ? 2 : 1;
                pv *items[2];
                for (int i = k - 1; i >= 0; i--)
                    if (!(items[i] = pop(m)))
                        return NULL;
                if (m->sp == 0 || (c = m->stack[m->sp - 1]) == &MARK_PV ||
                    c->kind != (op == 's' ? PV_DICT : PV_LIST))
                    return FAIL("%s: damaged data.pkl (bad %s at byte %zu)", m->what,
                                op == 's' ? "SETITEM" : "APPEND", at);
                for (int i = 0; i < k; i++)
                    if (pv_append(c, items[i]) < 0)
                        return FAIL("%s: out of memory", m->what);
            }
            break;
        }
        case 'q':
        case 'r': {
            if (!(q = take(m, op == 'q' ? 1 : 4)))
                return NULL;
            rc = memo_put(m, op == 'q'
                                 ? q[0]
                                 : (int64_t)(q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24));
            break;
        }
        case 0x94: /* MEMOIZE */
            rc = memo_put(m, m->n_memo++);
            break;
        case 'h':
        case 'j': {
            if (!(q = take(m, op == 'h' ? 1 : 4)))
                return NULL;
            rc = push(m, memo_get(m, op == 'h' ? q[0]
                                               : (int64_t)(q[0] | q[1] << 8 | q[2] << 16 |
                                                           (uint32_t)q[3] << 24)));
            break;
        }
        case 'c': { /* GLOBAL: module\nname\n */
            const unsigned char *s = m->p + m->pos, *end = m->p + m->n;
            const unsigned char *nl1 = memchr(s, '\n', (size_t)(end - s));
            const unsigned char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1)) : NULL;
            if (!nl2)
                return FAIL("%s: data.pkl is truncated (at byte %zu)", m->what, at);
            pv *g = pv_new(m, PV_GLOBAL);
            if (!g || !(g->s = dup_n(s, (size_t)(nl1 - s))) ||
                !(g->s2 = dup_n(nl1 + 1, (size_t)(nl2 - nl1 - 1))))
                return FAIL("%s: out of memory", m->what);
            m->pos = (size_t)(nl2 + 1 - m->p);
            rc = push(m, g);
            break;
        }
        case 0x93: { /* STACK_GLOBAL */
            pv *name = pop(m), *module = name ? pop(m) : NULL;
            if (!module)
                return NULL;
            if (name->kind != PV_STR || module->kind != PV_STR)
                return FAIL("%s: damaged data.pkl (STACK_GLOBAL of non-strings)", m->what);
            pv *g = pv_new(m, PV_GLOBAL);
            if (!g)
                return FAIL("%s: out of memory", m->what);
            if (!(g->s = dup_n((const unsigned char *)module->s, strlen(module->s))) ||
                !(g->s2 = dup_n((const unsigned char *)name->s, strlen(name->s))))
                return FAIL("%s: out of memory", m->what);
            rc = push(m, g);
            break;
        }
        case 'R': {
            pv *args = pop(m), *fn = args ? pop(m) : NULL;
            if (!fn)
                return NULL;
            pv *r = reduce(m, fn, args);
            if (!r)
                return NULL;
            rc = push(m, r);
            break;
        }
        case 'b': { /* BUILD: an OrderedDict's attributes (_metadata); ignored */
            if (!pop(m) || m->sp == 0)
                return FAIL("%s: damaged data.pkl (BUILD at byte %zu)", m->what, at);
            break;
        }
        case 'Q': {
            pv *pid = pop(m);
            if (!pid)
                return NULL;
            pv *st = persistent(m, pid);
            if (!st)
                return NULL;
            rc = push(m, st);
            break;
        }
        case 'K':
            if (!(q = take(m, 1)))
                return NULL;
            rc = push(m, new_int(m, q[0]));
            break;
        case 'M':
            if (!(q = take(m, 2)))
                return NULL;
            rc = push(m, new_int(m, q[0] | q[1] << 8));
            break;
        case 'J':
            if (!(q = take(m, 4)))
                return NULL;
            rc = push(m, new_int(m, (int32_t)((uint32_t)q[0] | (uint32_t)q[1] << 8 |
                                              (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24)));
            break;
        case 0x8a: { /* LONG1 */
            if (!(q = take(m, 1)))
                return NULL;
            size_t k = q[0];
            if (k > 8)
                return FAIL("%s: data.pkl holds an integer of %zu bytes", m->what, k);
            if (!(q = take(m, k)))
                return NULL;
            uint64_t u = 0;
            for (size_t i = 0; i < k; i++)
                u |= (uint64_t)q[i] << (8 * i);
            if (k && k < 8 && (q[k - 1] & 0x80))
                u |= ~(uint64_t)0 << (8 * k); /* sign-extend */
            rc = push(m, new_int(m, (int64_t)u));
            break;
        }
        case 'N':
            rc = push(m, pv_new(m, PV_NONE));
            break;
        case 0x88:
        case 0x89: {
            pv *v = pv_new(m, PV_BOOL);
            if (v)
                v->i = op == 0x88;
            rc = push(m, v);
            break;
        }
        case 'G': { /* BINFLOAT: big-endian double; its value is not needed */
            if (!take(m, 8))
                return NULL;
            rc = push(m, pv_new(m, PV_FLOAT));
            break;
        }
        case 'X':
        case 0x8c:
        case 0x8d:
        case 'C':
        case 'B': {
            size_t w = op == 0x8c || op == 'C' ? 1 : op == 0x8d ? 8 : 4;
            if (!(q = take(m, w)))
                return NULL;
            uint64_t k = 0;
            for (size_t i = 0; i < w; i++)
                k |= (uint64_t)q[i] << (8 * i);
            if (k > m->n - m->pos)
                return FAIL("%s: data.pkl is truncated (at byte %zu)", m->what, at);
            q = take(m, (size_t)k);
            rc = push(m, new_str(m, q, (size_t)k));
            break;
        }
        case '0':
            if (!pop(m))
                return NULL;
            break;
        case '1': {
            int mk = top_mark(m);
            if (mk < 0)
                return NULL;
            m->sp = mk;
            break;
        }
        case '2':
            if (m->sp == 0 || m->stack[m->sp - 1] == &MARK_PV)
                return FAIL("%s: damaged data.pkl (DUP at byte %zu)", m->what, at);
            rc = push(m, m->stack[m->sp - 1]);
            break;
        default:
            return FAIL("%s: data.pkl has pickle opcode 0x%02x at byte %zu, which a state_dict "
                        "does not use",
                        m->what, op, at);
        }
        if (rc < 0)
            return NULL;
    }
}

static unsigned char *read_file(const char *path, size_t *len, const char *what) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        jg_set_error("%s: cannot open: %s", what, strerror(errno));
        return NULL;
    }
    unsigned char *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *d = realloc(data, cap);
            if (!d) {
                free(data);
                fclose(f);
                jg_set_error("%s: out of memory", what);
                return NULL;
            }
            data = d;
        }
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(data);
        jg_set_error("%s: read error", what);
        return NULL;
    }
    *len = n;
    return data;
}

jg_state_dict *jg_state_dict_load(const char *path) {
    if (!path) {
        jg_set_error("jg_state_dict_load: the path is NULL");
        return NULL;
    }
    char what[512];
    snprintf(what, sizeof what, "jg_state_dict_load: '%s'", path);
    size_t len = 0;
    unsigned char *data = read_file(path, &len, what);
    if (!data)
        return NULL;
    jg_zip_reader z = {0};
    vm m = {.what = what};
    jg_state_dict *sd = NULL, *out = NULL;
    struct {
        const char *key;
        jg_tensor *t;
    } *loaded = NULL;
    int n_loaded = 0;
    jg_scope_push();
    if (len >= 2 && data[0] == 0x80) {
        jg_set_error("%s: this file is in PyTorch's legacy (pre-1.6, non-zip) format, which "
                     "jitgrad does not read; save it again with torch.save's default",
                     what);
        goto out;
    }
    if (jg_zip_open(&z, data, len, what) < 0)
        goto out;
    const jg_zip_entry *pkl = NULL;
    for (int i = 0; i < z.n; i++) {
        const char *nm = z.entries[i].name, *sl = strchr(nm, '/');
        if (sl && strcmp(sl, "/data.pkl") == 0) {
            if (pkl) {
                jg_set_error("%s: the archive has two data.pkl records", what);
                goto out;
            }
            pkl = &z.entries[i];
        }
    }
    if (!pkl) {
        jg_set_error("%s: the archive has no <name>/data.pkl record: not a PyTorch checkpoint",
                     what);
        goto out;
    }
    size_t plen = strlen(pkl->name) - strlen("data.pkl");
    char rec[1024];
    if (plen + 64 > sizeof rec) {
        jg_set_error("%s: record names too long", what);
        goto out;
    }
    memcpy(rec, pkl->name, plen);
    strcpy(rec + plen, "version");
    const jg_zip_entry *ver = jg_zip_find(&z, rec);
    if (ver) {
        int v = 0;
        for (uint64_t i = 0; i < ver->size && ver->data[i] != '\n'; i++) {
            if (ver->data[i] < '0' || ver->data[i] > '9' || v > 100) {
                v = 1000;
                break;
            }
            v = v * 10 + (ver->data[i] - '0');
        }
        if (v > 10) {
            jg_set_error("%s: unsupported checkpoint version", what);
            goto out;
        }
    }
    strcpy(rec + plen, "byteorder");
    const jg_zip_entry *bo = jg_zip_find(&z, rec);
    if (bo && !(bo->size >= 6 && memcmp(bo->data, "little", 6) == 0)) {
        jg_set_error("%s: the checkpoint was written big-endian, which jitgrad does not read",
                     what);
        goto out;
    }
    m.p = pkl->data;
    m.n = pkl->size;
    pv *top = run_pickle(&m);
    if (!top)
        goto out;
    if (top->kind != PV_DICT) {
        jg_set_error("%s: the checkpoint holds a %s, not a state_dict", what, kind_name(top->kind));
        goto out;
    }
    sd = jg_state_dict_new();
    loaded = calloc((size_t)(top->n / 2 + 1), sizeof *loaded);
    if (!sd || !loaded) {
        jg_set_error("%s: out of memory", what);
        goto out;
    }
    for (int i = 0; i + 1 < top->n; i += 2) {
        pv *k = top->items[i], *v = top->items[i + 1];
        if (k->kind != PV_STR) {
            jg_set_error("%s: a state_dict key is a %s, not a str", what, kind_name(k->kind));
            goto out;
        }
        if (v->kind != PV_TENSOR) {
            jg_set_error("%s: the entry '%s' is a %s, not a tensor", what, k->s,
                         kind_name(v->kind));
            goto out;
        }
        pv *st = v->storage;
        jg_tensor *whole = NULL;
        for (int j = 0; j < n_loaded; j++)
            if (strcmp(loaded[j].key, st->s) == 0)
                whole = loaded[j].t;
        if (whole && jg_dtype_of(whole) != st->dtype) {
            jg_set_error("%s: the storage '%s' is read as two dtypes", what, st->s);
            goto out;
        }
        if (!whole) {
            if (strlen(st->s) > 256) {
                jg_set_error("%s: storage key too long", what);
                goto out;
            }
            snprintf(rec + plen, sizeof rec - plen, "data/%s", st->s);
            const jg_zip_entry *e = jg_zip_find(&z, rec);
            if (!e) {
                jg_set_error("%s: the checkpoint lacks the record data/%s", what, st->s);
                goto out;
            }
            size_t es = elsize(st->dtype);
            if (st->numel < 0 || (uint64_t)st->numel > e->size / es) {
                jg_set_error("%s: the record data/%s holds %llu bytes, less than %lld %s "
                             "elements",
                             what, st->s, (unsigned long long)e->size, (long long)st->numel,
                             jg_dtype_name(st->dtype));
                goto out;
            }
            int64_t numel = st->numel;
            for (int64_t j = 0; st->dtype == JG_BOOL && j < numel; j++)
                if (e->data[j] > 1) { /* jitgrad's bools are 0 or 1 */
                    jg_set_error("%s: the record data/%s holds a bool byte %u (not 0 or 1)", what,
                                 st->s, e->data[j]);
                    goto out;
                }
            whole = jg_tensor_new(st->dtype, 1, &numel, e->data);
            if (!whole)
                goto out;
            loaded[n_loaded].key = st->s;
            loaded[n_loaded++].t = whole;
        }
        jg_tensor *t = jg_storage_view(whole, v->ndim, v->size, v->stride, v->offset);
        if (!t) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", jg_last_error());
            jg_set_error("%s: the entry '%s': %s", what, k->s, msg);
            goto out;
        }
        if (v->requires_grad)
            jg_set_requires_grad(t, true);
        if (jg_state_dict_set(sd, k->s, t) < 0)
            goto out;
    }
    out = sd;
    sd = NULL;
out:
    jg_scope_pop();
    jg_state_dict_free(sd);
    free(loaded);
    vm_free(&m);
    jg_zip_close(&z);
    free(data);
    return out;
}
