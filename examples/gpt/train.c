/* Trains the byte-level GPT of examples/gpt/model.py with AdamW, in C over
 * jitgrad's C API: the modules are plain structs and every layer makes the
 * same C calls, in the same order, as the Python operations of model.py do
 * through jitgrad's bindings, so from one --init file train.py (jitgrad) and
 * this program print the same losses bitwise.
 *
 *   build/examples/gpt_train --init init.pt --steps 50 --compile c
 *
 * Flags as train.py: --data --steps --batch --block --layers --heads
 * --width --lr --attn builtin|custom --compile none|default|interp|c
 * --threads --seed --init FILE --save FILE --sample N --quiet, and --exact (losses as
 * %.9g, which tells float32 values apart, instead of %.6f).  Data: the bytes
 * of --data masked to 7 bits, the first 90% for training; batches from the
 * SplitMix64 generator of train.py.  --compile compiles the whole step
 * (the loss, zero_grad, jg_backward, the AdamW step) as one program with
 * jg_compile; --compile-scope model only the forward pass and the loss. */
#include <jitgrad.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct cfg {
    int vocab, block, layers, heads, width;
    int custom_attn;
} cfg;

typedef struct linear {
    jg_tensor *w, *b; /* b NULL: no bias */
} linear;
typedef struct lnorm {
    jg_tensor *w, *b;
} lnorm;
typedef struct block {
    lnorm ln_1;
    linear c_attn, attn_proj;
    lnorm ln_2;
    linear c_fc, mlp_proj;
} block;
typedef struct gpt {
    cfg c;
    jg_tensor *wte, *wpe;
    block *h;
    lnorm ln_f;
    jg_tensor *mask; /* bool [1, 1, T, T]: true above the diagonal */
} gpt;

/* ---------------------------------------------------------------- layers */

/* F.linear: input.matmul(weight.t()) + bias */
static jg_tensor *linear_fwd(const linear *l, jg_tensor *x) {
    jg_tensor *out = jg_matmul(x, jg_transpose(l->w, 0, 1));
    return l->b ? jg_add(out, l->b) : out;
}

static jg_tensor *lnorm_fwd(const lnorm *l, jg_tensor *x) {
    return jg_layer_norm(x, 1, l->w, l->b, 1e-5);
}

/* SharedKVAttention of model.py: y = softmax(q k^T * scale, causal) v; its
 * backward returns the key slot's and the value slot's gradients apart. */
static int attn_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    double scale = *(const double *)jg_ctx_args(ctx);
    jg_tensor *q = in[0], *k = in[1], *v = in[2];
    int64_t t = jg_shape(q)[jg_ndim(q) - 2];
    jg_tensor *mask = jg_eq_scalar(jg_tril(jg_full(JG_F32, 2, (int64_t[]){t, t}, 1.0), 0), 0.0);
    jg_tensor *att = jg_masked_fill(jg_mul_scalar(jg_matmul(q, jg_transpose(k, -2, -1)), scale),
                                    mask, -INFINITY);
    att = jg_softmax(att, -1);
    if (!att || jg_ctx_save_for_backward(ctx, 4, (jg_tensor *[]){q, k, v, att}) < 0)
        return -1;
    out[0] = jg_matmul(att, v);
    return out[0] ? 1 : -1;
}

static int attn_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    double scale = *(const double *)jg_ctx_args(ctx);
    jg_tensor *q = jg_ctx_saved(ctx, 0), *k = jg_ctx_saved(ctx, 1), *v = jg_ctx_saved(ctx, 2),
              *att = jg_ctx_saved(ctx, 3), *dy = g[0];
    if (!q || !k || !v || !att)
        return -1;
    jg_tensor *dv = jg_matmul(jg_transpose(att, -2, -1), dy);
    jg_tensor *datt = jg_matmul(dy, jg_transpose(v, -2, -1));
    jg_tensor *ds = jg_mul(att, jg_sub(datt, jg_sum_dims(jg_mul(datt, att), 1, (int[]){-1}, true)));
    jg_tensor *dq = jg_mul_scalar(jg_matmul(ds, k), scale);
    jg_tensor *dk = jg_mul_scalar(jg_matmul(jg_transpose(ds, -2, -1), q), scale);
    if (!dq || !dk || !dv)
        return -1;
    din[0] = dq, din[1] = dk, din[2] = dv;
    return n_in;
}

static const jg_function SharedKVAttention = {"SharedKVAttention", attn_forward, attn_backward,
                                              NULL};

static jg_tensor *attention_fwd(const gpt *m, const block *bk, jg_tensor *x) {
    const int64_t *s = jg_shape(x);
    int64_t b = s[0], t = s[1], c = s[2], nh = m->c.heads;
    jg_tensor *qk[2];
    if (jg_split(linear_fwd(&bk->c_attn, x), 2, c, 2, qk) != 2)
        return NULL;
    jg_tensor *q = jg_transpose(jg_view(qk[0], 4, (int64_t[]){b, t, nh, c / nh}), 1, 2);
    jg_tensor *k = jg_transpose(jg_view(qk[1], 4, (int64_t[]){b, t, nh, c / nh}), 1, 2);
    if (!q || !k)
        return NULL;
    double scale = 1.0 / sqrt((double)jg_shape(k)[3]);
    jg_tensor *y;
    if (m->c.custom_attn) {
        if (jg_apply(&SharedKVAttention, 3, (jg_tensor *[]){q, k, k}, &scale, sizeof scale, &y) < 0)
            return NULL;
    } else {
        jg_tensor *mask = jg_slice(jg_slice(m->mask, 2, 0, t), 3, 0, t);
        jg_tensor *att = jg_masked_fill(jg_mul_scalar(jg_matmul(q, jg_transpose(k, -2, -1)), scale),
                                        mask, -INFINITY);
        y = jg_matmul(jg_softmax(att, -1), k);
    }
    y = jg_view(jg_contiguous(jg_transpose(y, 1, 2)), 3, (int64_t[]){b, t, c});
    return y ? linear_fwd(&bk->attn_proj, y) : NULL;
}

static jg_tensor *block_fwd(const gpt *m, const block *bk, jg_tensor *x) {
    jg_tensor *a = attention_fwd(m, bk, lnorm_fwd(&bk->ln_1, x));
    if (!a)
        return NULL;
    x = jg_add(x, a);
    jg_tensor *h = jg_gelu(linear_fwd(&bk->c_fc, lnorm_fwd(&bk->ln_2, x)), JG_GELU_TANH);
    return jg_add(x, linear_fwd(&bk->mlp_proj, h));
}

/* GPT.forward(idx): the logits [b, t, vocab] */
static jg_tensor *gpt_logits(const gpt *m, jg_tensor *idx) {
    int64_t t = jg_shape(idx)[1];
    jg_tensor *pos = jg_tensor_new(JG_I64, 1, &t, NULL);
    if (!pos)
        return NULL;
    int64_t *pd = jg_data(pos);
    for (int64_t i = 0; i < t; i++)
        pd[i] = i; /* torch.arange(0, t) */
    jg_tensor *x = jg_add(jg_embedding(m->wte, idx, -1), jg_embedding(m->wpe, pos, -1));
    for (int l = 0; l < m->c.layers && x; l++)
        x = block_fwd(m, &m->h[l], x);
    if (!x)
        return NULL;
    linear head = {m->wte, NULL}; /* lm_head, tied to wte */
    return linear_fwd(&head, lnorm_fwd(&m->ln_f, x));
}

/* GPT.forward(idx, targets): the mean cross entropy of the next bytes */
static jg_tensor *gpt_loss(const gpt *m, jg_tensor *idx, jg_tensor *targets) {
    jg_tensor *logits = gpt_logits(m, idx);
    if (!logits)
        return NULL;
    jg_loss_options o = {JG_REDUCTION_MEAN, -100, NULL, 0.0};
    return jg_cross_entropy_opts(jg_view(logits, 2, (int64_t[]){-1, jg_shape(logits)[2]}),
                                 jg_view(targets, 1, (int64_t[]){-1}), &o);
}

/* train.py's --sample: n bytes drawn one at a time after a newline, the
 * context cut to the last block_size bytes, from a generator seeded with
 * --seed (so both programs draw the same bytes from the same weights). */
static int gpt_sample(const gpt *m, int n, uint64_t seed) {
    unsigned char *out = malloc((size_t)n + 2);
    int64_t *ctx = malloc(sizeof(int64_t) * ((size_t)n + 1));
    if (!out || !ctx) {
        free(out);
        free(ctx);
        return jg_set_error("out of memory");
    }
    jg_manual_seed(seed);
    bool was = jg_set_grad_enabled(false);
    int64_t len = 1, rc = 0;
    ctx[0] = '\n';
    for (int i = 0; i < n && rc == 0; i++) {
        jg_scope_push();
        int64_t t = len < m->c.block ? len : m->c.block;
        jg_tensor *idx = jg_tensor_new(JG_I64, 2, (int64_t[]){1, t}, ctx + len - t);
        jg_tensor *logits = idx ? gpt_logits(m, idx) : NULL;
        jg_tensor *last = /* logits[:, -1, :] */
            logits ? jg_view(jg_slice(logits, 1, t - 1, t), 2, (int64_t[]){1, -1}) : NULL;
        jg_tensor *next = last ? jg_multinomial(jg_softmax(last, -1), 1, false) : NULL;
        if (next)
            ctx[len++] = (int64_t)jg_item(next);
        else
            rc = -1;
        jg_scope_pop();
    }
    jg_set_grad_enabled(was);
    if (rc == 0) {
        for (int64_t i = 1; i < len; i++) /* bytes(...).decode("ascii", errors="replace") */
            out[i - 1] = ctx[i] < 128 ? (unsigned char)ctx[i] : '?';
        out[len - 1] = '\n';
        fwrite(out, 1, (size_t)len, stdout);
    }
    free(out);
    free(ctx);
    return (int)rc;
}

static int program(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    out[0] = gpt_loss(user, in[0], in[1]);
    return out[0] ? 1 : -1;
}

/* train.py's train_step: the loss, zero_grad(set_to_none), backward, AdamW */
typedef struct trainer {
    gpt *m;
    jg_optim *opt;
} trainer;

static int step_program(void *user, const void *args, int n, jg_tensor *const *in,
                        jg_tensor **out) {
    (void)args, (void)n;
    trainer *t = user;
    out[0] = gpt_loss(t->m, in[0], in[1]);
    if (!out[0] || jg_optim_zero_grad(t->opt, true) < 0 || jg_backward(out[0], NULL, 0) < 0 ||
        jg_optim_step(t->opt) < 0)
        return -1;
    return 1;
}

/* ---------------------------------------------------------------- parameters */

typedef struct named {
    char name[64];
    jg_tensor **p;
    int kind; /* 0 weight (2-D), 1 bias, 2 layer-norm weight, 3 c_proj weight */
} named;

/* The model's parameters in named_parameters() order (lm_head.weight is
 * wte.weight); returns how many. */
static int params_of(gpt *m, named *out) {
    int n = 0;
#define P(ptr, kind_, ...)                                                                         \
    do {                                                                                           \
        snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__);                                    \
        out[n].p = (ptr);                                                                          \
        out[n].kind = (kind_);                                                                     \
        n++;                                                                                       \
    } while (0)
    P(&m->wte, 0, "wte.weight");
    P(&m->wpe, 0, "wpe.weight");
    for (int l = 0; l < m->c.layers; l++) {
        block *b = &m->h[l];
        P(&b->ln_1.w, 2, "h.%d.ln_1.weight", l);
        P(&b->ln_1.b, 1, "h.%d.ln_1.bias", l);
        P(&b->c_attn.w, 0, "h.%d.attn.c_attn.weight", l);
        P(&b->c_attn.b, 1, "h.%d.attn.c_attn.bias", l);
        P(&b->attn_proj.w, 3, "h.%d.attn.c_proj.weight", l);
        P(&b->attn_proj.b, 1, "h.%d.attn.c_proj.bias", l);
        P(&b->ln_2.w, 2, "h.%d.ln_2.weight", l);
        P(&b->ln_2.b, 1, "h.%d.ln_2.bias", l);
        P(&b->c_fc.w, 0, "h.%d.mlp.c_fc.weight", l);
        P(&b->c_fc.b, 1, "h.%d.mlp.c_fc.bias", l);
        P(&b->mlp_proj.w, 3, "h.%d.mlp.c_proj.weight", l);
        P(&b->mlp_proj.b, 1, "h.%d.mlp.c_proj.bias", l);
    }
    P(&m->ln_f.w, 2, "ln_f.weight");
    P(&m->ln_f.b, 1, "ln_f.bias");
#undef P
    return n;
}

static jg_tensor *param(int64_t rows, int64_t cols, int kind, const cfg *c) {
    jg_tensor *t;
    if (kind == 1)
        t = jg_full(JG_F32, 1, &rows, 0.0);
    else if (kind == 2)
        t = jg_full(JG_F32, 1, &rows, 1.0);
    else { /* normal(0, 0.02); c_proj weights 0.02 / sqrt(2 * n_layer), as model.py */
        double std = kind == 3 ? 0.02 / sqrt(2.0 * c->layers) : 0.02;
        t = jg_mul_scalar(jg_randn(JG_F32, 2, (int64_t[]){rows, cols}), std);
    }
    t = jg_detach(t);
    if (t)
        jg_set_requires_grad(t, true);
    return jg_keep(t); /* owned by the model */
}

static int gpt_build(gpt *m, const cfg *c);

/* A model with model.py's initialization (from jitgrad's generator: an
 * --init file is what makes runs of both programs comparable). */
static int gpt_init(gpt *m, const cfg *c) {
    memset(m, 0, sizeof *m);
    m->c = *c;
    jg_scope_push();
    int rc = gpt_build(m, c);
    jg_scope_pop();
    return rc;
}

static int gpt_build(gpt *m, const cfg *c) {
    int64_t C = c->width;
    m->h = calloc((size_t)c->layers, sizeof *m->h);
    if (!m->h)
        return jg_set_error("out of memory");
    m->wte = param(c->vocab, C, 0, c);
    m->wpe = param(c->block, C, 0, c);
    for (int l = 0; l < c->layers; l++) {
        block *b = &m->h[l];
        b->ln_1 = (lnorm){param(C, 0, 2, c), param(C, 0, 1, c)};
        b->c_attn = (linear){param(2 * C, C, 0, c), param(2 * C, 0, 1, c)};
        b->attn_proj = (linear){param(C, C, 3, c), param(C, 0, 1, c)};
        b->ln_2 = (lnorm){param(C, 0, 2, c), param(C, 0, 1, c)};
        b->c_fc = (linear){param(4 * C, C, 0, c), param(4 * C, 0, 1, c)};
        b->mlp_proj = (linear){param(C, 4 * C, 3, c), param(C, 0, 1, c)};
    }
    m->ln_f = (lnorm){param(C, 0, 2, c), param(C, 0, 1, c)};
    int64_t T = c->block;
    m->mask =
        jg_keep(jg_view(jg_eq_scalar(jg_tril(jg_full(JG_F32, 2, (int64_t[]){T, T}, 1.0), 0), 0.0),
                        4, (int64_t[]){1, 1, T, T}));
    named ps[16 + 12 * 64];
    int n = params_of(m, ps);
    for (int i = 0; i < n; i++)
        if (!*ps[i].p)
            return -1;
    return m->mask ? 0 : -1;
}

static void gpt_free(gpt *m) {
    if (m->h) {
        named ps[16 + 12 * 64];
        int n = params_of(m, ps);
        for (int i = 0; i < n; i++)
            jg_release(*ps[i].p);
    }
    jg_release(m->mask);
    free(m->h);
}

/* model.load_state_dict(torch.load(path)): values copied into the
 * parameters; every parameter must be there, with its shape. */
static int gpt_load(gpt *m, const char *path) {
    jg_state_dict *sd = jg_state_dict_load(path);
    if (!sd)
        return -1;
    named ps[16 + 12 * 64];
    int n = params_of(m, ps), rc = 0;
    bool was = jg_set_grad_enabled(false);
    for (int i = 0; i < n && rc == 0; i++) {
        jg_tensor *src = jg_state_dict_get(sd, ps[i].name), *dst = *ps[i].p;
        if (!src) {
            rc = jg_set_error("%s: missing key '%s'", path, ps[i].name);
            break;
        }
        if (jg_ndim(src) != jg_ndim(dst) ||
            memcmp(jg_shape(src), jg_shape(dst), sizeof(int64_t) * (size_t)jg_ndim(dst))) {
            char a[64], b[64];
            jg_describe(src, a, sizeof a);
            jg_describe(dst, b, sizeof b);
            rc = jg_set_error("%s: size mismatch for %s: copying a param with shape %s, the "
                              "shape in the current model is %s",
                              path, ps[i].name, a, b);
            break;
        }
        rc = jg_copy_(dst, src) < 0 ? -1 : 0;
    }
    jg_set_grad_enabled(was);
    jg_state_dict_free(sd);
    return rc;
}

/* torch.save(model.state_dict(), path): the names of model.py, with
 * lm_head.weight sharing wte.weight's memory. */
static int gpt_save(gpt *m, const char *path) {
    jg_state_dict *sd = jg_state_dict_new();
    if (!sd)
        return -1;
    named ps[16 + 12 * 64];
    int n = params_of(m, ps), rc = 0;
    jg_scope_push();
    for (int i = 0; i < n && rc == 0; i++)
        rc = jg_state_dict_set(sd, ps[i].name, jg_detach(*ps[i].p));
    if (rc == 0)
        rc = jg_state_dict_set(sd, "lm_head.weight", jg_detach(m->wte));
    if (rc == 0)
        rc = jg_state_dict_save(sd, path);
    jg_scope_pop();
    jg_state_dict_free(sd);
    return rc;
}

/* ---------------------------------------------------------------- data */

/* train.py's SplitMix64: the batch order of both programs */
typedef struct splitmix64 {
    uint64_t state;
} splitmix64;

static uint64_t below(splitmix64 *r, uint64_t n) {
    r->state += 0x9E3779B97F4A7C15ull;
    uint64_t z = r->state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (z ^ (z >> 31)) % n;
}

/* x and y [batch, block]: data[s:s+block] and data[s+1:s+block+1] */
static int next_batch(const unsigned char *data, int64_t n, int batch, int block, splitmix64 *r,
                      jg_tensor **x, jg_tensor **y) {
    if (n < block + 2)
        return jg_set_error("the data (%lld bytes) is shorter than a block", (long long)n);
    int64_t shape[2] = {batch, block};
    *x = jg_tensor_new(JG_I64, 2, shape, NULL);
    *y = jg_tensor_new(JG_I64, 2, shape, NULL);
    if (!*x || !*y)
        return -1;
    int64_t *xd = jg_data(*x), *yd = jg_data(*y);
    for (int b = 0; b < batch; b++) {
        int64_t s = (int64_t)below(r, (uint64_t)(n - block - 1));
        for (int i = 0; i < block; i++) {
            xd[b * block + i] = data[s + i];
            yd[b * block + i] = data[s + 1 + i];
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- main */

typedef struct opts {
    const char *data, *attn, *compile, *scope, *init, *save;
    int steps, batch, block, layers, heads, width, threads, quiet, exact, sample;
    double lr;
    long long seed;
} opts;

static void usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [--data FILE] [--steps N] [--batch N] [--block T] [--layers N] "
            "[--heads N] [--width C] [--lr LR] [--attn builtin|custom] "
            "[--compile none|default|interp|c] [--compile-scope step|model] [--threads N] "
            "[--seed S] [--init FILE] "
            "[--save FILE] [--sample N] [--quiet] [--exact]\n",
            prog);
}

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.data = "/usr/share/common-licenses/GPL-3",
                .attn = "builtin",
                .compile = "default",
                .scope = "step",
                .steps = 200,
                .batch = 4,
                .block = 64,
                .layers = 4,
                .heads = 4,
                .width = 128,
                .lr = 1e-4,
                .seed = 1337};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        if (!strcmp(a, "--exact")) {
            o->exact = 1;
            continue;
        }
        if (i + 1 >= argc) {
            usage(argv[0]);
            return -1;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--data"))
            o->data = v;
        else if (!strcmp(a, "--attn"))
            o->attn = v;
        else if (!strcmp(a, "--compile"))
            o->compile = v;
        else if (!strcmp(a, "--compile-scope"))
            o->scope = v;
        else if (!strcmp(a, "--init"))
            o->init = v;
        else if (!strcmp(a, "--save"))
            o->save = v;
        else if (!strcmp(a, "--steps"))
            o->steps = atoi(v);
        else if (!strcmp(a, "--batch"))
            o->batch = atoi(v);
        else if (!strcmp(a, "--block"))
            o->block = atoi(v);
        else if (!strcmp(a, "--layers"))
            o->layers = atoi(v);
        else if (!strcmp(a, "--heads"))
            o->heads = atoi(v);
        else if (!strcmp(a, "--width"))
            o->width = atoi(v);
        else if (!strcmp(a, "--threads"))
            o->threads = atoi(v);
        else if (!strcmp(a, "--lr"))
            o->lr = atof(v);
        else if (!strcmp(a, "--seed"))
            o->seed = atoll(v);
        else if (!strcmp(a, "--sample"))
            o->sample = atoi(v);
        else {
            usage(argv[0]);
            return -1;
        }
    }
    if (strcmp(o->attn, "builtin") && strcmp(o->attn, "custom")) {
        fprintf(stderr, "--attn: builtin or custom, not '%s'\n", o->attn);
        return -1;
    }
    if (strcmp(o->compile, "none") && strcmp(o->compile, "default") &&
        strcmp(o->compile, "interp") && strcmp(o->compile, "c")) {
        fprintf(stderr, "--compile: none, default, interp or c, not '%s'\n", o->compile);
        return -1;
    }
    if (strcmp(o->scope, "step") && strcmp(o->scope, "model")) {
        fprintf(stderr, "--compile-scope: step or model, not '%s'\n", o->scope);
        return -1;
    }
    if (o->steps < 0 || o->batch < 1 || o->block < 1 || o->layers < 1 || o->layers > 64 ||
        o->heads < 1 || o->width < 1 || o->width % o->heads) {
        fprintf(stderr, "bad sizes (layers 1..64, width a multiple of heads)\n");
        return -1;
    }
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static unsigned char *load_data(const char *path, int64_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        jg_set_error("cannot open %s", path);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0, got;
    unsigned char *d = malloc(cap);
    while (d && (got = fread(d + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            unsigned char *e = realloc(d, cap *= 2);
            if (!e)
                free(d);
            d = e;
        }
    }
    fclose(f);
    if (!d) {
        jg_set_error("out of memory");
        return NULL;
    }
    for (size_t i = 0; i < len; i++)
        d[i] %= 128; /* vocabulary 128 */
    *n = (int64_t)len;
    return d;
}

int main(int argc, char **argv) {
    opts o;
    if (parse(argc, argv, &o) < 0)
        return 2;
    if (o.threads && jg_set_num_threads(o.threads) < 0)
        goto fail_early;
    jg_manual_seed((uint64_t)o.seed);
    cfg c = {128, o.block, o.layers, o.heads, o.width, !strcmp(o.attn, "custom")};
    gpt m = {0};
    jg_optim *opt = NULL;
    jg_compiled *comp = NULL;
    unsigned char *data = NULL;
    double *times = NULL;
    int rc = 1;
    if (gpt_init(&m, &c) < 0 || (o.init && gpt_load(&m, o.init) < 0))
        goto fail;
    named ps[16 + 12 * 64];
    int np = params_of(&m, ps);
    jg_tensor *params[16 + 12 * 64];
    for (int i = 0; i < np; i++)
        params[i] = *ps[i].p;
    if (!(opt = jg_optim_adamw(params, np, o.lr, 0.9, 0.999, 1e-8, 0.0)))
        goto fail;
    trainer tr = {&m, opt};
    if (strcmp(o.compile, "none")) {
        jg_compile_options co = {strcmp(o.compile, "default") ? o.compile : NULL, false, false};
        bool whole = !strcmp(o.scope, "step");
        if (!(comp = whole ? jg_compile(step_program, &tr, &co) : jg_compile(program, &m, &co)))
            goto fail;
    }
    int64_t n_all;
    if (!(data = load_data(o.data, &n_all)))
        goto fail;
    int64_t n_train = (int64_t)(0.9 * (double)n_all); /* int(0.9 * len(data)) */
    splitmix64 rng = {(uint64_t)o.seed};
    times = calloc((size_t)o.steps + 1, sizeof *times);
    double last = NAN;
    for (int step = 0; step < o.steps; step++) {
        jg_scope_push();
        jg_tensor *x, *y, *loss = NULL;
        int ok = next_batch(data, n_train, o.batch, o.block, &rng, &x, &y) == 0;
        double t0 = now();
        if (ok && comp && !strcmp(o.scope, "step")) {
            ok = jg_compiled_call(comp, NULL, 0, 2, (jg_tensor *[]){x, y}, &loss) == 1;
        } else {
            if (ok && comp)
                ok = jg_compiled_call(comp, NULL, 0, 2, (jg_tensor *[]){x, y}, &loss) == 1;
            else if (ok)
                ok = (loss = gpt_loss(&m, x, y)) != NULL;
            ok = ok && jg_optim_zero_grad(opt, true) == 0 && jg_backward(loss, NULL, 0) == 0 &&
                 jg_optim_step(opt) == 0;
        }
        if (ok)
            last = jg_item(loss);
        times[step] = now() - t0;
        jg_scope_pop();
        if (!ok)
            goto fail;
        if (!o.quiet) {
            printf(o.exact ? "step %d: loss %.9g\n" : "step %d: loss %.6f\n", step, last);
            fflush(stdout);
        }
    }
    double vloss = NAN;
    {
        jg_scope_push();
        bool was = jg_set_grad_enabled(false);
        splitmix64 vr = {(uint64_t)(o.seed + 1)};
        jg_tensor *vx, *vy, *l = NULL;
        if (next_batch(data + n_train, n_all - n_train, o.batch, o.block, &vr, &vx, &vy) == 0)
            l = gpt_loss(&m, vx, vy);
        if (l)
            vloss = jg_item(l);
        jg_set_grad_enabled(was);
        jg_scope_pop();
        if (!l)
            goto fail;
    }
    if (o.steps > 0) {
        int ns = o.steps > 1 ? o.steps - 1 : 1;
        double *steady = o.steps > 1 ? times + 1 : times;
        qsort(steady, (size_t)ns, sizeof *steady, cmp_double);
        double med = ns % 2 ? steady[ns / 2] : 0.5 * (steady[ns / 2 - 1] + steady[ns / 2]);
        printf(o.exact ? "jitgrad-c attn=%s compile=%s: %d steps, final loss %.9g, val loss "
                         "%.9g, median %.2f ms/step\n"
                       : "jitgrad-c attn=%s compile=%s: %d steps, final loss %.6f, val loss "
                         "%.6f, median %.2f ms/step\n",
               o.attn, o.compile, o.steps, last, vloss, 1000 * med);
    }
    if (comp && !o.quiet)
        fprintf(stderr, "compiled: %d graph(s), %d call(s) ran eagerly\n",
                jg_compiled_entries(comp), jg_compiled_fallbacks(comp));
    if (o.save && gpt_save(&m, o.save) < 0)
        goto fail;
    if (o.sample > 0 && gpt_sample(&m, o.sample, (uint64_t)o.seed) < 0)
        goto fail;
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "error: %s\n", jg_last_error());
    jg_compiled_free(comp);
    jg_optim_free(opt);
    gpt_free(&m);
    free(data);
    free(times);
    return rc;
fail_early:
    fprintf(stderr, "error: %s\n", jg_last_error());
    return 1;
}
