#include "testutil_fns.h"

static int myfn_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 3, in);
    out[0] = jg_mul(in[0], jg_add(in[1], in[2]));
    return 1;
}

static int myfn_backward(jg_ctx *ctx, int n_out, jg_tensor *const *dout, int n_in,
                         jg_tensor **din) {
    (void)n_out;
    (void)n_in;
    jg_tensor *q = jg_ctx_saved(ctx, 0), *k = jg_ctx_saved(ctx, 1), *v = jg_ctx_saved(ctx, 2);
    if (!q || !k || !v)
        return -1;
    bool mask_v_grad = *(const bool *)jg_ctx_args(ctx);
    jg_tensor *dk = jg_mul(dout[0], q), *dv = jg_mul(dout[0], q);
    din[0] = jg_mul(dout[0], jg_add(k, v));
    if (mask_v_grad) {
        din[1] = jg_add(dk, dv);
        din[2] = NULL;
    } else {
        din[1] = dk;
        din[2] = dv;
    }
    return 3;
}

const jg_function tf_myfn = {"MyFn", myfn_forward, myfn_backward, NULL};

int tf_mul_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 2, in);
    out[0] = jg_mul(in[0], in[1]);
    return 1;
}

int tf_mul_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    const tf_mul_cfg *c = jg_ctx_args(ctx);
    jg_tensor *a = jg_ctx_saved(ctx, 0), *b = jg_ctx_saved(ctx, 1);
    din[0] = c->null0 ? NULL : jg_mul(b, g[0]);
    din[1] = c->null1 ? NULL : jg_mul(a, g[0]);
    return n_in + c->extra_count;
}

const jg_function tf_mul = {"Mul", tf_mul_forward, tf_mul_backward, NULL};

jg_tensor *tf_apply1(const jg_function *fn, int n, jg_tensor *const *in, const void *args,
                     size_t size) {
    jg_tensor *out[JG_MAX_OUTPUTS];
    return jg_apply(fn, n, in, args, size, out) < 0 ? NULL : out[0];
}

int tf_mlp(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_tanh(jg_add(jg_matmul(in[0], in[1]), in[2]));
    jg_tensor *r = jg_relu(jg_matmul(h, in[3]));
    out[0] = jg_mean(jg_log(jg_add_scalar(r, 1.0)));
    return out[0] ? 1 : -1;
}

int tf_ce(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *l = jg_mul(in[0], in[1]);
    jg_tensor *ce = jg_cross_entropy(l, in[2]);
    jg_tensor *sm = jg_softmax(in[0], 1);
    jg_tensor *s0 = jg_sum(jg_slice(sm, 1, 0, 1));
    out[0] = jg_add(ce, s0);
    return out[0] ? 1 : -1;
}

int tf_bcast(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *a = in[0], *b = in[1], *c = in[2];
    jg_tensor *t = jg_sub(jg_mul(jg_add(a, b), c), jg_div(a, jg_add_scalar(jg_mul(b, b), 1)));
    out[0] = jg_sum(jg_exp(jg_mul_scalar(t, 0.25)));
    return out[0] ? 1 : -1;
}

int tf_qk(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(in[0], jg_add(in[1], in[1])));
    return out[0] ? 1 : -1;
}

int tf_seed(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)n;
    jg_tensor *y = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){in[0], in[1], in[1]}, args, sizeof(bool));
    return y ? (out[0] = y, 1) : -1;
}

int tf_all_slots(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)n;
    jg_tensor *y = tf_apply1(&tf_myfn, 3, (jg_tensor *[]){in[0], in[0], in[0]}, args, sizeof(bool));
    return y ? (out[0] = y, 1) : -1;
}
