/* Writes or reads a state_dict in PyTorch's checkpoint format:
 *
 *   state_dict_io write FILE   # a small dict: f32 (tied and transposed), f64, i64 view, bool, i32
 *   state_dict_io read FILE    # prints each entry: name dtype shape values (%.17g)
 *
 * torch.load reads what `write` writes; `read` reads what torch.save writes
 * (python/tests/test_state_dict_c.py checks both). */
#include <jitgrad.h>
#include <stdio.h>
#include <string.h>

static int write_file(const char *path) {
    jg_state_dict *sd = jg_state_dict_new();
    float w[6] = {1.5f, -2.0f, 3.25f, 0.1f, 1e-30f, -0.0f};
    double d[3] = {0.1, -0.2, 1e300};
    int64_t iv[5] = {-3, 0, 1, 1000000000000LL, 7};
    bool bs[3] = {true, false, true};
    int32_t is[2] = {-7, 100000};
    jg_tensor *tw = jg_tensor_new(JG_F32, 2, (int64_t[]){2, 3}, w);
    jg_tensor *td = jg_tensor_new(JG_F64, 1, (int64_t[]){3}, d);
    jg_tensor *ti = jg_tensor_new(JG_I64, 1, (int64_t[]){5}, iv);
    jg_tensor *tb = jg_tensor_new(JG_BOOL, 1, (int64_t[]){3}, bs);
    jg_tensor *t32 = jg_tensor_new(JG_I32, 1, (int64_t[]){2}, is);
    jg_tensor *p = jg_full(JG_F32, 1, (int64_t[]){2}, 0.5);
    jg_set_requires_grad(p, true);
    int rc = jg_state_dict_set(sd, "wte.weight", tw) | jg_state_dict_set(sd, "f64", td) |
             jg_state_dict_set(sd, "i64", ti) |
             jg_state_dict_set(sd, "i64_view", jg_slice(ti, 0, 1, 4)) |
             jg_state_dict_set(sd, "bool", tb) | jg_state_dict_set(sd, "i32", t32) |
             jg_state_dict_set(sd, "wt", jg_transpose(tw, 0, 1)) |
             jg_state_dict_set(sd, "lm_head.weight", tw) | jg_state_dict_set(sd, "param", p);
    if (rc < 0 || jg_state_dict_save(sd, path) < 0) {
        fprintf(stderr, "error: %s\n", jg_last_error());
        jg_state_dict_free(sd);
        return 1;
    }
    jg_state_dict_free(sd);
    return 0;
}

static int read_file(const char *path) {
    jg_state_dict *sd = jg_state_dict_load(path);
    if (!sd) {
        fprintf(stderr, "error: %s\n", jg_last_error());
        return 1;
    }
    for (int i = 0; i < jg_state_dict_size(sd); i++) {
        jg_tensor *t = jg_state_dict_tensor(sd, i);
        printf("%s %s [", jg_state_dict_name(sd, i), jg_dtype_name(jg_dtype_of(t)));
        for (int k = 0; k < jg_ndim(t); k++)
            printf("%s%lld", k ? ", " : "", (long long)jg_shape(t)[k]);
        printf("]%s", jg_requires_grad(t) ? " requires_grad" : "");
        jg_tensor *f = jg_contiguous(jg_to_dtype(jg_detach(t), JG_F64));
        const double *v = jg_data(f);
        for (int64_t k = 0; k < jg_numel(f); k++)
            printf(" %.17g", v[k]);
        printf("\n");
    }
    for (int i = 0; i < jg_state_dict_size(sd); i++)
        for (int j = 0; j < i; j++)
            if (jg_same_storage(jg_state_dict_tensor(sd, i), jg_state_dict_tensor(sd, j)))
                printf("shared %s %s\n", jg_state_dict_name(sd, j), jg_state_dict_name(sd, i));
    jg_state_dict_free(sd);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "read"))) {
        fprintf(stderr, "usage: %s write|read FILE\n", argv[0]);
        return 2;
    }
    jg_scope_push();
    int rc = strcmp(argv[1], "write") == 0 ? write_file(argv[2]) : read_file(argv[2]);
    jg_scope_pop();
    return rc;
}
