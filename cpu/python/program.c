/* gpucore._cpu.Program: a planned graph of kernel calls run by one C call (cpu/README.md,
 * *Programs*), and gc_node_call, the eager form of every node kind (nodes.h).
 *
 * Program(nodes) parses each (name, args) node once with its kind's parse (the eager binding's
 * checks), keeping the Py_buffers acquired: the pointers resolved into the node structs stay
 * valid, and the arrays alive, for the program's life.  run() then only executes the structs,
 * with the GIL released; nothing Python is touched between the first node and the last.
 */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* The eager call                                                                              */

void gc_node_fail(const gc_node_kind *k, const void *node, int rc)
{
    if (k->fail)
        k->fail(k->name, node, rc);
    else
        PyErr_Format(PyExc_MemoryError, "%s: out of memory for the kernel's scratch buffers",
                     k->name);
}

PyObject *gc_node_call(const gc_node_kind *k, PyObject *const *args, Py_ssize_t nargs)
{
    union {
        max_align_t align;
        unsigned char b[GC_NODE_MAX];
    } node;
    bufset bs = {.n = 0};
    int rc = k->parse(args, nargs, node.b, &bs);
    if (rc == 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = k->exec(node.b);
        Py_END_ALLOW_THREADS
        if (rc < 0)
            gc_node_fail(k, node.b, rc);
    }
    bufs_release(&bs);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------ */
/* Nodes                                                                                       */

static const gc_node_kind *const node_kinds[] = {
#define GC_KIND_PTR(nm) &gc_node_##nm,
    GC_NODES(GC_KIND_PTR)
#undef GC_KIND_PTR
};
#define N_KINDS ((int)(sizeof node_kinds / sizeof node_kinds[0]))

/* A kernel node runs its kind's exec; input / output copy between a run buffer and bs.v[0]
 * (the node's dst / src); a python node stops run() (the caller runs it). */
enum { NODE_KERNEL, NODE_INPUT, NODE_OUTPUT, NODE_PYTHON };

typedef struct {
    const gc_node_kind *kind; /* NODE_KERNEL */
    void *data;               /* its struct, inside the program's data block */
    size_t off;               /* (data's offset in that block) */
    Py_ssize_t k;             /* NODE_INPUT / NODE_OUTPUT: the run buffer's index */
    int type;
    int direct;      /* NODE_INPUT / NODE_OUTPUT with relocations: this run uses the run buffer */
    Py_ssize_t r0, r1; /* NODE_INPUT / NODE_OUTPUT: its relocations, relocs[r0:r1] */
    bufset bs; /* the buffers parse acquired, released when the program dies */
} pnode;

/* A pointer word of a kernel node's struct that points into an io node's buffer, at rel bytes
 * from its start: a run rewrites it to the run buffer (direct) or back to the node's buffer. */
typedef struct {
    unsigned char *word; /* inside the program's data block */
    size_t rel;
    Py_ssize_t node; /* the kernel node whose struct holds word */
} preloc;

typedef struct {
    PyObject_HEAD
    pnode *nodes;
    Py_ssize_t n, n_inputs, n_outputs;
    PyObject *names;     /* tuple of str */
    unsigned char *data; /* the kernel structs, 16-byte aligned each */
    preloc *relocs;      /* of the io nodes given reader nodes */
    atomic_int busy;     /* a run is in flight (the GIL is released during it) */
} ProgramObject;

/* Re-raises the pending exception, same type, as "<prefix>: <message>". */
static void prefix_error(const char *prefix)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *ev = PyErr_GetRaisedException();
    PyObject *et = ev ? Py_NewRef((PyObject *)Py_TYPE(ev)) : NULL;
#else
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    Py_XDECREF(tb);
#endif
    PyObject *msg = ev ? PyObject_Str(ev) : NULL;
    if (!msg)
        PyErr_Clear();
    PyErr_Format(et ? et : PyExc_RuntimeError, "%s: %S", prefix, msg ? msg : Py_None);
    Py_XDECREF(msg);
    Py_XDECREF(ev);
    Py_XDECREF(et);
}

/* The same with "Program node i (name)": every error of a node names it. */
static void node_error(Py_ssize_t i, const char *name)
{
    char prefix[160];
    PyOS_snprintf(prefix, sizeof prefix, "Program node %zd (%.100s)", i, name);
    prefix_error(prefix);
}

/* input (k, dst[, nodes]) / output (k, src[, nodes]): a contiguous plain buffer, dst
 * writable (nodes: see relocate). */
static int io_parse(const char *fn, PyObject *const *args, Py_ssize_t nargs, pnode *p)
{
    const int in = p->type == NODE_INPUT;
    const char *bname = in ? "dst" : "src";
    if (nargs == 3 && !PyTuple_Check(args[2])) {
        PyErr_Format(PyExc_TypeError, "%s: 'nodes' must be a tuple of node indices, got %.100s",
                     fn, Py_TYPE(args[2])->tp_name);
        return -1;
    }
    if (check_nargs(fn, nargs, nargs == 3 ? 3 : 2) < 0 ||
        get_min(fn, "k", args[0], 0, &p->k) < 0)
        return -1;
    Py_buffer *v = get_buf(&p->bs, fn, bname, args[1], in);
    if (!v || need_contig(fn, bname, v) < 0)
        return -1;
    if (!fmt_is_plain(v)) {
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be a plain (no objects) format, got '%s'",
                     fn, bname, fmt_str(v));
        return -1;
    }
    return 0;
}

/* Pass 1 for node i: the entry's shape and its kind; *args_out borrowed from the entry. */
static int node_kind(Py_ssize_t i, PyObject *entry, pnode *p, PyObject **name_out,
                     PyObject **args_out)
{
    PyObject *name = NULL, *args = NULL;
    if (PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 2) {
        name = PyTuple_GET_ITEM(entry, 0);
        args = PyTuple_GET_ITEM(entry, 1);
    }
    if (!name || !PyUnicode_Check(name) || !PyTuple_Check(args)) {
        PyErr_Format(PyExc_TypeError,
                     "Program node %zd: expected a (name: str, args: tuple) tuple, got %.100R", i,
                     entry);
        return -1;
    }
    const char *s = PyUnicode_AsUTF8(name);
    if (!s)
        return -1;
    *name_out = name;
    *args_out = args;
    p->type = !strcmp(s, "input")    ? NODE_INPUT
              : !strcmp(s, "output") ? NODE_OUTPUT
              : !strcmp(s, "python") ? NODE_PYTHON
                                     : NODE_KERNEL;
    if (p->type != NODE_KERNEL)
        return 0;
    for (int j = 0; j < N_KINDS; j++)
        if (!strcmp(s, node_kinds[j]->name)) {
            p->kind = node_kinds[j];
            return 0;
        }
    char known[1024];
    size_t used = (size_t)PyOS_snprintf(known, sizeof known, "input, output, python");
    for (int j = 0; j < N_KINDS && used < sizeof known; j++)
        used += (size_t)PyOS_snprintf(known + used, sizeof known - used, ", %s",
                                      node_kinds[j]->name);
    PyErr_Format(PyExc_ValueError, "Program node %zd: unknown node kind '%s'; known: %s", i, s,
                 known);
    return -1;
}

#define ALIGN_UP(x) (((x) + 15) & ~(size_t)15)

/* io node p's relocations from its nodes tuple (kernel nodes that use its buffer for one
 * tensor, nothing else in it: the caller's promise): each declared data pointer field of their
 * structs (the kind's ptrs, nodes.h's GC_NODE_KIND_IO) whose value lies in the buffer.  A run
 * whose buffer qualifies (program_run) rewrites them to point into the run buffer and skips the
 * copy; no other word of a struct is ever touched.  An input's buffer may hold only fields the
 * kernels read (ValueError on a written one: a run never writes a caller's input, which may
 * be read-only).  A listed node may hold none (a copy of an empty view, whose pointer may lie
 * at the buffer's end): it does not touch the buffer.  fn: the io node's name, for messages. */
static int relocate(ProgramObject *self, pnode *p, const char *fn, PyObject *nodes, size_t *cap)
{
    const uintptr_t lo = (uintptr_t)p->bs.v[0].buf, len = (uintptr_t)p->bs.v[0].len;
    p->r0 = p->r1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(nodes); j++) {
        Py_ssize_t q;
        if (get_ssize(fn, "nodes", PyTuple_GET_ITEM(nodes, j), &q) < 0)
            return -1;
        if (q < 0 || q >= self->n || self->nodes[q].type != NODE_KERNEL) {
            PyErr_Format(PyExc_ValueError, "nodes: %zd is not a kernel node's index", q);
            return -1;
        }
        const pnode *r = &self->nodes[q];
        if (r->kind->nptrs == 0) {
            PyErr_Format(PyExc_ValueError,
                         "nodes: node %zd's kind '%s' declares no pointer fields, so it cannot "
                         "use a run buffer in place (Program.io_kinds(); nodes.h)",
                         q, r->kind->name);
            return -1;
        }
        for (size_t f = 0; f < r->kind->nptrs; f++) {
            const gc_node_ptr *fld = &r->kind->ptrs[f];
            unsigned char *w = (unsigned char *)r->data + fld->off;
            uintptr_t v;
            memcpy(&v, w, sizeof v);
            if (len == 0 || v < lo || v - lo >= len)
                continue;
            if (fld->written && p->type == NODE_INPUT) {
                PyErr_Format(PyExc_ValueError,
                             "nodes: node %zd (%s) writes its field '%s' into this input's "
                             "buffer, and a run never writes a caller's input (list only the "
                             "nodes that read it)",
                             q, r->kind->name, fld->name);
                return -1;
            }
            if ((size_t)p->r1 >= *cap) {
                *cap = *cap ? 2 * *cap : 16;
                preloc *grown = realloc(self->relocs, *cap * sizeof(preloc));
                if (!grown) {
                    PyErr_NoMemory();
                    return -1;
                }
                self->relocs = grown;
            }
            self->relocs[p->r1++] = (preloc){w, (size_t)(v - lo), q};
        }
    }
    return 0;
}

/* a and b share a byte. */
static int bufs_share(const Py_buffer *a, const Py_buffer *b)
{
    const char *pa = a->buf, *pb = b->buf;
    return a->len > 0 && b->len > 0 && pa < pb + b->len && pb < pa + a->len;
}

/* io node i's relocations against an earlier io node's whose buffer overlaps i's: no kernel
 * node may have fields in both (ValueError), so no word is relocated twice (the later
 * rewrite would win) and every pointer of a node into the bytes moves with one buffer (nodes.h:
 * parse's comparisons between pointers hold within one buffer only).  Different nodes may
 * (an arena reusing a dead input's memory for an output: each run buffer serves its own). */
static int io_disjoint(ProgramObject *self, Py_ssize_t i)
{
    const pnode *p = &self->nodes[i];
    for (Py_ssize_t t = 0; t < i; t++) {
        const pnode *o = &self->nodes[t];
        if ((o->type != NODE_INPUT && o->type != NODE_OUTPUT) || o->r1 == o->r0 ||
            !bufs_share(&p->bs.v[0], &o->bs.v[0]))
            continue;
        for (Py_ssize_t a = p->r0; a < p->r1; a++)
            for (Py_ssize_t b = o->r0; b < o->r1; b++) {
                const Py_ssize_t q = self->relocs[a].node;
                if (q != self->relocs[b].node)
                    continue;
                PyErr_Format(PyExc_ValueError,
                             "node %zd (%s) uses this buffer and node %zd's (%s), which "
                             "overlap: a kernel node's fields may lie in one io buffer only",
                             q, self->nodes[q].kind->name, t,
                             o->type == NODE_INPUT ? "input" : "output");
                return -1;
            }
    }
    return 0;
}

static void program_dealloc(ProgramObject *self)
{
    for (Py_ssize_t i = 0; self->nodes && i < self->n; i++)
        bufs_release(&self->nodes[i].bs);
    PyMem_Free(self->nodes);
    free(self->data);
    free(self->relocs);
    Py_XDECREF(self->names);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *program_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", NULL};
    PyObject *nodes;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Program", kwlist, &nodes))
        return NULL;
    /* a tuple: the entries stay put while parse runs (an __index__ could edit a list) */
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq)
        return NULL;
    ProgramObject *self = (ProgramObject *)type->tp_alloc(type, 0);
    if (!self)
        goto fail;
    const Py_ssize_t n = PyTuple_GET_SIZE(seq);
    self->nodes = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(pnode));
    self->names = PyTuple_New(n);
    if (!self->nodes || !self->names) {
        PyErr_NoMemory();
        goto fail;
    }
    self->n = n; /* every bufset is empty (calloc): dealloc may release them all */

    /* Pass 1: shapes and kinds, and where each kernel struct lies in the data block. */
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name, *a;
        pnode *p = &self->nodes[i];
        if (node_kind(i, PyTuple_GET_ITEM(seq, i), p, &name, &a) < 0)
            goto fail;
        PyTuple_SET_ITEM(self->names, i, Py_NewRef(name));
        if (p->kind) {
            p->off = total;
            total = ALIGN_UP(total + p->kind->size);
        }
    }
    self->data = malloc(total > 0 ? total : 1);
    if (!self->data) {
        PyErr_NoMemory();
        goto fail;
    }

    /* Pass 2: parse every node, exactly as its eager binding. */
    for (Py_ssize_t i = 0; i < n; i++) {
        pnode *p = &self->nodes[i];
        PyObject *a = PyTuple_GET_ITEM(PyTuple_GET_ITEM(seq, i), 1);
        PyObject *const *av = &PyTuple_GET_ITEM(a, 0);
        const Py_ssize_t na = PyTuple_GET_SIZE(a);
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(self->names, i));
        int rc = 0;
        if (p->type == NODE_KERNEL) {
            p->data = self->data + p->off;
            rc = p->kind->parse(av, na, p->data, &p->bs);
        } else if (p->type == NODE_PYTHON) {
            rc = check_nargs("python", na, 0);
        } else {
            rc = io_parse(name, av, na, p);
            Py_ssize_t *count = p->type == NODE_INPUT ? &self->n_inputs : &self->n_outputs;
            if (rc == 0 && p->k >= *count)
                *count = p->k + 1;
        }
        if (rc < 0) {
            node_error(i, name);
            goto fail;
        }
    }

    /* Pass 3: the io nodes' relocations (every kernel struct is parsed now). */
    size_t cap = 0, nrel = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        pnode *p = &self->nodes[i];
        PyObject *a = PyTuple_GET_ITEM(PyTuple_GET_ITEM(seq, i), 1);
        if (p->type != NODE_INPUT && p->type != NODE_OUTPUT)
            continue;
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(self->names, i));
        p->r0 = p->r1 = (Py_ssize_t)nrel;
        if (PyTuple_GET_SIZE(a) == 3 &&
            (relocate(self, p, name, PyTuple_GET_ITEM(a, 2), &cap) < 0 ||
             io_disjoint(self, i) < 0)) {
            node_error(i, name);
            goto fail;
        }
        nrel = (size_t)p->r1;
    }
    Py_DECREF(seq);
    return (PyObject *)self;
fail:
    Py_DECREF(seq);
    Py_XDECREF(self);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* run                                                                                         */

/* Acquires run buffer i of tup (input or output) as a C-contiguous buffer. */
static int run_buf(PyObject *tup, Py_ssize_t i, const char *what, Py_buffer *v, int writable)
{
    PyObject *o = PyTuple_GET_ITEM(tup, i);
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, v, flags) == 0)
        return 0;
    char prefix[160];
    PyOS_snprintf(prefix, sizeof prefix, "Program.run: %s %zd (%.100s)", what, i,
                  Py_TYPE(o)->tp_name);
    prefix_error(prefix); /* keeps the exporter's exception type */
    return -1;
}

/* Run buffer rb matches the node's buffer nb (format and byte size); ValueError otherwise. */
static int run_match(Py_ssize_t i, const pnode *p, const Py_buffer *rb)
{
    const Py_buffer *nb = &p->bs.v[0];
    if (fmt_same(rb, nb) && rb->len == nb->len)
        return 0;
    const int in = p->type == NODE_INPUT;
    char s1[200], s2[200];
    PyErr_Format(PyExc_ValueError,
                 "Program.run: %s %zd has format '%s', shape %s (%zd bytes); node %zd (%s) "
                 "expects format '%s', shape %s (%zd bytes)",
                 in ? "input" : "output", p->k, fmt_str(rb), shape_str(rb, s1, sizeof s1),
                 rb->len, i, in ? "input" : "output", fmt_str(nb), shape_str(nb, s2, sizeof s2),
                 nb->len);
    return -1;
}

static PyObject *program_run(ProgramObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    PyObject *start_obj = nargs > 2 ? args[2] : NULL;
    const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw < 2 || nargs + nkw > 3 || nkw > 1 ||
        (nkw == 1 && (nargs != 2 ||
                      PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "start")))) {
        PyErr_SetString(PyExc_TypeError,
                        "Program.run(inputs: tuple, outputs: tuple, start: int = 0)");
        return NULL;
    }
    if (nkw == 1)
        start_obj = args[2];
    PyObject *inputs = args[0], *outputs = args[1];
    if (!PyTuple_Check(inputs) || !PyTuple_Check(outputs)) {
        PyErr_Format(PyExc_TypeError, "Program.run: inputs and outputs must be tuples, got "
                                      "%.100s and %.100s",
                     Py_TYPE(inputs)->tp_name, Py_TYPE(outputs)->tp_name);
        return NULL;
    }
    Py_ssize_t start = 0;
    if (start_obj && get_ssize("Program.run", "start", start_obj, &start) < 0)
        return NULL;
    if (start < 0 || start > self->n) {
        PyErr_Format(PyExc_ValueError, "Program.run: start = %zd is outside [0, %zd]", start,
                     self->n);
        return NULL;
    }
    const Py_ssize_t ni = PyTuple_GET_SIZE(inputs), no = PyTuple_GET_SIZE(outputs);
    if (ni != self->n_inputs || no != self->n_outputs) {
        PyErr_Format(PyExc_ValueError,
                     "Program.run: the program takes %zd inputs and %zd outputs; got %zd and %zd",
                     self->n_inputs, self->n_outputs, ni, no);
        return NULL;
    }
    if (atomic_exchange(&self->busy, 1)) {
        PyErr_SetString(PyExc_RuntimeError, "Program.run: already running in another thread; "
                                             "use one Program per thread");
        return NULL;
    }

    PyObject *result = NULL;
    Py_ssize_t nacq = 0;
    Py_buffer *rb = PyMem_Calloc((size_t)(ni + no) + 1, sizeof(Py_buffer));
    if (!rb) {
        PyErr_NoMemory();
        goto done;
    }
    for (; nacq < ni + no; nacq++)
        if (nacq < ni ? run_buf(inputs, nacq, "input", &rb[nacq], 0) < 0
                      : run_buf(outputs, nacq - ni, "output", &rb[nacq], 1) < 0)
            goto done;
    /* every copy node still to run, and every one with relocations, matches its buffer: the
     * loop below cannot fail on them */
    for (Py_ssize_t i = 0; i < self->n; i++) {
        const pnode *p = &self->nodes[i];
        if ((i >= start || p->r1 > p->r0) &&
            ((p->type == NODE_INPUT && run_match(i, p, &rb[p->k]) < 0) ||
             (p->type == NODE_OUTPUT && run_match(i, p, &rb[ni + p->k]) < 0)))
            goto done;
    }
    /* the kernels read / write a run buffer in place when it is aligned to its item size (C
     * contiguous, format and size checked above; no kernel's bits depend on more alignment) and
     * shares no byte with a run buffer that the run writes; every relocation is rewritten on
     * every call, so a run never sees the previous one's */
    for (Py_ssize_t i = 0; i < self->n; i++) {
        pnode *p = &self->nodes[i];
        if (p->r1 == p->r0)
            continue;
        const Py_ssize_t j = p->type == NODE_INPUT ? p->k : ni + p->k;
        const Py_buffer *b = &rb[j];
        p->direct = b->itemsize > 0 && (uintptr_t)b->buf % (uintptr_t)b->itemsize == 0;
        for (Py_ssize_t t = 0; p->direct && t < ni + no; t++)
            p->direct = t == j || (t < ni && j < ni) || !bufs_share(b, &rb[t]);
        unsigned char *base = p->direct ? b->buf : p->bs.v[0].buf;
        for (Py_ssize_t r = p->r0; r < p->r1; r++) {
            unsigned char *v = base + self->relocs[r].rel;
            memcpy(self->relocs[r].word, &v, sizeof v);
        }
    }

    Py_ssize_t i = start, stop = -1;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < self->n; i++) {
        const pnode *p = &self->nodes[i];
        const Py_buffer *nb = &p->bs.v[0];
        if (p->type == NODE_KERNEL) {
            rc = p->kind->exec(p->data);
            if (rc < 0)
                break;
        } else if (p->type == NODE_INPUT) {
            if (nb->len > 0 && !p->direct)
                memmove(nb->buf, rb[p->k].buf, (size_t)nb->len);
        } else if (p->type == NODE_OUTPUT) {
            if (nb->len > 0 && !p->direct)
                memmove(rb[ni + p->k].buf, nb->buf, (size_t)nb->len);
        } else {
            stop = i;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        gc_node_fail(self->nodes[i].kind, self->nodes[i].data, rc);
        node_error(i, self->nodes[i].kind->name);
        goto done;
    }
    result = PyLong_FromSsize_t(stop);
done:
    while (nacq > 0)
        PyBuffer_Release(&rb[--nacq]);
    PyMem_Free(rb);
    atomic_store(&self->busy, 0);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* The type                                                                                    */

static Py_ssize_t program_len(ProgramObject *self)
{
    return self->n;
}

static PyObject *program_names(ProgramObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->names);
}

static PyObject *program_n_inputs(ProgramObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(self->n_inputs);
}

static PyObject *program_n_outputs(ProgramObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(self->n_outputs);
}

static PyObject *program_running(ProgramObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(atomic_load(&self->busy));
}

static PyObject *program_repr(ProgramObject *self)
{
    return PyUnicode_FromFormat("<gpucore._cpu.Program: %zd nodes, %zd inputs, %zd outputs>",
                                self->n, self->n_inputs, self->n_outputs);
}

/* The kernel node kinds (nodes.h's list), all or (io) those declaring their pointer fields. */
static PyObject *kinds_tuple(int io)
{
    PyObject *t = PyList_New(0);
    for (int j = 0; t && j < N_KINDS; j++) {
        if (io && node_kinds[j]->nptrs == 0)
            continue;
        PyObject *s = PyUnicode_FromString(node_kinds[j]->name);
        if (!s || PyList_Append(t, s) < 0)
            Py_CLEAR(t);
        Py_XDECREF(s);
    }
    PyObject *tup = t ? PyList_AsTuple(t) : NULL;
    Py_XDECREF(t);
    return tup;
}

static PyObject *program_node_kinds(PyObject *unused, PyObject *noargs)
{
    (void)unused;
    (void)noargs;
    return kinds_tuple(0);
}

static PyObject *program_io_kinds(PyObject *unused, PyObject *noargs)
{
    (void)unused;
    (void)noargs;
    return kinds_tuple(1);
}

static PyMethodDef program_methods[] = {
    {"run", (PyCFunction)(void (*)(void))program_run, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("run(inputs, outputs, start=0)\n--\n\n"
               "Runs the nodes from start in order with the GIL released: until the end "
               "(returns -1) or a python node (returns its index; run it, then call run again "
               "with start = index + 1).  inputs / outputs: tuples of C-contiguous buffers, "
               "one per input / output index, matching their copy nodes' format and byte "
               "size.  RuntimeError if another thread is running this program.")},
    {"node_kinds", (PyCFunction)program_node_kinds, METH_NOARGS | METH_STATIC,
     PyDoc_STR("node_kinds()\n--\n\nThe kernel node kinds, by binding name (besides input, "
               "output and python).")},
    {"io_kinds", (PyCFunction)program_io_kinds, METH_NOARGS | METH_STATIC,
     PyDoc_STR("io_kinds()\n--\n\nThe kernel node kinds that declare their data pointer "
               "fields (nodes.h, GC_NODE_KIND_IO): the only ones an input / output node's "
               "nodes may list.")},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef program_getset[] = {
    {"names", (getter)program_names, NULL, PyDoc_STR("tuple of the nodes' names"), NULL},
    {"n_inputs", (getter)program_n_inputs, NULL,
     PyDoc_STR("run inputs expected: 1 + the largest input node index (0 without any)"), NULL},
    {"n_outputs", (getter)program_n_outputs, NULL, PyDoc_STR("run outputs expected"), NULL},
    {"running", (getter)program_running, NULL,
     PyDoc_STR("True while a run is in flight (in any thread)"), NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PySequenceMethods program_as_sequence = {.sq_length = (lenfunc)program_len};

PyTypeObject gc_ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpucore._cpu.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_repr = (reprfunc)program_repr,
    .tp_as_sequence = &program_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR(
        "Program(nodes, /)\n--\n\n"
        "A planned graph run by one C call.  nodes: a list of (name, args): name an eager "
        "binding of this module (gemm_ex, binary, ...; args exactly its positional arguments), "
        "or ('input', (k, dst[, nodes])), ('output', (k, src[, nodes])), ('python', ()) (nodes: "
        "kernel nodes that read / write dst / src in place of run buffer k when it is aligned; "
        "cpu/README.md).  Every node is checked "
        "as its binding would (errors prefixed 'Program node i (name): ') and its buffers stay "
        "acquired for the program's life."),
    .tp_methods = program_methods,
    .tp_getset = program_getset,
    .tp_new = program_new,
};
