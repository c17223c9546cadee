/* libgpucore: a safetensors file read into memory (stfile.c), for gc_model_load. */
#ifndef GPUCORE_CAPI_STFILE_H
#define GPUCORE_CAPI_STFILE_H

#include "capi.h"

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

typedef struct {
    char *name;
    int dtype; /* a gc_dtype, or -1 for a dtype the C API does not know */
    int ndim;
    int64_t shape[GC_MAX_NDIM];
    uint64_t begin, end; /* byte offsets in the data section, end <= its size (checked) */
    char sha[65];        /* its SHA-256 from the gpucore.tensor_sha256 metadata, or "" */
} st_entry;

typedef struct {
    unsigned char *data; /* the whole file */
    size_t size, data_start;
    st_entry *e;
    int n;
} st_file;

/* Reads path and parses its header: 0, or a negative status (GC_ERR_IO, GC_ERR_FORMAT, ...)
 * with err set and f empty. */
int st_open(const char *path, st_file *f, gc_error *err);
const st_entry *st_find(const st_file *f, const char *name);
void st_close(st_file *f);
/* The entry's bytes match its checksum (when the file has one): 0, or GC_ERR_FORMAT. */
int st_verify(const st_file *f, const st_entry *e, const char *path, gc_error *err);
/* sha256.c: the lower-case hex SHA-256 of data[0..n). */
void gc_sha256_hex(const unsigned char *data, size_t n, char out[65]);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* GPUCORE_CAPI_STFILE_H */
