/* Bindings of dispatch.c and pool.c: info (ISA, caches, GEMM blocking), set_num_threads,
 * pool_awake. */
#include "args.h"
#include "bindings.h"
#include "isa.h"

GC_DOC(info,
       "info(, /)\n--\n\n"
       "What the extension runs on: {'isa': selected instruction set, 'available': the "
       "sets this CPU and build support (best first), 'threads': thread-pool size, "
       "'caches': {'l1d', 'l2', 'l3' (bytes), 'source'}, 'gemm': {'float32': {'kernel', "
       "'mr', 'nr', 'mc', 'kc', 'nc'}, 'float64': {...}}}.");

static PyObject *blocking_dict(const gc_blocking *b, const char *kernel)
{
    return Py_BuildValue("{s:s,s:i,s:i,s:n,s:n,s:n}", "kernel", kernel, "mr", b->mr, "nr", b->nr,
                         "mc", (Py_ssize_t)b->mc, "kc", (Py_ssize_t)b->kc, "nc",
                         (Py_ssize_t)b->nc);
}

PyObject *gc_py_info(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    if (check_nargs("info", nargs, 0) < 0)
        return NULL;
    const int mask = gc_isa_supported_mask();
    PyObject *avail = PyList_New(0);
    if (!avail)
        return NULL;
    for (int i = GC_ISA_COUNT - 1; i >= 0; i--) {
        if (!(mask & (1 << i)))
            continue;
        PyObject *s = PyUnicode_FromString(gc_isa_names[i]);
        if (!s || PyList_Append(avail, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(avail);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyObject *f32 = blocking_dict(&gc_blk_f32, gc_isa.ukr_f32_name);
    PyObject *f64 = f32 ? blocking_dict(&gc_blk_f64, gc_isa.ukr_f64_name) : NULL;
    PyObject *r = NULL;
    if (f64)
        r = Py_BuildValue("{s:s,s:O,s:i,s:{s:l,s:l,s:l,s:s},s:{s:O,s:O},s:l}", "isa",
                          gc_isa.name, "available", avail, "threads", gc_pool_size(), "caches",
                          "l1d", gc_cache_info.l1d, "l2", gc_cache_info.l2, "l3",
                          gc_cache_info.l3, "source", gc_cache_info.source, "gemm", "float32",
                          f32, "float64", f64, "gemv_stream_bytes",
                          (long)GC_GEMV_STREAM_BYTES);
    Py_DECREF(avail);
    Py_XDECREF(f32);
    Py_XDECREF(f64);
    return r;
}

GC_DOC(set_num_threads,
       "set_num_threads(n, /)\n--\n\n"
       "Sets the thread-pool size (n >= 1; the default is GPUCORE_NUM_THREADS or the CPUs "
       "this process may use).  Results do not depend on it.");

PyObject *gc_py_set_num_threads(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    Py_ssize_t n;
    if (check_nargs("set_num_threads", nargs, 1) < 0 ||
        get_min("set_num_threads", "n", args[0], 1, &n) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    gc_pool_set_size(n > 4096 ? 4096 : (int)n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

GC_DOC(pool_awake,
       "pool_awake() -> bool\n--\n\n"
       "Whether the thread pool has more than one thread and its first worker is awake "
       "(spinning for 200 us after a region, or not started yet) rather than asleep: while it "
       "is, small GEMMs split over two threads.  A snapshot, for tests and benchmarks "
       "(train_phases.py's in-step GEMM table).");

PyObject *gc_py_pool_awake(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    if (check_nargs("pool_awake", nargs, 0) < 0)
        return NULL;
    return PyBool_FromLong(gc_pool_awake());
}
