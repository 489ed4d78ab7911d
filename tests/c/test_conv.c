/* Convolution and pooling through the C API: values against PyTorch 1.13,
 * gradients and double backward by finite differences over a grid of
 * strides, paddings, dilations and groups, PyTorch's errors, and compiled
 * == eager bitwise on both backends. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* sin(0, 1, 2, ...) or cos(...) of the shape, as a tensor of dtype dt */
static jg_tensor *wave(jg_dtype dt, int ndim, const int64_t *shape, bool cosine) {
    int64_t n = tu_numel(ndim, shape);
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = cosine ? cos((double)i) : sin((double)i);
    jg_tensor *t = tu_tensor(dt, ndim, shape, v);
    free(v);
    return t;
}

static const int64_t one2[2] = {1, 1}, zero2[2] = {0, 0};

/* PyTorch 1.13, f64: x = arange(32).sin() [2, 2, 4, 4], w = arange(24).cos()
 * [3, 2, 2, 2], b = [0.5, -1, 0.25]: conv2d(stride=(2, 1), padding=(1, 0)),
 * max_pool2d(2, return_indices=True), avg_pool2d(3, 2, 1,
 * count_include_pad=False), the first elements */
static void test_values_match_torch(void **state) {
    (void)state;
    for (int d = 0; d < 2; d++) {
        jg_dtype dt = d ? JG_F32 : JG_F64;
        double tol = d ? 2e-6 : 1e-12;
        jg_tensor *x = wave(dt, 4, TU_SHAPE(2, 2, 4, 4), false);
        jg_tensor *w = wave(dt, 4, TU_SHAPE(3, 2, 2, 2), true);
        jg_tensor *b = tu_tensor(dt, 1, TU_SHAPE(3), TU_VALS(0.5, -1.0, 0.25));
        jg_tensor *y = jg_conv2d(x, w, b, TU_SHAPE(2, 1), TU_SHAPE(1, 0), one2, 1);
        assert_non_null(y);
        assert_int_equal(jg_ndim(y), 4);
        double v[54];
        tu_values(y, v);
        const double want[6] = {-1.3342859076046887, -2.239649401796707,   -0.6261918705173724,
                                -2.9233269953310215, -0.34438918444969413, 3.0108761485144457};
        for (int i = 0; i < 6; i++)
            assert_true(fabs(v[i] - want[i]) <= tol * 4);
        jg_tensor *idx = NULL;
        jg_tensor *m = jg_max_pool2d(x, TU_SHAPE(2, 2), TU_SHAPE(2, 2), zero2, one2, false, &idx);
        assert_non_null(m);
        double mv[16], iv[16];
        tu_values(m, mv);
        tu_values(idx, iv);
        const double wm[8] = {0.8414709848078965,  0.9092974268256817, 0.9893582466233818,
                              0.9906073556948704,  0.9129452507276277, 0.14987720966295234,
                              0.27090578830786904, 0.956375928404503};
        const double wi[8] = {1, 2, 8, 14, 4, 3, 12, 11};
        for (int i = 0; i < 8; i++) {
            assert_true(fabs(mv[i] - wm[i]) <= tol);
            assert_true(iv[i] == wi[i]);
        }
        assert_int_equal(jg_dtype_of(idx), JG_I64);
        jg_tensor *a = jg_avg_pool2d(x, TU_SHAPE(3, 3), TU_SHAPE(2, 2), one2, false, false, 0);
        double av[16];
        tu_values(a, av);
        const double wa[4] = {-0.21856394629079254, 0.21842254092502836, -0.07177598654662037,
                              0.0386462473707818};
        for (int i = 0; i < 4; i++)
            assert_true(fabs(av[i] - wa[i]) <= tol);
    }
}

typedef struct {
    int64_t stride[2], pad[2], dil[2], groups;
    bool bias, same;
} conv_case;

static jg_tensor *f_conv(void *user, int n, jg_tensor *const *in) {
    const conv_case *c = user;
    jg_tensor *b = n > 2 ? in[2] : NULL;
    if (c->same)
        return jg_conv2d_same(in[0], in[1], b, c->dil, c->groups);
    return jg_conv2d(in[0], in[1], b, c->stride, c->pad, c->dil, c->groups);
}

/* the gradient of sum(f(x)^2) by every input, with create_graph: its
 * gradcheck checks the gradient rows' own VJPs (double backward) */
typedef struct {
    jg_gradcheck_fn f;
    void *user;
} dbl;

static jg_tensor *f_grad(void *user, int n, jg_tensor *const *in) {
    dbl *d = user;
    jg_tensor *y = d->f(d->user, n, in);
    jg_tensor *root = y ? jg_sum(jg_mul(y, y)) : NULL;
    jg_tensor *g[3] = {NULL, NULL, NULL};
    if (!root || jg_autograd_grad(1, &root, NULL, n, in, JG_CREATE_GRAPH, g) < 0)
        return NULL;
    jg_tensor *s = jg_sum(jg_mul(g[0], g[0]));
    for (int k = 1; k < n; k++)
        s = jg_add(s, jg_sum(jg_mul(g[k], g[k])));
    return s;
}

static void test_conv_gradients(void **state) {
    (void)state;
    const conv_case cases[] = {
        {{1, 1}, {0, 0}, {1, 1}, 1, true, false},  {{2, 1}, {1, 0}, {1, 1}, 1, true, false},
        {{1, 2}, {1, 2}, {2, 1}, 1, false, false}, {{1, 1}, {1, 1}, {1, 1}, 2, true, false},
        {{2, 2}, {0, 1}, {1, 2}, 2, false, false}, {{1, 1}, {0, 0}, {1, 1}, 1, true, true},
        {{1, 1}, {0, 0}, {2, 1}, 2, false, true},
    };
    jg_manual_seed(3);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const conv_case *c = &cases[k];
        /* x [2, 4, 5, 6], w [4, 4 / g, 2, 3] (an even kernel height: 'same'
         * pads one more at the bottom) */
        jg_tensor *in[3] = {jg_randn(JG_F64, 4, TU_SHAPE(2, 4, 5, 6)),
                            jg_randn(JG_F64, 4, TU_SHAPE(4, 4 / c->groups, 2, 3)),
                            jg_randn(JG_F64, 1, TU_SHAPE(4))};
        int n = c->bias ? 3 : 2;
        for (int i = 0; i < n; i++)
            jg_set_requires_grad(in[i], true);
        if (jg_gradcheck(f_conv, (void *)c, n, in, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("case %zu: %s", k, jg_last_error());
        dbl d = {f_conv, (void *)c};
        if (jg_gradcheck(f_grad, &d, n, in, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("case %zu double backward: %s", k, jg_last_error());
    }
    /* 'same' keeps the spatial size; the node is PyTorch's */
    conv_case same = {{1, 1}, {0, 0}, {1, 1}, 1, false, true};
    jg_tensor *x = jg_randn(JG_F32, 3, TU_SHAPE(4, 5, 6)); /* unbatched */
    jg_tensor *w = jg_randn(JG_F32, 4, TU_SHAPE(2, 4, 4, 3));
    jg_set_requires_grad(w, true);
    jg_tensor *y = f_conv(&same, 2, (jg_tensor *[]){x, w});
    assert_non_null(y);
    assert_int_equal(jg_ndim(y), 3);
    assert_int_equal(jg_shape(y)[0], 2);
    assert_int_equal(jg_shape(y)[1], 5);
    assert_int_equal(jg_shape(y)[2], 6);
    /* (PyTorch's unbatched result is a squeeze of the node's) */
    x = jg_reshape(x, 4, TU_SHAPE(1, 4, 5, 6));
    assert_string_equal(jg_grad_fn_name(f_conv(&same, 2, (jg_tensor *[]){x, w})),
                        "ConvolutionBackward0");
}

typedef struct {
    int64_t stride[2], pad[2], opad[2], dil[2], groups;
} convt_case;

static jg_tensor *f_convt(void *user, int n, jg_tensor *const *in) {
    const convt_case *c = user;
    return jg_conv_transpose2d(in[0], in[1], n > 2 ? in[2] : NULL, c->stride, c->pad, c->opad,
                               c->dil, c->groups);
}

/* jg_conv_transpose2d: gradients and double backward by finite differences
 * (an output_padding of the stride or more, below the dilation, included),
 * and its value is conv2d's input gradient bit for bit */
static void test_conv_transpose(void **state) {
    (void)state;
    const convt_case cases[] = {
        {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, {{2, 1}, {1, 0}, {1, 0}, {1, 1}, 1},
        {{2, 3}, {0, 2}, {1, 2}, {1, 2}, 2}, {{1, 1}, {2, 1}, {2, 1}, {3, 2}, 1},
        {{1, 2}, {1, 1}, {0, 1}, {2, 1}, 2},
    };
    jg_manual_seed(4);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const convt_case *c = &cases[k];
        jg_tensor *in[3] = {jg_randn(JG_F64, 4, TU_SHAPE(2, 4, 3, 4)),
                            jg_randn(JG_F64, 4, TU_SHAPE(4, 6 / c->groups, 2, 3)),
                            jg_randn(JG_F64, 1, TU_SHAPE(6))};
        for (int i = 0; i < 3; i++)
            jg_set_requires_grad(in[i], true);
        jg_tensor *y = f_convt((void *)c, 3, in);
        assert_non_null(y);
        for (int d = 0; d < 2; d++)
            assert_int_equal(jg_shape(y)[2 + d],
                             (jg_shape(in[0])[2 + d] - 1) * c->stride[d] - 2 * c->pad[d] +
                                 c->dil[d] * (jg_shape(in[1])[2 + d] - 1) + c->opad[d] + 1);
        if (jg_gradcheck(f_convt, (void *)c, 3, in, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("case %zu: %s", k, jg_last_error());
        dbl d = {f_convt, (void *)c};
        if (jg_gradcheck(f_grad, &d, 2, in, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("case %zu double backward: %s", k, jg_last_error());
        /* y0 -> conv2d(y0, w) maps y's shape to x's (output_padding below
         * the stride); its input gradient at x is the transposed
         * convolution of x */
        if (c->opad[0] >= c->stride[0] || c->opad[1] >= c->stride[1])
            continue;
        jg_tensor *y0 = jg_full(JG_F64, 4, jg_shape(y), 0.0);
        jg_set_requires_grad(y0, true);
        jg_tensor *fy = jg_conv2d(y0, in[1], NULL, c->stride, c->pad, c->dil, c->groups);
        assert_non_null(fy);
        jg_tensor *gy = NULL;
        if (jg_autograd_grad(1, &fy, (jg_tensor *[]){in[0]}, 1, &y0, 0, &gy) < 0)
            fail_msg("case %zu: %s", k, jg_last_error());
        TU_SAME(gy, f_convt((void *)c, 2, in));
    }
    jg_tensor *x = jg_full(JG_F32, 4, TU_SHAPE(2, 4, 5, 5), 0.0);
    jg_tensor *w = jg_full(JG_F32, 4, TU_SHAPE(4, 3, 3, 3), 0.0);
    const int64_t two2[2] = {2, 2};
    assert_null(jg_conv_transpose2d(x, w, NULL, two2, zero2, two2, one2, 1));
    TU_ERROR("output padding must be smaller than either stride or dilation, but got "
             "output_padding_height: 2 output_padding_width: 2 stride_height: 2 stride_width: 2 "
             "dilation_height: 1 dilation_width: 1");
    assert_null(jg_conv_transpose2d(x, w, NULL, one2, TU_SHAPE(4, 4), zero2, one2, 1));
    TU_ERROR("Given input size per channel: (5 x 5). Calculated output size per channel: (-1 x "
             "-1). Output size is too small");
    assert_null(jg_conv_transpose2d(x, jg_full(JG_F32, 4, TU_SHAPE(5, 3, 3, 3), 0.0), NULL, one2,
                                    zero2, zero2, one2, 1));
    TU_ERROR("Given transposed=1, weight of size [5, 3, 3, 3], expected input[2, 4, 5, 5] to have "
             "5 channels, but got 4 channels instead");
    assert_null(jg_conv_transpose2d(x, w, jg_full(JG_F32, 1, TU_SHAPE(4), 0.0), one2, zero2, zero2,
                                    one2, 1));
    TU_ERROR("Given transposed=1, weight of size [4, 3, 3, 3], expected bias to be 1-dimensional "
             "with 3 elements, but got bias of size [4] instead");
    assert_null(jg_conv_transpose2d(x, jg_full(JG_F64, 4, TU_SHAPE(4, 3, 3, 3), 0.0), NULL, one2,
                                    zero2, zero2, one2, 1));
    TU_ERROR("expected scalar type Float but found Double");
    assert_null(jg_conv_transpose2d(x, w, NULL, one2, zero2, TU_SHAPE(0, -1), one2, 1));
    TU_ERROR("negative output_padding is not supported");
}

typedef struct {
    int64_t k[2], s[2], p[2], d[2];
    bool ceil, avg, incl;
} pool_case;

static jg_tensor *f_pool(void *user, int n, jg_tensor *const *in) {
    (void)n;
    const pool_case *c = user;
    if (c->avg)
        return jg_avg_pool2d(in[0], c->k, c->s, c->p, c->ceil, c->incl, 0);
    return jg_max_pool2d(in[0], c->k, c->s, c->p, c->d, c->ceil, NULL);
}

static jg_tensor *f_adaptive(void *user, int n, jg_tensor *const *in) {
    (void)user, (void)n;
    return jg_adaptive_avg_pool2d(in[0], TU_SHAPE(3, 2));
}

static void test_pool_gradients(void **state) {
    (void)state;
    const pool_case cases[] = {
        {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, false, false},
        {{3, 2}, {1, 2}, {1, 1}, {1, 1}, true, false, false},
        {{2, 3}, {2, 1}, {1, 0}, {2, 1}, false, false, false},
        {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true, true},
        {{3, 2}, {2, 1}, {1, 1}, {1, 1}, true, true, false},
        {{2, 2}, {1, 1}, {0, 0}, {1, 1}, false, true, true},
    };
    jg_manual_seed(4);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        jg_tensor *x = jg_randn(JG_F64, 4, TU_SHAPE(2, 3, 5, 6));
        jg_set_requires_grad(x, true);
        if (jg_gradcheck(f_pool, (void *)&cases[k], 1, &x, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("case %zu: %s", k, jg_last_error());
        dbl d = {f_pool, (void *)&cases[k]};
        if (jg_gradcheck(f_grad, &d, 1, &x, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("case %zu double backward: %s", k, jg_last_error());
        jg_tensor *y = f_pool((void *)&cases[k], 1, &x);
        assert_string_equal(jg_grad_fn_name(y),
                            cases[k].avg ? "AvgPool2DBackward0" : "MaxPool2DWithIndicesBackward0");
    }
    /* unbatched [C, H, W] input is pooled as it is (PyTorch's node) */
    jg_tensor *u = jg_randn(JG_F64, 3, TU_SHAPE(2, 5, 4));
    jg_set_requires_grad(u, true);
    for (size_t k = 0; k < 4; k += 3) {
        if (jg_gradcheck(f_pool, (void *)&cases[k], 1, &u, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("unbatched case %zu: %s", k, jg_last_error());
        jg_tensor *y = f_pool((void *)&cases[k], 1, &u);
        assert_int_equal(jg_ndim(y), 3);
        assert_string_equal(jg_grad_fn_name(y),
                            cases[k].avg ? "AvgPool2DBackward0" : "MaxPool2DWithIndicesBackward0");
    }
    /* adaptive_avg_pool2d: PyTorch 1.13's values for arange(12) [1, 3, 4] to
     * (2, 3); gradients and double backward; (1, 1) is a mean */
    jg_tensor *r = jg_linspace(JG_F64, 0, 11, 12);
    r = jg_reshape(r, 3, TU_SHAPE(1, 3, 4));
    TU_CHECK(jg_adaptive_avg_pool2d(r, TU_SHAPE(2, 3)), 3, TU_SHAPE(1, 2, 3),
             TU_VALS(2.5, 3.5, 4.5, 6.5, 7.5, 8.5), 1e-12);
    jg_tensor *ax = jg_randn(JG_F64, 4, TU_SHAPE(2, 2, 7, 5));
    jg_set_requires_grad(ax, true);
    if (jg_gradcheck(f_adaptive, NULL, 1, &ax, 1e-6, 1e-6, 1e-5) < 0)
        fail_msg("adaptive: %s", jg_last_error());
    dbl da = {f_adaptive, NULL};
    if (jg_gradcheck(f_grad, &da, 1, &ax, 1e-6, 1e-5, 1e-4) < 0)
        fail_msg("adaptive double backward: %s", jg_last_error());
    assert_string_equal(jg_grad_fn_name(f_adaptive(NULL, 1, &ax)), "AdaptiveAvgPool2DBackward0");
    assert_string_equal(jg_grad_fn_name(jg_adaptive_avg_pool2d(ax, one2)), "MeanBackward1");
    assert_null(jg_adaptive_avg_pool2d(ax, TU_SHAPE(-1, 2)));
    TU_ERROR("elements of output_size must be greater than or equal to 0 but received {-1, 2}");
    /* the NaN wins the window, as in PyTorch */
    jg_tensor *x = tu_tensor(JG_F32, 3, TU_SHAPE(1, 2, 2), TU_VALS(1, NAN, 5, 2));
    jg_tensor *idx;
    jg_tensor *m = jg_max_pool2d(x, TU_SHAPE(2, 2), TU_SHAPE(2, 2), zero2, one2, false, &idx);
    double v, iv;
    tu_values(m, &v);
    tu_values(idx, &iv);
    assert_true(isnan(v));
    assert_true(iv == 1);
}

static void test_bad_input(void **state) {
    (void)state;
    jg_tensor *x = jg_full(JG_F32, 4, TU_SHAPE(2, 3, 5, 5), 0.0);
    jg_tensor *w = jg_full(JG_F32, 4, TU_SHAPE(4, 3, 3, 3), 0.0);
    assert_null(jg_conv2d(jg_full(JG_F32, 2, TU_SHAPE(5, 5), 0.0), w, NULL, one2, zero2, one2, 1));
    TU_ERROR("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
             "[5, 5]");
    assert_null(
        jg_conv2d(jg_full(JG_F32, 4, TU_SHAPE(2, 1, 5, 5), 0.0), w, NULL, one2, zero2, one2, 1));
    TU_ERROR("Given groups=1, weight of size [4, 3, 3, 3], expected input[2, 1, 5, 5] to have 3 "
             "channels, but got 1 channels instead");
    assert_null(
        jg_conv2d(jg_full(JG_F32, 3, TU_SHAPE(1, 5, 5), 0.0), w, NULL, one2, zero2, one2, 1));
    TU_ERROR("expected input[1, 1, 5, 5] to have 3 channels");
    assert_null(
        jg_conv2d(jg_full(JG_F32, 4, TU_SHAPE(2, 3, 2, 2), 0.0), w, NULL, one2, zero2, one2, 1));
    TU_ERROR("Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size "
             "can't be greater than actual input size");
    assert_null(jg_conv2d(x, w, jg_full(JG_F32, 1, TU_SHAPE(3), 0.0), one2, zero2, one2, 1));
    TU_ERROR("Given weight of size [4, 3, 3, 3], expected bias to be 1-dimensional with 4 "
             "elements, but got bias of size [3] instead");
    assert_null(jg_conv2d(x, w, NULL, zero2, zero2, one2, 1));
    TU_ERROR("non-positive stride is not supported");
    assert_null(jg_conv2d(x, w, NULL, one2, TU_SHAPE(-1, 0), one2, 1));
    TU_ERROR("negative padding is not supported");
    assert_null(jg_conv2d(x, w, NULL, one2, zero2, zero2, 1));
    TU_ERROR("non-positive dilation is not supported");
    assert_null(jg_conv2d(x, w, NULL, one2, zero2, one2, 0));
    TU_ERROR("non-positive groups is not supported");
    assert_null(jg_conv2d(x, w, NULL, one2, zero2, one2, 3));
    TU_ERROR("Given groups=3, expected weight to be divisible by 3 at dimension 0, but got weight "
             "of size [[4, 3, 3, 3]] instead");
    assert_null(
        jg_conv2d(x, jg_full(JG_F64, 4, TU_SHAPE(4, 3, 3, 3), 0.0), NULL, one2, zero2, one2, 1));
    TU_ERROR("Input type (torch.FloatTensor) and weight type (torch.DoubleTensor) should be the "
             "same or input should be a MKLDNN tensor and weight is a dense tensor");
    assert_null(jg_conv2d(x, w, jg_full(JG_F64, 1, TU_SHAPE(4), 0.0), one2, zero2, one2, 1));
    TU_ERROR("Input type (float) and bias type (double) should be the same");
    assert_null(
        jg_conv2d(x, jg_full(JG_F32, 3, TU_SHAPE(4, 3, 3), 0.0), NULL, one2, zero2, one2, 1));
    TU_ERROR("Expected 4-dimensional weight for 4-dimensional input [2, 3, 5, 5], but got "
             "3-dimensional weight of size [4, 3, 3] instead");
    const int64_t k3[2] = {3, 3}, k2[2] = {2, 2};
    assert_null(jg_max_pool2d(x, k3, k3, TU_SHAPE(2, 2), one2, false, NULL));
    TU_ERROR("pad should be at most half of kernel size, but got pad=2 and kernel_size=3");
    assert_null(jg_max_pool2d(jg_full(JG_F32, 4, TU_SHAPE(2, 3, 2, 2), 0.0), k3, k3, zero2, one2,
                              false, NULL));
    TU_ERROR("Given input size: (3x2x2). Calculated output size: (3x0x0). Output size is too "
             "small");
    assert_null(jg_max_pool2d(x, k2, zero2, zero2, one2, false, NULL));
    TU_ERROR("stride should not be zero");
    assert_null(jg_max_pool2d(x, k2, k2, zero2, zero2, false, NULL));
    TU_ERROR("dilation should be greater than zero, but got dilationH: 0 dilationW: 0");
    assert_null(jg_max_pool2d(jg_full(JG_I64, 4, TU_SHAPE(1, 1, 4, 4), 0.0), k2, k2, zero2, one2,
                              false, NULL));
    TU_ERROR("\"max_pool2d\" not implemented for 'Long'");
    assert_null(jg_avg_pool2d(x, k2, k2, TU_SHAPE(-1, 0), false, true, 0));
    TU_ERROR("pad must be non-negative, but got pad: -1");
    assert_null(
        jg_avg_pool2d(jg_full(JG_F32, 2, TU_SHAPE(5, 5), 0.0), k2, k2, zero2, false, true, 0));
    TU_ERROR("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input");
}

/* sum(avg_pool(max_pool(relu(conv(x, w, b)))) * conv(x, w2)), both [3, 5, 3, 3] */
static int p_cnn(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_relu(jg_conv2d(in[0], in[1], in[2], one2, one2, one2, 1));
    h = jg_max_pool2d(h, TU_SHAPE(2, 2), TU_SHAPE(2, 2), zero2, one2, false, NULL);
    h = jg_avg_pool2d(h, TU_SHAPE(2, 2), one2, zero2, false, true, 0);
    jg_tensor *g = jg_conv2d(in[0], in[3], NULL, TU_SHAPE(2, 2), zero2, TU_SHAPE(1, 3), 1);
    out[0] = h && g ? jg_sum(jg_mul(h, g)) : NULL;
    return out[0] ? 1 : -1;
}

static void check_compiled(const char *backend, jg_dtype dt) {
    jg_manual_seed(11);
    jg_tensor *in[4] = {jg_randn(dt, 4, TU_SHAPE(3, 4, 8, 9)),
                        jg_randn(dt, 4, TU_SHAPE(5, 4, 3, 3)), jg_randn(dt, 1, TU_SHAPE(5)), NULL};
    in[3] = jg_randn(dt, 4, TU_SHAPE(5, 4, 3, 2));
    jg_tensor *params[4];
    for (int i = 0; i < 4; i++) {
        params[i] = jg_detach(in[i]);
        jg_set_requires_grad(params[i], true);
    }
    jg_tensor *eout, *cout, *eg[4];
    if (p_cnn(NULL, NULL, 4, params, &eout) != 1)
        fail_msg("%s", jg_last_error());
    assert_int_equal(jg_backward(eout, NULL, 0), 0);
    for (int i = 0; i < 4; i++) {
        eg[i] = jg_clone(jg_grad(params[i]));
        jg_clear_grad(params[i]);
    }
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *c = jg_compile(p_cnn, NULL, &o);
    assert_non_null(c);
    if (jg_compiled_call(c, NULL, 0, 4, params, &cout) != 1)
        fail_msg("%s", jg_last_error());
    TU_SAME(cout, eout);
    assert_int_equal(jg_backward(cout, NULL, 0), 0);
    for (int i = 0; i < 4; i++)
        TU_SAME(jg_grad(params[i]), eg[i]);
    jg_compiled_free(c);
}

static void test_compiled_equals_eager(void **state) {
    (void)state;
    check_compiled("interp", JG_F32);
    check_compiled("interp", JG_F64);
    if (!jg_compile_backend_available("c"))
        skip();
    check_compiled("c", JG_F32);
    check_compiled("c", JG_F64);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_values_match_torch),    TU_TEST(test_conv_gradients),
        TU_TEST(test_pool_gradients),        TU_TEST(test_bad_input),
        TU_TEST(test_compiled_equals_eager), TU_TEST(test_conv_transpose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
