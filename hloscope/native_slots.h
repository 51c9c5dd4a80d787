/* Used by the compiled fast paths (hlo/_native.c): the offsets of a class's slots, to read
 * and write them in place as CPython's own member descriptors do. Refuses a class with a __dict__ or a name that is
 * not a plain object slot (T_OBJECT_EX), so that a changed class fails loudly at import, never silently. */
#ifndef HLOSCOPE_NATIVE_SLOTS_H
#define HLOSCOPE_NATIVE_SLOTS_H

#include <Python.h>
#include <structmember.h>

/* The offset of each of `names` in `type` into `offsets`; -1 and a TypeError (naming `who`) if one is not a slot. */
static int slot_offsets(PyTypeObject *type, const char **names, int count, Py_ssize_t *offsets, const char *who) {
    if (type->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "%s: %s has a __dict__", who, type->tp_name);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        PyObject *descr = PyDict_GetItemString(type->tp_dict, names[i]);
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
            ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%s: %s has no slot '%s'", who, type->tp_name, names[i]);
            return -1;
        }
        offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    return 0;
}

#endif
