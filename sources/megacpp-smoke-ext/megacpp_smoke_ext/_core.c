/* megacpp_smoke_ext._core: the smallest real C extension the smoke target builds from source. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *core_add(PyObject *self, PyObject *args) {
    long long a, b, out;
    (void)self;
    if (!PyArg_ParseTuple(args, "LL:add", &a, &b)) {
        return NULL;
    }
    if (__builtin_add_overflow(a, b, &out)) {
        PyErr_SetString(PyExc_OverflowError, "add: result does not fit in a 64-bit integer");
        return NULL;
    }
    return PyLong_FromLongLong(out);
}

static PyMethodDef core_methods[] = {
    {"add", core_add, METH_VARARGS, "add(a, b) -> a + b, computed in C on 64-bit integers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "_core", "megacpp smoke C extension.", -1, core_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&core_module); }
