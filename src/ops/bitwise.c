/* bitwise and / or / xor / not and the shifts (rows at the end of
 * elementwise.def): integer and bool operands; floats are refused as
 * PyTorch refuses them, naming its CPU kernel and the result dtype. */
#include "ops/decls.h"

static jg_tensor *refuse(const char *kernel, jg_dtype d) {
    return jg_errorf_null("\"%s\" not implemented for '%s'", kernel, jg_dtype_torch_name(d));
}

/* the first float dtype among the operands (JG_NDTYPES if none): the
 * float operand decides the result dtype PyTorch names */
static jg_dtype float_of(jg_tensor *a, jg_tensor *b) {
    jg_dtype f = JG_NDTYPES;
    if (b && jg_dtype_is_float(b->dtype))
        f = b->dtype;
    if (a && jg_dtype_is_float(a->dtype) && (f == JG_NDTYPES || a->dtype == JG_F64))
        f = a->dtype;
    return f;
}

static jg_tensor *binary(jg_opcode op, const char *kernel, jg_tensor *a, jg_tensor *b,
                         bool allow_bool) {
    if (!a || !b)
        return jg_errorf_null("%s: tensor is NULL", kernel);
    jg_dtype f = float_of(a, b);
    if (f != JG_NDTYPES)
        return refuse(kernel, f);
    if (!allow_bool && a->dtype == JG_BOOL && b->dtype == JG_BOOL)
        return refuse(kernel, JG_BOOL);
    return jg_ew_call(op, a, b);
}

jg_tensor *jg_bitwise_and(jg_tensor *a, jg_tensor *b) {
    return binary(JG_OP_BITWISE_AND, "bitwise_and_cpu", a, b, true);
}

jg_tensor *jg_bitwise_or(jg_tensor *a, jg_tensor *b) {
    return binary(JG_OP_BITWISE_OR, "bitwise_or_cpu", a, b, true);
}

jg_tensor *jg_bitwise_xor(jg_tensor *a, jg_tensor *b) {
    return binary(JG_OP_BITWISE_XOR, "bitwise_xor_cpu", a, b, true);
}

jg_tensor *jg_bitwise_left_shift(jg_tensor *a, jg_tensor *b) {
    return binary(JG_OP_BITWISE_LSHIFT, "lshift_cpu", a, b, false);
}

jg_tensor *jg_bitwise_right_shift(jg_tensor *a, jg_tensor *b) {
    return binary(JG_OP_BITWISE_RSHIFT, "rshift_cpu", a, b, false);
}

jg_tensor *jg_bitwise_not(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("bitwise_not: tensor is NULL");
    if (jg_dtype_is_float(a->dtype))
        return refuse("bitwise_not_cpu", a->dtype);
    return jg_ew_call(JG_OP_BITWISE_NOT, a, NULL);
}
