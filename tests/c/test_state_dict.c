/* state_dicts in PyTorch's checkpoint format: round trips, a file written by
 * torch.save (tests/data/state_dict_torch.pt, from make_state_dict_fixture.py)
 * and damaged files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/zip.h"
#include "testutil.h"

static char tmp_path[256];

static const char *tmp_file(const char *name) {
    /* /dev/shm when there is one: the mutation test writes thousands of files */
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmp_path, sizeof tmp_path, "%s/jg_sd_%d_%s", dir, (int)getpid(), name);
    return tmp_path;
}

static const char *fixture(void) {
    static char path[1024];
    const char *f = __FILE__; /* .../tests/c/test_state_dict.c */
    const char *sl = strstr(f, "tests/c/");
    int n = sl ? (int)(sl - f) : 0;
    snprintf(path, sizeof path, "%.*stests/data/state_dict_torch.pt", n, f);
    return path;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void test_state_dict_basic(void **state) {
    (void)state;
    jg_state_dict *sd = jg_state_dict_new();
    jg_tensor *a = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(3, 4));
    assert_int_equal(jg_state_dict_set(sd, "a", a), 0);
    assert_int_equal(jg_state_dict_set(sd, "b", b), 0);
    assert_int_equal(jg_state_dict_set(sd, "a", b), 0); /* replaced in place */
    assert_int_equal(jg_state_dict_size(sd), 2);
    assert_string_equal(jg_state_dict_name(sd, 0), "a");
    assert_ptr_equal(jg_state_dict_get(sd, "a"), b);
    assert_null(jg_state_dict_get(sd, "c"));
    TU_ERROR("no entry 'c'");
    assert_null(jg_state_dict_name(sd, 2));
    assert_int_equal(jg_state_dict_set(sd, NULL, a), -1);
    jg_state_dict_free(sd);
    jg_state_dict_free(NULL);
}

static void test_state_dict_round_trip(void **state) {
    (void)state;
    jg_state_dict *sd = jg_state_dict_new();
    jg_tensor *w = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, -2, 3.25, 4, 5, 1e-30));
    jg_tensor *wt = jg_transpose(w, 0, 1);
    jg_tensor *d = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.1, -0.2, 1e300));
    jg_tensor *i = tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(-1, 0, 1, 1e15));
    jg_tensor *iv = jg_slice(i, 0, 1, 3);
    jg_tensor *bo = tu_tensor(JG_BOOL, 1, TU_SHAPE(2), TU_VALS(1, 0));
    jg_tensor *s = jg_scalar(JG_I32, -5);
    jg_tensor *p = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(7, 8));
    jg_set_requires_grad(p, true);
    assert_int_equal(jg_state_dict_set(sd, "w", w), 0);
    assert_int_equal(jg_state_dict_set(sd, "wt", wt), 0);
    assert_int_equal(jg_state_dict_set(sd, "d", d), 0);
    assert_int_equal(jg_state_dict_set(sd, "i", i), 0);
    assert_int_equal(jg_state_dict_set(sd, "iv", iv), 0);
    assert_int_equal(jg_state_dict_set(sd, "bo", bo), 0);
    assert_int_equal(jg_state_dict_set(sd, "s", s), 0);
    assert_int_equal(jg_state_dict_set(sd, "p", p), 0);
    const char *path = tmp_file("rt.pt");
    assert_int_equal(jg_state_dict_save(sd, path), 0);
    jg_state_dict *back = jg_state_dict_load(path);
    assert_non_null(back);
    assert_int_equal(jg_state_dict_size(back), 8);
    for (int k = 0; k < 8; k++) {
        assert_string_equal(jg_state_dict_name(back, k), jg_state_dict_name(sd, k));
        jg_tensor *x = jg_state_dict_tensor(back, k), *y = jg_state_dict_tensor(sd, k);
        assert_int_equal(jg_dtype_of(x), jg_dtype_of(y));
        TU_SAME(x, y);
        assert_int_equal(jg_ndim(x), jg_ndim(y));
        for (int j = 0; j < jg_ndim(x); j++)
            assert_int_equal(jg_strides(x)[j], jg_strides(y)[j]);
        assert_int_equal(jg_storage_offset(x), jg_storage_offset(y));
        assert_int_equal(jg_requires_grad(x), jg_requires_grad(y));
    }
    /* shared memory stays shared: w and wt, i and iv */
    assert_true(jg_same_storage(jg_state_dict_get(back, "w"), jg_state_dict_get(back, "wt")));
    assert_true(jg_same_storage(jg_state_dict_get(back, "i"), jg_state_dict_get(back, "iv")));
    assert_false(jg_same_storage(jg_state_dict_get(back, "w"), jg_state_dict_get(back, "p")));
    jg_state_dict_free(back);
    jg_state_dict_free(sd);
    unlink(path);
}

static void test_state_dict_empty(void **state) {
    (void)state;
    jg_state_dict *sd = jg_state_dict_new();
    const char *path = tmp_file("empty.pt");
    assert_int_equal(jg_state_dict_save(sd, path), 0);
    jg_state_dict *back = jg_state_dict_load(path);
    assert_non_null(back);
    assert_int_equal(jg_state_dict_size(back), 0);
    jg_state_dict_free(back);
    jg_state_dict_free(sd);
    unlink(path);
}

static void test_state_dict_reads_torch_save(void **state) {
    (void)state;
    jg_state_dict *sd = jg_state_dict_load(fixture());
    if (!sd)
        fail_msg("%s", jg_last_error());
    assert_int_equal(jg_state_dict_size(sd), 10);
    TU_CHECK(jg_state_dict_get(sd, "weight"), 2, TU_SHAPE(2, 3), TU_VALS(-1, -0.5, 0, 0.5, 1, 1.5),
             0);
    TU_CHECK(jg_state_dict_get(sd, "bias"), 1, TU_SHAPE(2), TU_VALS(0.25, -0.75), 0);
    assert_true(jg_same_storage(jg_state_dict_get(sd, "weight"), jg_state_dict_get(sd, "tied")));
    jg_tensor *v = jg_state_dict_get(sd, "view");
    assert_int_equal(jg_dtype_of(v), JG_I64);
    TU_CHECK(v, 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
    assert_int_equal(jg_storage_offset(v), 1);
    assert_true(jg_same_storage(v, jg_state_dict_get(sd, "i64")));
    jg_tensor *d = jg_state_dict_get(sd, "f64");
    assert_int_equal(jg_dtype_of(d), JG_F64);
    TU_CHECK(d, 2, TU_SHAPE(2, 2), TU_VALS(1, 3, 2, 4), 0);
    assert_int_equal(jg_strides(d)[0], 1);
    TU_CHECK(jg_state_dict_get(sd, "b"), 1, TU_SHAPE(3), TU_VALS(1, 0, 1), 0);
    assert_int_equal(jg_dtype_of(jg_state_dict_get(sd, "i32")), JG_I32);
    TU_CHECK(jg_state_dict_get(sd, "i32"), 1, TU_SHAPE(2), TU_VALS(-7, 100000), 0);
    TU_CHECK(jg_state_dict_get(sd, "scalar"), 0, NULL, TU_VALS(3.5), 0);
    assert_true(jg_requires_grad(jg_state_dict_get(sd, "p")));
    assert_false(jg_requires_grad(jg_state_dict_get(sd, "weight")));
    jg_state_dict_free(sd);
}

/* Loads a damaged copy of the fixture; the load must fail with `needle`. */
static void expect_bad(const unsigned char *b, size_t n, const char *needle) {
    const char *path = tmp_file("bad.pt");
    spit(path, b, n);
    jg_state_dict *sd = jg_state_dict_load(path);
    if (sd)
        fail_msg("a damaged file loaded (expected '%s')", needle);
    TU_ERROR(needle);
    unlink(path);
}

static size_t find_bytes(const unsigned char *b, size_t n, const char *s) {
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(b + i, s, k) == 0)
            return i;
    fail_msg("'%s' not in the fixture", s);
    return 0;
}

static void test_state_dict_bad_files(void **state) {
    (void)state;
    assert_null(jg_state_dict_load("/nonexistent/x.pt"));
    TU_ERROR("cannot open");
    size_t n;
    unsigned char *orig = slurp(fixture(), &n);
    unsigned char *b = malloc(n);
    /* wrong magic */
    memcpy(b, orig, n);
    b[0] = 'X';
    expect_bad(b, n, "not a zip archive");
    /* every truncation fails cleanly */
    for (size_t k = 0; k < n; k += 7)
        expect_bad(orig, k, "jg_state_dict_load");
    /* a flipped data byte fails its CRC */
    memcpy(b, orig, n);
    b[find_bytes(orig, n, "storage") + 2] ^= 1;
    expect_bad(b, n, "CRC-32 mismatch");
    /* any byte of the archive changed: a load succeeds (a byte no check
     * covers, such as a date) or fails with a message; it never crashes */
    for (size_t k = 0; k < n; k++) {
        memcpy(b, orig, n);
        b[k] ^= 0xff;
        spit(tmp_file("flip.pt"), b, n);
        jg_state_dict *sd = jg_state_dict_load(tmp_path);
        if (sd)
            jg_state_dict_free(sd);
        else
            TU_ERROR("jg_state_dict_load");
    }
    unlink(tmp_path);
    /* legacy format */
    expect_bad((const unsigned char *)"\x80\x02\x8a\x0a", 4, "legacy");
    free(b);
    free(orig);
}

/* A pickle with an unknown opcode, a non-dict object, a missing storage
 * record, a storage too small for its numel, and unsupported dtypes, each
 * in a well-formed archive written with the zip writer of a saved dict. */
static void write_pkl_archive(const char *path, const char *pkl, size_t len, const char *data0,
                              size_t data0_len) {
    /* Build a valid archive by saving a dict, then swap data.pkl by
     * rewriting it: simplest through a small writer of our own. */
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    struct {
        const char *name;
        const char *data;
        size_t len;
        long off;
        unsigned crc;
    } rec[2] = {{"x/data.pkl", pkl, len, 0, 0}, {"x/data/0", data0, data0_len, 0, 0}};
    int nrec = data0 ? 2 : 1;
    for (int i = 0; i < nrec; i++) {
        rec[i].off = ftell(f);
        rec[i].crc = jg_crc32(0, rec[i].data, rec[i].len);
        unsigned char h[30] = {0x50, 0x4b, 3, 4, 20};
        memcpy(h + 14, &rec[i].crc, 4);
        uint32_t sz = (uint32_t)rec[i].len;
        memcpy(h + 18, &sz, 4);
        memcpy(h + 22, &sz, 4);
        uint16_t nl = (uint16_t)strlen(rec[i].name);
        memcpy(h + 26, &nl, 2);
        fwrite(h, 1, 30, f);
        fwrite(rec[i].name, 1, nl, f);
        fwrite(rec[i].data, 1, rec[i].len, f);
    }
    long cd = ftell(f);
    for (int i = 0; i < nrec; i++) {
        unsigned char h[46] = {0x50, 0x4b, 1, 2, 20, 0, 20};
        memcpy(h + 16, &rec[i].crc, 4);
        uint32_t sz = (uint32_t)rec[i].len;
        memcpy(h + 20, &sz, 4);
        memcpy(h + 24, &sz, 4);
        uint16_t nl = (uint16_t)strlen(rec[i].name);
        memcpy(h + 28, &nl, 2);
        uint32_t off = (uint32_t)rec[i].off;
        memcpy(h + 42, &off, 4);
        fwrite(h, 1, 46, f);
        fwrite(rec[i].name, 1, nl, f);
    }
    long end = ftell(f);
    unsigned char e[22] = {0x50, 0x4b, 5, 6};
    e[8] = e[10] = (unsigned char)nrec;
    uint32_t cds = (uint32_t)(end - cd), cdo = (uint32_t)cd;
    memcpy(e + 12, &cds, 4);
    memcpy(e + 16, &cdo, 4);
    fwrite(e, 1, 22, f);
    fclose(f);
}

#define PKL(s) s, sizeof(s) - 1
#define TENSOR_OF(storage, numel)                                                                  \
    "\x80\x02"                                                                                     \
    "ccollections\nOrderedDict\n)R(X\x01\x00\x00\x00w"                                             \
    "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\n" storage                \
    "\nX\x01\x00\x00\x00"                                                                          \
    "0X\x03\x00\x00\x00"                                                                           \
    "cpuK" numel "tQK\x00K\x02\x85K\x01\x85\x89"                                                   \
    "ccollections\nOrderedDict\n)RtRu."

static void test_state_dict_bad_pickles(void **state) {
    (void)state;
    const char *path = tmp_file("pkl.pt");
    const char f8[8] = {0};
    /* a good one first: the hand-written archive loads */
    write_pkl_archive(path, PKL(TENSOR_OF("FloatStorage", "\x02")), f8, 8);
    jg_state_dict *sd = jg_state_dict_load(path);
    if (!sd)
        fail_msg("%s", jg_last_error());
    TU_CHECK(jg_state_dict_get(sd, "w"), 1, TU_SHAPE(2), TU_VALS(0, 0), 0);
    jg_state_dict_free(sd);

    struct {
        const char *pkl;
        size_t len;
        const char *data;
        size_t dlen;
        const char *needle;
    } cases[] = {
        {PKL("\x80\x02\xff."), NULL, 0, "opcode 0xff"},
        {PKL("\x80\x02K\x05."), NULL, 0, "holds a int, not a state_dict"},
        {PKL("\x80\x02}q\x00(X\x01\x00\x00\x00"
             "aK\x01u."),
         NULL, 0, "'a' is a int, not a tensor"},
        {PKL("\x80\x02"
             "ctorch\nnn\n)R."),
         NULL, 0, "torch.nn"},
        {PKL("\x80\x02h\x05."), NULL, 0, "memo 5 unset"},
        {PKL("\x80\x02)R."), NULL, 0, "stack underflow"},
        {PKL("\x80\x02}X\x10\x00\x00\x00"), NULL, 0, "truncated"},
        {PKL(TENSOR_OF("FloatStorage", "\x02")), NULL, 0, "lacks the record data/0"},
        {PKL(TENSOR_OF("FloatStorage", "\x03")), f8, 8, "less than 3 float32"},
        {PKL(TENSOR_OF("HalfStorage", "\x02")), f8, 8, "torch.HalfStorage"},
        {PKL(TENSOR_OF("FloatStorage", "\x01")), f8, 4, "out of bounds for storage"},
        {PKL(TENSOR_OF("BoolStorage", "\x02")), "\x01\x02", 2, "bool byte 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_pkl_archive(path, cases[i].pkl, cases[i].len, cases[i].data, cases[i].dlen);
        jg_clear_error();
        jg_state_dict *bad = jg_state_dict_load(path);
        if (bad)
            fail_msg("case %zu loaded", i);
        if (!strstr(jg_last_error(), cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, jg_last_error(), cases[i].needle);
    }
    unlink(path);
}

/* Every byte of the fixture's data.pkl replaced by a few values: each load
 * either succeeds or fails with a message; none crashes or leaks (run under
 * the sanitizer build). */
static void test_state_dict_pickle_mutations(void **state) {
    (void)state;
    size_t n;
    unsigned char *orig = slurp(fixture(), &n);
    jg_zip_reader z;
    assert_int_equal(jg_zip_open(&z, orig, n, "fixture"), 0);
    const jg_zip_entry *e = jg_zip_find(&z, "state_dict_torch/data.pkl");
    assert_non_null(e);
    size_t len = (size_t)e->size;
    char *pkl = malloc(len);
    const char *path = tmp_file("mut.pt");
    const unsigned char vals[] = {0x00, 0xff, 0x01, 'K', '(', 'R'};
    for (size_t i = 0; i < len; i++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(pkl, e->data, len);
            pkl[i] = (char)(v == 2 ? pkl[i] ^ 1 : vals[v]);
            write_pkl_archive(path, pkl, len, NULL, 0);
            jg_clear_error();
            jg_state_dict *sd = jg_state_dict_load(path);
            if (sd)
                jg_state_dict_free(sd);
            else
                assert_true(strstr(jg_last_error(), "jg_state_dict_load") != NULL);
        }
    }
    unlink(path);
    free(pkl);
    jg_zip_close(&z);
    free(orig);
}

static void test_state_dict_save_errors(void **state) {
    (void)state;
    jg_state_dict *sd = jg_state_dict_new();
    jg_tensor *a = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    assert_int_equal(jg_state_dict_set(sd, "a", a), 0);
    assert_int_equal(jg_state_dict_save(sd, "/nonexistent/dir/x.pt"), -1);
    TU_ERROR("cannot open '/nonexistent/dir/x.pt' for writing");
    jg_state_dict_free(sd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_state_dict_basic),
        TU_TEST(test_state_dict_round_trip),
        TU_TEST(test_state_dict_empty),
        TU_TEST(test_state_dict_reads_torch_save),
        TU_TEST(test_state_dict_bad_files),
        TU_TEST(test_state_dict_bad_pickles),
        TU_TEST(test_state_dict_pickle_mutations),
        TU_TEST(test_state_dict_save_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
