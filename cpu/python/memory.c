/* Memory introspection for the Python side: the address of a buffer's first element.
 *
 * numpy's own ways to get it (arr.ctypes.data, arr.__array_interface__) cost microseconds
 * per call because they build Python objects; the allocator alignment check and the Vulkan
 * backend's operand lookup run on every op, so they ask here instead.
 */
#include "bindings.h"

GC_DOC(data_ptr, "data_ptr(buffer) -> int\n\nAddress of the buffer's first element "
                 "(any strides; the buffer is not copied or kept).");

PyObject *gc_py_data_ptr(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "data_ptr() takes exactly 1 argument (%zd given)", nargs);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_RECORDS_RO) < 0)
        return NULL;
    PyObject *res = PyLong_FromVoidPtr(view.buf);
    PyBuffer_Release(&view);
    return res;
}
