#include "io/zip.h"

#include <stdlib.h>
#include <string.h>

#include <jitgrad.h>

static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    crc_ready = 1;
}

uint32_t jg_crc32(uint32_t crc, const void *data, size_t n) {
    if (!crc_ready)
        crc_init(); /* idempotent: a race writes the same values */
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

static uint16_t rd16(const unsigned char *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) {
    return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

void jg_zip_close(jg_zip_reader *z) {
    for (int i = 0; i < z->n; i++)
        free(z->entries[i].name);
    free(z->entries);
    z->entries = NULL;
    z->n = 0;
}

/* A zip64 extended-information extra field replaces the 32-bit fields that
 * hold 0xFFFFFFFF, in the order usize, csize, offset. */
static int zip64_extra(const unsigned char *ex, size_t exlen, uint64_t *usize, uint64_t *csize,
                       uint64_t *off) {
    size_t i = 0;
    while (i + 4 <= exlen) {
        uint16_t id = rd16(ex + i), sz = rd16(ex + i + 2);
        if (i + 4 + sz > exlen)
            return -1;
        if (id == 1) {
            const unsigned char *q = ex + i + 4, *end = q + sz;
            uint64_t *fields[3] = {usize, csize, off};
            for (int k = 0; k < 3; k++) {
                if (*fields[k] != 0xFFFFFFFFu)
                    continue;
                if (q + 8 > end)
                    return -1;
                *fields[k] = rd64(q);
                q += 8;
            }
            return 0;
        }
        i += 4 + (size_t)sz;
    }
    return 0;
}

int jg_zip_open(jg_zip_reader *z, const unsigned char *buf, size_t len, const char *what) {
    z->entries = NULL;
    z->n = 0;
    if (len < 22 || rd32(buf) != 0x04034b50u)
        return jg_set_error("%s: not a zip archive (a PyTorch checkpoint is one)", what);
    /* the end-of-central-directory record: last 22 bytes plus a comment */
    size_t eocd = (size_t)-1;
    size_t lowest = len > 22 + 65535 ? len - 22 - 65535 : 0;
    for (size_t i = len - 22 + 1; i-- > lowest;) {
        if (rd32(buf + i) == 0x06054b50u) {
            eocd = i;
            break;
        }
    }
    if (eocd == (size_t)-1)
        return jg_set_error("%s: the zip archive is truncated (no end of central directory)", what);
    uint64_t n = rd16(buf + eocd + 10), cd_size = rd32(buf + eocd + 12),
             cd_off = rd32(buf + eocd + 16);
    if ((n == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) && eocd >= 20 &&
        rd32(buf + eocd - 20) == 0x07064b50u) {
        uint64_t z64 = rd64(buf + eocd - 20 + 8);
        if (z64 > len || len - z64 < 56 || rd32(buf + z64) != 0x06064b50u)
            return jg_set_error("%s: damaged zip64 end of central directory", what);
        n = rd64(buf + z64 + 32);
        cd_size = rd64(buf + z64 + 40);
        cd_off = rd64(buf + z64 + 48);
    }
    if (cd_off > len || cd_size > len - cd_off || n > cd_size / 46 + 1)
        return jg_set_error("%s: damaged zip archive (central directory out of the file)", what);
    z->entries = calloc(n ? n : 1, sizeof *z->entries);
    if (!z->entries)
        return jg_set_error("%s: out of memory", what);
    size_t p = cd_off;
    for (uint64_t i = 0; i < n; i++) {
        if (p + 46 > len || rd32(buf + p) != 0x02014b50u)
            goto damaged;
        uint16_t method = rd16(buf + p + 10);
        uint32_t crc = rd32(buf + p + 16);
        uint64_t csize = rd32(buf + p + 20), usize = rd32(buf + p + 24);
        size_t nlen = rd16(buf + p + 28), xlen = rd16(buf + p + 30), clen = rd16(buf + p + 32);
        uint64_t loff = rd32(buf + p + 42);
        if (p + 46 + nlen + xlen + clen > len)
            goto damaged;
        if (zip64_extra(buf + p + 46 + nlen, xlen, &usize, &csize, &loff) < 0)
            goto damaged;
        char *name = malloc(nlen + 1);
        if (!name) {
            jg_zip_close(z);
            return jg_set_error("%s: out of memory", what);
        }
        memcpy(name, buf + p + 46, nlen);
        name[nlen] = 0;
        z->entries[z->n].name = name;
        z->n++;
        if (method != 0) {
            jg_set_error("%s: the record '%s' is compressed (method %u); checkpoints store "
                         "records uncompressed",
                         what, name, method);
            jg_zip_close(z);
            return -1;
        }
        if (csize != usize)
            goto damaged;
        if (loff > len || len - loff < 30 || rd32(buf + loff) != 0x04034b50u)
            goto damaged;
        uint64_t start = loff + 30 + rd16(buf + loff + 26) + rd16(buf + loff + 28);
        if (start > len || usize > len - start) {
            jg_set_error("%s: the record '%s' is truncated", what, name);
            jg_zip_close(z);
            return -1;
        }
        z->entries[z->n - 1].data = buf + start;
        z->entries[z->n - 1].size = usize;
        if (jg_crc32(0, buf + start, usize) != crc) {
            jg_set_error("%s: the record '%s' is damaged (CRC-32 mismatch)", what, name);
            jg_zip_close(z);
            return -1;
        }
        p += 46 + nlen + xlen + clen;
    }
    return 0;
damaged:
    jg_zip_close(z);
    return jg_set_error("%s: damaged zip archive (bad central directory entry)", what);
}

const jg_zip_entry *jg_zip_find(const jg_zip_reader *z, const char *name) {
    for (int i = 0; i < z->n; i++)
        if (strcmp(z->entries[i].name, name) == 0)
            return &z->entries[i];
    return NULL;
}

struct jg_zip_central {
    char *name;
    uint32_t crc;
    uint32_t size;
    uint32_t offset;
};

void jg_zip_writer_init(jg_zip_writer *w, FILE *f) {
    memset(w, 0, sizeof *w), w->f = f;
}

static void wr16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8);
}
static void wr32(unsigned char *p, uint32_t v) {
    wr16(p, (uint16_t)v);
    wr16(p + 2, (uint16_t)(v >> 16));
}

static void put(jg_zip_writer *w, const void *data, size_t n) {
    if (!w->failed && n && fwrite(data, 1, n, w->f) != n)
        w->failed = 1;
    w->pos += n;
}

/* date 1980-01-01 00:00, as jitgrad.save writes */
#define ZIP_DATE 0x21

int jg_zip_add(jg_zip_writer *w, const char *name, const void *data, size_t size) {
    size_t nlen = strlen(name);
    if (w->pos > 0xFFFFFFF0u - 4096 || size > 0xFFFFFFF0u - 4096 - w->pos || nlen > 0xFFFF)
        return jg_set_error("jg_state_dict_save: the checkpoint would exceed 4 GiB, which "
                            "needs zip64 (not written)");
    if (w->n >= 0xFFFF)
        return jg_set_error("jg_state_dict_save: more than 65534 records need zip64 (not "
                            "written)");
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 8;
        struct jg_zip_central *c = realloc(w->central, (size_t)cap * sizeof *c);
        if (!c)
            return jg_set_error("jg_state_dict_save: out of memory");
        w->central = c;
        w->cap = cap;
    }
    char *copy = malloc(nlen + 1);
    if (!copy)
        return jg_set_error("jg_state_dict_save: out of memory");
    memcpy(copy, name, nlen + 1);
    uint32_t crc = jg_crc32(0, data, size);
    /* PyTorch's writer starts each record's data at a multiple of 64: the
     * padding goes into an extra field with id "FB" */
    size_t pad = (size_t)((64 - (w->pos + 30 + nlen + 4) % 64) % 64);
    unsigned char h[30];
    wr32(h, 0x04034b50u);
    wr16(h + 4, 20);
    wr16(h + 6, 0);
    wr16(h + 8, 0);
    wr16(h + 10, 0);
    wr16(h + 12, ZIP_DATE);
    wr32(h + 14, crc);
    wr32(h + 18, (uint32_t)size);
    wr32(h + 22, (uint32_t)size);
    wr16(h + 26, (uint16_t)nlen);
    wr16(h + 28, (uint16_t)(4 + pad));
    w->central[w->n++] = (struct jg_zip_central){copy, crc, (uint32_t)size, (uint32_t)w->pos};
    put(w, h, 30);
    put(w, name, nlen);
    unsigned char ex[4 + 64];
    ex[0] = 'F', ex[1] = 'B';
    wr16(ex + 2, (uint16_t)pad);
    memset(ex + 4, 'Z', pad);
    put(w, ex, 4 + pad);
    put(w, data, size);
    return w->failed ? jg_set_error("jg_state_dict_save: write failed") : 0;
}

int jg_zip_finish(jg_zip_writer *w) {
    uint64_t cd_off = w->pos;
    for (int i = 0; i < w->n; i++) {
        struct jg_zip_central *c = &w->central[i];
        size_t nlen = strlen(c->name);
        unsigned char h[46];
        wr32(h, 0x02014b50u);
        wr16(h + 4, 20);
        wr16(h + 6, 20);
        wr16(h + 8, 0);
        wr16(h + 10, 0);
        wr16(h + 12, 0);
        wr16(h + 14, ZIP_DATE);
        wr32(h + 16, c->crc);
        wr32(h + 20, c->size);
        wr32(h + 24, c->size);
        wr16(h + 28, (uint16_t)nlen);
        wr16(h + 30, 0);
        wr16(h + 32, 0);
        wr16(h + 34, 0);
        wr16(h + 36, 0);
        wr32(h + 38, 0);
        wr32(h + 42, c->offset);
        put(w, h, 46);
        put(w, c->name, nlen);
    }
    unsigned char e[22];
    wr32(e, 0x06054b50u);
    wr16(e + 4, 0);
    wr16(e + 6, 0);
    wr16(e + 8, (uint16_t)w->n);
    wr16(e + 10, (uint16_t)w->n);
    wr32(e + 12, (uint32_t)(w->pos - cd_off));
    wr32(e + 16, (uint32_t)cd_off);
    wr16(e + 20, 0);
    put(w, e, 22);
    for (int i = 0; i < w->n; i++)
        free(w->central[i].name);
    free(w->central);
    w->central = NULL;
    w->n = w->cap = 0;
    return w->failed ? jg_set_error("jg_state_dict_save: write failed") : 0;
}
