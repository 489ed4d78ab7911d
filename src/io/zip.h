/* The part of the zip format PyTorch checkpoints use: stored (uncompressed)
 * records, read from a file held in memory and written with their data
 * aligned to 64 bytes as PyTorch's writer aligns them. */
#ifndef JG_IO_ZIP_H
#define JG_IO_ZIP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

uint32_t jg_crc32(uint32_t crc, const void *data, size_t n);

typedef struct jg_zip_entry {
    char *name;
    const unsigned char *data; /* into the archive's bytes */
    uint64_t size;
} jg_zip_entry;

typedef struct jg_zip_reader {
    jg_zip_entry *entries;
    int n;
} jg_zip_reader;

/* Parses the archive in buf[0, len) (which must outlive the reader); -1 +
 * error (prefixed by what) on anything malformed, compressed or failing its
 * CRC. */
int jg_zip_open(jg_zip_reader *z, const unsigned char *buf, size_t len, const char *what);
const jg_zip_entry *jg_zip_find(const jg_zip_reader *z, const char *name);
void jg_zip_close(jg_zip_reader *z);

typedef struct jg_zip_writer {
    FILE *f;
    uint64_t pos;
    struct jg_zip_central *central;
    int n, cap;
    int failed;
} jg_zip_writer;

void jg_zip_writer_init(jg_zip_writer *w, FILE *f);
int jg_zip_add(jg_zip_writer *w, const char *name, const void *data, size_t size);
/* Writes the central directory; frees the writer's memory either way. */
int jg_zip_finish(jg_zip_writer *w);

#endif
