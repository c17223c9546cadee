/* libgpucore: reading a safetensors file (gpucore.save's format, gpucore/io/safetensors_format.py)
 * without Python: the 8-byte header length, the JSON header, the tensors' bytes.
 *
 * The whole file is read into memory; the header is parsed by a small JSON reader that keeps
 * the tensor entries (name, dtype, shape, data offsets) and, from "__metadata__", the tensors'
 * SHA-256 digests (gpucore.tensor_sha256), which st_verify checks for every tensor the model
 * reads (gpucore.header_sha256 is not recomputed: gc_model_load checks every size and bound it
 * uses instead).  Any malformed input gives GC_ERR_FORMAT with the byte position. */
#define _POSIX_C_SOURCE 200112L /* fileno, fstat */

#include "stfile.h"

#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADER (100u << 20)
#define MAX_ENTRIES 1000000
#define MAX_DEPTH 64
#define MAX_NAME 4096

typedef struct {
    const unsigned char *s;
    size_t n, i;
    const char *path;
    gc_error *err;
} jp;

static int bad(jp *p, const char *what)
{
    return gc_fail(p->err, GC_ERR_FORMAT,
                   "gc_model_load: %s: bad safetensors header at byte %zu: %s", p->path, p->i + 8,
                   what);
}

static void ws(jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int lit(jp *p, char c)
{
    ws(p);
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return 1;
    }
    return 0;
}

static int hex4(jp *p, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        if (p->i >= p->n)
            return -1;
        const unsigned char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* A JSON string into out (NUL-terminated UTF-8, at most cap - 1 bytes; out may be NULL: skip). */
static int str(jp *p, char *out, size_t cap)
{
    if (!lit(p, '"'))
        return bad(p, "expected a string");
    size_t k = 0;
    for (;;) {
        if (p->i >= p->n)
            return bad(p, "unterminated string");
        unsigned c = p->s[p->i++];
        if (c == '"')
            break;
        if (c < 0x20)
            return bad(p, "control character in a string");
        unsigned char u[4];
        int nu = 1;
        u[0] = (unsigned char)c;
        if (c == '\\') {
            if (p->i >= p->n)
                return bad(p, "unterminated escape");
            c = p->s[p->i++];
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *f = c ? strchr(from, (int)c) : NULL;
            if (f) {
                u[0] = (unsigned char)to[f - from];
            } else if (c == 'u') {
                unsigned cp, lo;
                if (hex4(p, &cp) < 0)
                    return bad(p, "bad \\u escape");
                if (cp >= 0xd800 && cp < 0xdc00) {
                    if (p->i + 2 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                        return bad(p, "lone surrogate");
                    p->i += 2;
                    if (hex4(p, &lo) < 0 || lo < 0xdc00 || lo >= 0xe000)
                        return bad(p, "bad surrogate pair");
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                } else if (cp >= 0xdc00 && cp < 0xe000) {
                    return bad(p, "lone surrogate");
                }
                if (cp < 0x80) {
                    u[0] = (unsigned char)cp;
                } else if (cp < 0x800) {
                    u[0] = (unsigned char)(0xc0 | cp >> 6);
                    u[1] = (unsigned char)(0x80 | (cp & 0x3f));
                    nu = 2;
                } else if (cp < 0x10000) {
                    u[0] = (unsigned char)(0xe0 | cp >> 12);
                    u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                    u[2] = (unsigned char)(0x80 | (cp & 0x3f));
                    nu = 3;
                } else {
                    u[0] = (unsigned char)(0xf0 | cp >> 18);
                    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
                    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                    u[3] = (unsigned char)(0x80 | (cp & 0x3f));
                    nu = 4;
                }
            } else {
                return bad(p, "bad escape");
            }
        }
        if (out) {
            if (k + (size_t)nu >= cap)
                return bad(p, "string too long");
            memcpy(out + k, u, (size_t)nu);
        }
        k += (size_t)nu;
    }
    if (out)
        out[k] = 0;
    return 0;
}

/* A non-negative integer below 2^53. */
static int uint(jp *p, uint64_t *out)
{
    ws(p);
    uint64_t v = 0;
    size_t start = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        v = v * 10 + (uint64_t)(p->s[p->i++] - '0');
        if (v >= ((uint64_t)1 << 53))
            return bad(p, "number too large");
    }
    if (p->i == start)
        return bad(p, "expected a non-negative integer");
    *out = v;
    return 0;
}

/* Skips any JSON value (depth-limited). */
static int skip(jp *p, int depth)
{
    if (depth > MAX_DEPTH)
        return bad(p, "nested too deeply");
    ws(p);
    if (p->i >= p->n)
        return bad(p, "unexpected end");
    const unsigned char c = p->s[p->i];
    if (c == '"')
        return str(p, NULL, 0);
    if (c == '{' || c == '[') {
        const char close = c == '{' ? '}' : ']';
        p->i++;
        if (lit(p, close))
            return 0;
        do {
            if (c == '{' && (str(p, NULL, 0) < 0 || (!lit(p, ':') && bad(p, "expected ':'"))))
                return -1;
            if (skip(p, depth + 1) < 0)
                return -1;
        } while (lit(p, ','));
        return lit(p, close) ? 0 : bad(p, "expected ',' or a closing bracket");
    }
    /* a number, true, false or null */
    size_t start = p->i;
    while (p->i < p->n && strchr("+-.0123456789eEtruefalsn", p->s[p->i]) && p->s[p->i])
        p->i++;
    return p->i > start ? 0 : bad(p, "unexpected character");
}

/* "__metadata__": {str: str, ...}; keeps the value of gpucore.tensor_sha256 (a JSON object of
 * tensor name -> hex digest, as a string) in *sums. */
static int metadata(jp *p, char **sums)
{
    if (!lit(p, '{'))
        return bad(p, "metadata must be an object");
    if (lit(p, '}'))
        return 0;
    do {
        char key[64];
        if (str(p, key, sizeof key) < 0 || (!lit(p, ':') && bad(p, "expected ':'")))
            return -1;
        if (!strcmp(key, "gpucore.tensor_sha256") && !*sums) {
            *sums = malloc(p->n + 1);
            if (!*sums)
                return gc_fail(p->err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
            if (str(p, *sums, p->n + 1) < 0)
                return -1;
        } else if (skip(p, 1) < 0) {
            return -1;
        }
    } while (lit(p, ','));
    return lit(p, '}') ? 0 : bad(p, "expected '}' after the metadata");
}

/* Attaches each digest of the checksum table to its entry. */
static int checksums(st_file *f, const char *text, const char *path, gc_error *err)
{
    jp q = {(const unsigned char *)text, strlen(text), 0, path, err};
    char *name = malloc(MAX_NAME);
    int rc = 0;
    if (!name)
        return gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
    if (!lit(&q, '{'))
        rc = bad(&q, "the checksum table must be an object");
    if (rc == 0 && !lit(&q, '}')) {
        do {
            char hex[80];
            if ((rc = str(&q, name, MAX_NAME)) < 0)
                break;
            if (!lit(&q, ':')) {
                rc = bad(&q, "expected ':' in the checksum table");
                break;
            }
            if ((rc = str(&q, hex, sizeof hex)) < 0)
                break;
            if (strlen(hex) != 64) {
                rc = bad(&q, "a checksum is not 64 hex digits");
                break;
            }
            for (int i = 0; i < f->n; i++)
                if (!strcmp(f->e[i].name, name))
                    memcpy(f->e[i].sha, hex, 65);
        } while (lit(&q, ','));
        if (rc == 0 && !lit(&q, '}'))
            rc = bad(&q, "expected '}' after the checksum table");
    }
    free(name);
    return rc;
}

static int dtype_of(const char *s)
{
    static const char *const names[] = {"BOOL", "U8", "I8", "I32", "I64",
                                        "F16",  "BF16", "F32", "F64"};
    for (int i = 0; i < 9; i++)
        if (!strcmp(s, names[i]))
            return i; /* gc_dtype order */
    return -1;
}

/* One tensor entry's object. */
static int entry(jp *p, st_entry *e)
{
    if (!lit(p, '{'))
        return bad(p, "expected an object");
    int have = 0;
    if (lit(p, '}'))
        return bad(p, "empty tensor entry");
    do {
        char key[32];
        if (str(p, key, sizeof key) < 0 || (!lit(p, ':') && bad(p, "expected ':'")))
            return -1;
        if (!strcmp(key, "dtype")) {
            char d[16];
            if (str(p, d, sizeof d) < 0)
                return -1;
            e->dtype = dtype_of(d);
            have |= 1;
        } else if (!strcmp(key, "shape") || !strcmp(key, "data_offsets")) {
            const int shape = key[0] == 's';
            uint64_t v[GC_MAX_NDIM];
            int k = 0;
            if (!lit(p, '['))
                return bad(p, "expected an array");
            if (!lit(p, ']')) {
                do {
                    if (k == (shape ? GC_MAX_NDIM : 2))
                        return bad(p, "array too long");
                    if (uint(p, &v[k++]) < 0)
                        return -1;
                } while (lit(p, ','));
                if (!lit(p, ']'))
                    return bad(p, "expected ']'");
            }
            if (shape) {
                e->ndim = k;
                for (int d = 0; d < k; d++)
                    e->shape[d] = (int64_t)v[d];
                have |= 2;
            } else {
                if (k != 2 || v[1] < v[0])
                    return bad(p, "data_offsets must be [begin, end]");
                e->begin = v[0];
                e->end = v[1];
                have |= 4;
            }
        } else if (skip(p, 1) < 0) {
            return -1;
        }
    } while (lit(p, ','));
    if (!lit(p, '}'))
        return bad(p, "expected '}'");
    return have == 7 ? 0 : bad(p, "tensor entry without dtype, shape or data_offsets");
}

void st_close(st_file *f)
{
    for (int i = 0; f->e && i < f->n; i++)
        free(f->e[i].name);
    free(f->e);
    free(f->data);
    memset(f, 0, sizeof *f);
}

int st_open(const char *path, st_file *f, gc_error *err)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return gc_fail(err, GC_ERR_IO, "gc_model_load: cannot open %s", path);
    struct stat sb;
    long size = -1;
    if (fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode) && fseek(fp, 0, SEEK_END) == 0)
        size = ftell(fp);
    if (size < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return gc_fail(err, GC_ERR_IO, "gc_model_load: cannot read %s (not a regular file?)",
                       path);
    }
    f->size = (size_t)size;
    f->data = malloc(f->size ? f->size : 1);
    if (!f->data) {
        fclose(fp);
        return gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: %s: out of memory (%zu bytes)",
                       path, f->size);
    }
    const size_t got = fread(f->data, 1, f->size, fp);
    fclose(fp);
    if (got != f->size) {
        st_close(f);
        return gc_fail(err, GC_ERR_IO, "gc_model_load: %s: read error", path);
    }
    const size_t fsize = f->size;
    if (fsize < 8) {
        st_close(f);
        return gc_fail(err, GC_ERR_FORMAT,
                       "gc_model_load: %s: not a gpucore model file (%zu bytes)", path, fsize);
    }
    uint64_t hn = 0;
    for (int b = 7; b >= 0; b--)
        hn = hn << 8 | f->data[b];
    if (hn > MAX_HEADER || hn > fsize - 8) {
        st_close(f);
        return gc_fail(err, GC_ERR_FORMAT,
                       "gc_model_load: %s: not a gpucore model file (header length %llu for a "
                       "file of %zu bytes)",
                       path, (unsigned long long)hn, fsize);
    }
    f->data_start = 8 + (size_t)hn;
    jp p = {f->data + 8, (size_t)hn, 0, path, err};
    int cap = 0, rc = 0;
    char *sums = NULL;
    if (!lit(&p, '{'))
        rc = bad(&p, "expected '{'");
    if (rc == 0 && !lit(&p, '}')) {
        do {
            char *name = malloc(MAX_NAME);
            if (!name) {
                rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
                break;
            }
            if (str(&p, name, MAX_NAME) < 0 || (!lit(&p, ':') && bad(&p, "expected ':'"))) {
                free(name);
                rc = -1;
                break;
            }
            if (!strcmp(name, "__metadata__")) {
                free(name);
                if ((rc = metadata(&p, &sums)) < 0)
                    break;
                continue;
            }
            if (f->n == cap) {
                cap = cap ? cap * 2 : 64;
                st_entry *e = cap <= MAX_ENTRIES ? realloc(f->e, (size_t)cap * sizeof *e) : NULL;
                if (!e) {
                    free(name);
                    rc = bad(&p, "too many tensors");
                    break;
                }
                f->e = e;
            }
            st_entry *e = &f->e[f->n++];
            memset(e, 0, sizeof *e);
            e->name = name;
            if ((rc = entry(&p, e)) < 0)
                break;
            if (e->end > f->size - f->data_start) {
                rc = bad(&p, "a tensor's data lies past the end of the file");
                break;
            }
        } while (lit(&p, ','));
        if (rc == 0 && !lit(&p, '}'))
            rc = bad(&p, "expected ',' or '}'");
    }
    if (rc == 0 && sums)
        rc = checksums(f, sums, path, err);
    free(sums);
    if (rc < 0) {
        st_close(f);
        return rc;
    }
    return 0;
}

int st_verify(const st_file *f, const st_entry *e, const char *path, gc_error *err)
{
    if (!e->sha[0])
        return 0;
    char got[65];
    gc_sha256_hex(f->data + f->data_start + e->begin, (size_t)(e->end - e->begin), got);
    if (strcmp(got, e->sha))
        return gc_fail(err, GC_ERR_FORMAT,
                       "gc_model_load: %s: tensor '%.100s' does not match its checksum "
                       "(gpucore.tensor_sha256): the data is corrupt",
                       path, e->name);
    return 0;
}

const st_entry *st_find(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].name, name))
            return &f->e[i];
    return NULL;
}
