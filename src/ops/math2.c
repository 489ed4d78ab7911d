/* The math2 ops: VJPs of the rounding, logarithm, hyperbolic and inverse
 * trigonometric rows of elementwise.def (floor ... erfc, atan2,
 * lerp_scalar), the three-operand addcmul, addcdiv and lerp (shape rule,
 * kernels, VJPs), and their public functions.
 *
 * VJPs follow PyTorch 1.13's derivatives.yaml in its operation order, written
 * with jitgrad ops so that double backward and jg_compile see them. */
#include "core/iter.h"
#include "ops/decls.h"

#include <math.h>

#define SUM_TO(g, k) ((g) ? jg_sum_to((g), meta[k].ndim, meta[k].shape) : NULL)
#define CHECK(k)                                                                                   \
    if (needs[k] && !gin[k])                                                                       \
    return -1

/* ------------------------------------------------------------ unary VJPs */

/* floor, ceil, trunc, round, sign, sgn: piecewise constant, so zeros (a
 * gradient of zeros, as PyTorch's zeros_like(grad), not "none") */
int jg_vjp_zeros(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_full(meta[0].dtype, meta[0].ndim, meta[0].shape, 0.0);
    CHECK(0);
    return 0;
}

int jg_vjp_zeros2(VJP_ARGS) {
    UNUSED_ARGS;
    for (int k = 0; k < 2; k++)
        gin[k] = needs[k] ? jg_full(meta[k].dtype, meta[k].ndim, meta[k].shape, 0.0) : NULL;
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_frac(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = gout[0];
    return 0;
}

int jg_vjp_log1p(VJP_ARGS) { /* grad / (x + 1) */
    UNUSED_ARGS;
    gin[0] = jg_div(gout[0], jg_add_scalar(in[0], 1.0));
    CHECK(0);
    return 0;
}

int jg_vjp_expm1(VJP_ARGS) { /* grad * (y + 1) */
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_add_scalar(out[0], 1.0));
    CHECK(0);
    return 0;
}

int jg_vjp_log2(VJP_ARGS) { /* grad / (x * ln 2) */
    UNUSED_ARGS;
    gin[0] = jg_div(gout[0], jg_mul_scalar(in[0], 0.6931471805599453));
    CHECK(0);
    return 0;
}

int jg_vjp_log10(VJP_ARGS) { /* grad / (x * ln 10) */
    UNUSED_ARGS;
    gin[0] = jg_div(gout[0], jg_mul_scalar(in[0], 2.3025850929940456));
    CHECK(0);
    return 0;
}

int jg_vjp_rsqrt(VJP_ARGS) { /* -0.5 * grad * y^3 */
    UNUSED_ARGS;
    gin[0] = jg_mul(jg_mul_scalar(gout[0], -0.5), jg_pow_scalar(out[0], 3.0));
    CHECK(0);
    return 0;
}

int jg_vjp_reciprocal(VJP_ARGS) { /* -grad * (y * y) */
    UNUSED_ARGS;
    gin[0] = jg_mul(jg_neg(gout[0]), jg_mul(out[0], out[0]));
    CHECK(0);
    return 0;
}

int jg_vjp_sinh(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_cosh(in[0]));
    CHECK(0);
    return 0;
}

int jg_vjp_cosh(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_sinh(in[0]));
    CHECK(0);
    return 0;
}

int jg_vjp_tan(VJP_ARGS) { /* grad * (1 + y^2) */
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_add_scalar(jg_pow_scalar(out[0], 2.0), 1.0));
    CHECK(0);
    return 0;
}

/* (-x * x + 1).rsqrt(), asin's derivative */
static jg_tensor *asin_d(jg_tensor *x) {
    return jg_rsqrt(jg_add_scalar(jg_mul(jg_neg(x), x), 1.0));
}

int jg_vjp_asin(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], asin_d(in[0]));
    CHECK(0);
    return 0;
}

int jg_vjp_acos(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_neg(asin_d(in[0])));
    CHECK(0);
    return 0;
}

int jg_vjp_atan(VJP_ARGS) { /* grad / (x * x + 1) */
    UNUSED_ARGS;
    gin[0] = jg_div(gout[0], jg_add_scalar(jg_mul(in[0], in[0]), 1.0));
    CHECK(0);
    return 0;
}

int jg_vjp_erfc(VJP_ARGS) { /* -2 / sqrt(pi) * exp(-(x^2)) * grad */
    UNUSED_ARGS;
    jg_tensor *e = jg_exp(jg_neg(jg_pow_scalar(in[0], 2.0)));
    gin[0] = jg_mul(jg_mul_scalar(e, -2.0 / sqrt(3.14159265358979323846)), gout[0]);
    CHECK(0);
    return 0;
}

/* atan2_backward: r = 1 / (a * a + b * b); grad * b * r and grad * -a * r */
int jg_vjp_atan2(VJP_ARGS) {
    UNUSED_ARGS;
    jg_tensor *r = jg_reciprocal(jg_add(jg_mul(in[0], in[0]), jg_mul(in[1], in[1])));
    if (needs[0])
        gin[0] = SUM_TO(jg_mul(jg_mul(gout[0], in[1]), r), 0);
    if (needs[1])
        gin[1] = SUM_TO(jg_mul(jg_mul(gout[0], jg_neg(in[0])), r), 1);
    CHECK(0);
    CHECK(1);
    return 0;
}

/* lerp with a number weight w: grad * (1 - w) (1 - w in double) and grad * w */
int jg_vjp_lerp_scalar(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_mul_scalar(gout[0], 1.0 - a->s), 0);
    if (needs[1])
        gin[1] = SUM_TO(jg_mul_scalar(gout[0], a->s), 1);
    CHECK(0);
    CHECK(1);
    return 0;
}

/* ------------------------------------------------------------ addcmul, addcdiv, lerp */

int jg_infer_ew3(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    jg_meta t;
    if (jg_broadcast_shapes(&in[0], &in[1], &t) < 0 || jg_broadcast_shapes(&t, &in[2], &out[0]) < 0)
        return -1;
    out[0].dtype = in[0].dtype;
    return 0;
}

/* p[0] the output, p[1..3] the operands (one dtype T); ctx the scalar.
 * Float addcmul is PyTorch's vectorized fmadd(s * t1, t2, self); its
 * integer form wraps like PyTorch's. */
#define ROW3(name, TY, T, expr)                                                                    \
    static void name##_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {               \
        const T s = (T)(*(const double *)ctx);                                                     \
        (void)s;                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T x = *(const T *)(p[1] + i * st[1]);                                            \
            const T u = *(const T *)(p[2] + i * st[2]);                                            \
            const T v = *(const T *)(p[3] + i * st[3]);                                            \
            *(T *)(p[0] + i * st[0]) = (expr);                                                     \
        }                                                                                          \
    }
ROW3(addcmul, f32, float, fmaf(s *u, v, x))
ROW3(addcmul, f64, double, fma(s *u, v, x))
ROW3(addcmul, i64, int64_t, (int64_t)((uint64_t)x + (uint64_t)s * (uint64_t)u * (uint64_t)v))
ROW3(addcmul, i32, int32_t, (int32_t)((uint32_t)x + (uint32_t)s * (uint32_t)u * (uint32_t)v))
ROW3(addcdiv, f32, float, x + s * u / v)
ROW3(addcdiv, f64, double, x + s * u / v)
/* lerp_scalar's expression with the weight an operand */
ROW3(lerp, f32, float, v < 0.5f ? fmaf(v, u - x, x) : fmaf(-(u - x), 1.0f - v, u))
ROW3(lerp, f64, double, v < 0.5 ? fma(v, u - x, x) : fma(-(u - x), 1.0 - v, u))

static int run3(const char *name, const jg_inner_fn *rows, double s, jg_tensor *const *in,
                jg_tensor *o) {
    if (!rows[o->dtype])
        return jg_errorf("\"%s\" not implemented for '%s'", name, jg_dtype_torch_name(o->dtype));
    if (o->numel == 0)
        return 0;
    char *base[4] = {jg_tensor_ptr(o), jg_tensor_ptr(in[0]), jg_tensor_ptr(in[1]),
                     jg_tensor_ptr(in[2])};
    int64_t st[4][JG_MAX_DIMS];
    for (int k = 0; k < 4; k++)
        jg_broadcast_strides(k ? in[k - 1] : o, o->ndim, o->shape, st[k]);
    jg_iter_run(o->ndim, o->shape, 4, base, st, rows[o->dtype], &s);
    return 0;
}

int jg_k_addcmul(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    static const jg_inner_fn rows[JG_NDTYPES] = {[JG_F32] = addcmul_row_f32,
                                                 [JG_F64] = addcmul_row_f64,
                                                 [JG_I64] = addcmul_row_i64,
                                                 [JG_I32] = addcmul_row_i32};
    return run3("addcmul_cpu_out", rows, a->s, in, out[0]);
}

int jg_k_addcdiv(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    static const jg_inner_fn rows[JG_NDTYPES] = {
        [JG_F32] = addcdiv_row_f32, [JG_F64] = addcdiv_row_f64};
    return run3("addcdiv_cpu_out", rows, a->s, in, out[0]);
}

int jg_k_lerp(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    static const jg_inner_fn rows[JG_NDTYPES] = {[JG_F32] = lerp_row_f32, [JG_F64] = lerp_row_f64};
    (void)a;
    return run3("lerp_kernel_tensor", rows, 0.0, in, out[0]);
}

/* self: grad; t1: grad * (t2 * value); t2: grad * (t1 * value) */
int jg_vjp_addcmul(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(gout[0], 0);
    if (needs[1])
        gin[1] = SUM_TO(jg_mul(gout[0], jg_mul_scalar(in[2], a->s)), 1);
    if (needs[2])
        gin[2] = SUM_TO(jg_mul(gout[0], jg_mul_scalar(in[1], a->s)), 2);
    CHECK(0);
    CHECK(1);
    CHECK(2);
    return 0;
}

/* self: grad; t1: grad * (value / t2); t2: -grad * (value * t1 / (t2 * t2)),
 * value / t2 being ATen's t2.reciprocal() * value */
int jg_vjp_addcdiv(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(gout[0], 0);
    if (needs[1])
        gin[1] = SUM_TO(jg_mul(gout[0], jg_mul_scalar(jg_reciprocal(in[2]), a->s)), 1);
    if (needs[2]) {
        jg_tensor *q = jg_div(jg_mul_scalar(in[1], a->s), jg_mul(in[2], in[2]));
        gin[2] = SUM_TO(jg_mul(jg_neg(gout[0]), q), 2);
    }
    CHECK(0);
    CHECK(1);
    CHECK(2);
    return 0;
}

/* self: grad * (1 - w); end: grad * w; weight: grad * (end - self) */
int jg_vjp_lerp(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_mul(gout[0], jg_add_scalar(jg_neg(in[2]), 1.0)), 0);
    if (needs[1])
        gin[1] = SUM_TO(jg_mul(gout[0], in[2]), 1);
    if (needs[2])
        gin[2] = SUM_TO(jg_mul(gout[0], jg_sub(in[1], in[0])), 2);
    CHECK(0);
    CHECK(1);
    CHECK(2);
    return 0;
}

/* ------------------------------------------------------------ public functions */

#define UNARY_API(fn, OP)                                                                          \
    jg_tensor *jg_##fn(jg_tensor *a) {                                                             \
        return jg_ew_call(JG_OP_##OP, a, NULL);                                                    \
    }
UNARY_API(floor, FLOOR)
UNARY_API(ceil, CEIL)
UNARY_API(trunc, TRUNC)
UNARY_API(round, ROUND)
UNARY_API(sign, SIGN)
UNARY_API(sgn, SGN)
UNARY_API(log1p, LOG1P)
UNARY_API(expm1, EXPM1)
UNARY_API(log2, LOG2)
UNARY_API(log10, LOG10)
UNARY_API(rsqrt, RSQRT)
UNARY_API(reciprocal, RECIPROCAL)
UNARY_API(sinh, SINH)
UNARY_API(cosh, COSH)
UNARY_API(tan, TAN)
UNARY_API(asin, ASIN)
UNARY_API(acos, ACOS)
UNARY_API(atan, ATAN)
UNARY_API(erfc, ERFC)

/* PyTorch's message for a kernel without integer and bool forms */
static void *refuse_dtype(const char *kernel, jg_dtype d) {
    return jg_errorf_null("\"%s\" not implemented for '%s'", kernel, jg_dtype_torch_name(d));
}

jg_tensor *jg_frac(jg_tensor *a) {
    if (a && !jg_dtype_is_float(a->dtype))
        return refuse_dtype("frac_cpu", a->dtype);
    return jg_ew_call(JG_OP_FRAC, a, NULL);
}

jg_tensor *jg_round_decimals(jg_tensor *a, int decimals) {
    if (!a)
        return jg_errorf_null("round(): tensor is NULL");
    if (decimals == 0 && !jg_dtype_is_float(a->dtype))
        return refuse_dtype("round_vml_cpu", a->dtype);
    if (!jg_dtype_is_float(a->dtype))
        return refuse_dtype("round_cpu", a->dtype);
    /* (decimals 0 too: round's values, PyTorch's RoundBackward1 node) */
    return jg_ew_call_scalar(JG_OP_ROUND_DECIMALS, a, (double)decimals);
}

jg_tensor *jg_atan2(jg_tensor *a, jg_tensor *b) {
    return jg_ew_call(JG_OP_ATAN2, a, b);
}

static jg_tensor *call3(jg_opcode op, double s, jg_tensor *x, jg_tensor *u, jg_tensor *v) {
    jg_attrs at = {.s = s};
    jg_tensor *in[3] = {x, u, v}, *out[1];
    return jg_op_call(op, &at, in, out) < 0 ? NULL : out[0];
}

jg_tensor *jg_addcmul(jg_tensor *self, jg_tensor *t1, jg_tensor *t2, double value) {
    return call3(JG_OP_ADDCMUL, value, self, t1, t2);
}

jg_tensor *jg_addcdiv(jg_tensor *self, jg_tensor *t1, jg_tensor *t2, double value) {
    if (t1 && t2 && !jg_dtype_is_float(t1->dtype) && !jg_dtype_is_float(t2->dtype))
        return jg_errorf_null(
            "Integer division with addcdiv is no longer supported, and in a future  release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv "
            "behavior can be implemented as (input + value * torch.trunc(tensor1 / "
            "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
            "tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
    return call3(JG_OP_ADDCDIV, value, self, t1, t2);
}

/* a dtype as PyTorch's lerp messages name it (C++'s type names) */
static const char *c_name(jg_dtype d) {
    switch (d) {
    case JG_F32:
        return "float";
    case JG_F64:
        return "double";
    case JG_I64:
        return "long int";
    case JG_I32:
        return "int";
    case JG_BOOL:
        return "bool";
    }
    return "?";
}

/* lerp's operands: self's dtype, floating (PyTorch's checks, in its order) */
static int lerp_check(jg_tensor *self, jg_tensor *end, bool tensor_weight, jg_tensor *weight,
                      const char *kernel) {
    if (!self || !end || (tensor_weight && !weight))
        return jg_errorf("lerp(): tensor is NULL");
    if (end->dtype != self->dtype)
        return jg_errorf("expected dtype %s for `end` but got dtype %s", c_name(self->dtype),
                         c_name(end->dtype));
    if (weight && weight->dtype != self->dtype)
        return jg_errorf("expected dtype %s for `weight` but got dtype %s", c_name(self->dtype),
                         c_name(weight->dtype));
    if (!jg_dtype_is_float(self->dtype)) {
        refuse_dtype(kernel, self->dtype);
        return -1;
    }
    return 0;
}

jg_tensor *jg_lerp(jg_tensor *self, jg_tensor *end, jg_tensor *weight) {
    if (lerp_check(self, end, true, weight, "lerp_kernel_tensor") < 0)
        return NULL;
    return call3(JG_OP_LERP, 0.0, self, end, weight);
}

jg_tensor *jg_lerp_scalar(jg_tensor *self, jg_tensor *end, double weight) {
    if (lerp_check(self, end, false, NULL, "lerp_kernel_scalar") < 0)
        return NULL;
    jg_attrs at = {.s = weight};
    return jg_op1(JG_OP_LERP_SCALAR, &at, self, end);
}
