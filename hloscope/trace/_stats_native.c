/* The per-event loops over a trace's Events in C (loaded by hloscope/trace/native.py, which lists each function with
 * the Python code it is the twin of): the check of impossible times (load.CheckedEvents), the statistics'
 * accumulation pass (stats._Accumulator.add), the host dispatch sum, the placement of device executions in steps and
 * each step's figures (stats.py). The Python code stays the one definition of what each figure means: the C code
 * takes the common cases (an Event whose fields have the types the readers give them) and hands the rest back to the
 * Python code, in order; the float sums are the same additions in the same order, an int stays an int.
 * tests/test_trace_stats_native.py compares both ways on every fixture and on generated events.
 *
 * Event's fields are read in place through their member descriptors' offsets (hloscope/native_slots.h); `setup`
 * refuses an Event class whose slots are not the ones named here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../native_slots.h"

enum { E_NAME, E_START, E_DUR, E_KIND, E_DEVICE, E_PROCESS, E_CATEGORY, E_HLO_OP, E_HLO_MODULE, E_CORRELATION,
       E_SOURCE, N_EVENT };
static const char *event_fields[N_EVENT] = {"name", "start_us", "dur_us", "kind", "device", "process", "category",
                                            "hlo_op", "hlo_module", "correlation", "category_source"};
static Py_ssize_t event_offset[N_EVENT];
#define FIELD(event, i) (*(PyObject **)((char *)(event) + event_offset[i]))

/* What setup() was given: the Event class and stats.py's constants. */
static PyTypeObject *event_type, *accumulator_type;
static PyObject *exec_kinds, *kernel_kind, *runtime_kind, *step_kind, *collective, *category_index;
static PyObject *one, *int_zero, *float_zero, *array_type;
static PyObject *s_add, *s_note_collective, *s_execution_start;  /* the accumulator's methods, by name */

static PyObject *setup(PyObject *module, PyObject *args) {
    PyObject *type, *kinds, *kernel, *runtime, *step, *coll, *index;
    if (!PyArg_ParseTuple(args, "O!O!UUUUO!:setup", &PyType_Type, &type, &PyFrozenSet_Type, &kinds, &kernel, &runtime,
                          &step, &coll, &PyDict_Type, &index))
        return NULL;
    Py_ssize_t offsets[N_EVENT];  /* kept only when every field is a slot: a refused class changes nothing */
    if (slot_offsets((PyTypeObject *)type, event_fields, N_EVENT, offsets, "setup") < 0) return NULL;
    memcpy(event_offset, offsets, sizeof offsets);
    Py_XSETREF(event_type, (PyTypeObject *)Py_NewRef(type));
    Py_XSETREF(exec_kinds, Py_NewRef(kinds));
    Py_XSETREF(kernel_kind, Py_NewRef(kernel));
    Py_XSETREF(runtime_kind, Py_NewRef(runtime));
    Py_XSETREF(step_kind, Py_NewRef(step));
    Py_XSETREF(collective, Py_NewRef(coll));
    Py_XSETREF(category_index, Py_NewRef(index));
    Py_RETURN_NONE;
}

static PyObject *set_accumulator_class(PyObject *module, PyObject *type) {
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "set_accumulator_class: expected a class");
        return NULL;
    }
    Py_XSETREF(accumulator_type, (PyTypeObject *)Py_NewRef(type));
    Py_RETURN_NONE;
}

static int same_text(PyObject *a, PyObject *b) { return a == b || PyUnicode_Compare(a, b) == 0; }

/* a + b as Python adds them, without a new call for the common float + float. New reference. */
static PyObject *plus(PyObject *a, PyObject *b) {
    if (PyFloat_CheckExact(a) && PyFloat_CheckExact(b)) return PyFloat_FromDouble(PyFloat_AS_DOUBLE(a) + PyFloat_AS_DOUBLE(b));
    return PyNumber_Add(a, b);
}

/* dict[key] = dict.get(key, missing) + b */
static int add_to(PyObject *dict, PyObject *key, PyObject *missing, PyObject *b) {
    PyObject *old = PyDict_GetItemWithError(dict, key);
    if (old == NULL && PyErr_Occurred()) return -1;
    PyObject *sum = plus(old != NULL ? old : missing, b);
    if (sum == NULL) return -1;
    int failed = PyDict_SetItem(dict, key, sum);
    Py_DECREF(sum);
    return failed;
}

/* ---- the accumulation pass ---- */

/* The accumulator's flat arrays, filled through byte buffers and `frombytes` (arrays have no C API). */
enum { X_START, X_END, X_CORR, X_KERNEL, X_CATEGORY, X_ANCHOR, L_CORR, L_START, L_DUR, N_BUF };
static const char *buf_names[N_BUF] = {"exec_start", "exec_end", "exec_corr", "exec_is_kernel", "exec_category",
                                       "exec_anchor", "launch_corr", "launch_start", "launch_dur"};
static const char buf_codes[N_BUF] = {'d', 'd', 'q', 'b', 'b', 'd', 'q', 'd', 'd'};
#define FLUSH_BYTES (1 << 18)  /* bounded memory: the buffers go to the arrays every 256 KB */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

typedef struct {
    PyObject *acc;
    PyObject *categories, *by_category, *source_time, *by_name, *by_hlo_op, *kernel_counts, *devices;
    PyObject *arrays[N_BUF];
    Buf buf[N_BUF];
    long long events, kernels;
    double device_time, host_runtime;
    int handed_back;  /* the accumulator's own `add` failed: its attributes, not these counters, are the state */
} Pass;

static int put(Buf *b, const void *value, Py_ssize_t size) {
    if (b->len + size > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 4096;
        char *data = PyMem_Realloc(b->data, cap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, value, size);
    b->len += size;
    return 0;
}

static int flush(Pass *p) {
    for (int i = 0; i < N_BUF; i++) {
        if (p->buf[i].len == 0) continue;
        PyObject *done = PyObject_CallMethod(p->arrays[i], "frombytes", "y#", p->buf[i].data, p->buf[i].len);
        p->buf[i].len = 0;
        if (done == NULL) return -1;
        Py_DECREF(done);
    }
    return 0;
}

static int set_number(PyObject *acc, const char *name, PyObject *value) {
    if (value == NULL) return -1;
    int failed = PyObject_SetAttrString(acc, name, value);
    Py_DECREF(value);
    return failed;
}

/* The running counters go back to the accumulator (before its own `add` runs, and at the end). */
static int store(Pass *p) {
    if (flush(p) < 0) return -1;
    if (set_number(p->acc, "events", PyLong_FromLongLong(p->events)) < 0 ||
        set_number(p->acc, "kernels", PyLong_FromLongLong(p->kernels)) < 0 ||
        set_number(p->acc, "device_time", PyFloat_FromDouble(p->device_time)) < 0 ||
        set_number(p->acc, "host_runtime", PyFloat_FromDouble(p->host_runtime)) < 0)
        return -1;
    return 0;
}

static int load_int(PyObject *acc, const char *name, long long *out) {
    PyObject *value = PyObject_GetAttrString(acc, name);
    if (value == NULL) return -1;
    if (!PyLong_CheckExact(value)) {
        PyErr_Format(PyExc_TypeError, "add_all: the accumulator's %s is not an int", name);
        Py_DECREF(value);
        return -1;
    }
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int load_float(PyObject *acc, const char *name, double *out) {
    PyObject *value = PyObject_GetAttrString(acc, name);
    if (value == NULL) return -1;
    if (!PyFloat_CheckExact(value)) {
        PyErr_Format(PyExc_TypeError, "add_all: the accumulator's %s is not a float", name);
        Py_DECREF(value);
        return -1;
    }
    *out = PyFloat_AS_DOUBLE(value);
    Py_DECREF(value);
    return 0;
}

static int load(Pass *p) {
    if (load_int(p->acc, "events", &p->events) < 0 || load_int(p->acc, "kernels", &p->kernels) < 0 ||
        load_float(p->acc, "device_time", &p->device_time) < 0 ||
        load_float(p->acc, "host_runtime", &p->host_runtime) < 0)
        return -1;
    return 0;
}

/* The accumulator's own `add` for an event not taken here. */
static int hand_back(Pass *p, PyObject *event) {
    if (store(p) < 0) return -1;
    PyObject *done = PyObject_CallMethodOneArg(p->acc, s_add, event);
    if (done == NULL) {
        p->handed_back = 1;
        return -1;
    }
    Py_DECREF(done);
    return load(p);
}

/* A [count, total] entry of by_name / by_hlo_op, or NULL (none yet, or not a list of two: left to Python). */
static PyObject *entry_of(PyObject *dict, PyObject *key, int *absent) {
    PyObject *entry = PyDict_GetItemWithError(dict, key);
    *absent = entry == NULL && !PyErr_Occurred();
    if (entry == NULL || !PyList_CheckExact(entry) || PyList_GET_SIZE(entry) != 2) return NULL;
    return Py_NewRef(entry);
}

/* name -> [1, duration] or entry += [1, duration] */
static int count_in(PyObject *dict, PyObject *key, PyObject *entry, PyObject *duration) {
    if (entry == NULL) {
        PyObject *fresh = PyList_New(2);
        if (fresh == NULL) return -1;
        PyList_SET_ITEM(fresh, 0, Py_NewRef(one));
        PyList_SET_ITEM(fresh, 1, Py_NewRef(duration));
        int failed = PyDict_SetItem(dict, key, fresh);
        Py_DECREF(fresh);
        return failed;
    }
    PyObject *count = plus(PyList_GET_ITEM(entry, 0), one);
    if (count == NULL) return -1;
    PyList_SetItem(entry, 0, count);
    PyObject *total = plus(PyList_GET_ITEM(entry, 1), duration);
    if (total == NULL) return -1;
    PyList_SetItem(entry, 1, total);
    return 0;
}

/* A device execution (kernel, memcpy, memset): 1 taken, 0 left to Python, -1 error. */
static int take_execution(Pass *p, PyObject *event, PyObject *kind) {
    PyObject *start = FIELD(event, E_START), *duration = FIELD(event, E_DUR), *name = FIELD(event, E_NAME);
    PyObject *category = FIELD(event, E_CATEGORY), *source = FIELD(event, E_SOURCE);
    PyObject *process = FIELD(event, E_PROCESS), *correlation = FIELD(event, E_CORRELATION);
    PyObject *hlo_op = FIELD(event, E_HLO_OP), *hlo_module = FIELD(event, E_HLO_MODULE);
    if (!PyFloat_CheckExact(start) || !PyFloat_CheckExact(duration) || !PyUnicode_CheckExact(name) ||
        !PyUnicode_CheckExact(category) || !PyUnicode_CheckExact(source) || !PyUnicode_CheckExact(process) ||
        (correlation != Py_None && !PyLong_CheckExact(correlation)) ||
        (hlo_op != Py_None && !PyUnicode_CheckExact(hlo_op)) ||
        (hlo_module != Py_None && !PyUnicode_CheckExact(hlo_module)))
        return 0;
    PyObject *index = PyDict_GetItemWithError(category_index, category);
    if (index == NULL) return PyErr_Occurred() ? -1 : 0;  /* an unknown category: Python raises KeyError */
    long category_number = PyLong_AsLong(index);
    if (category_number == -1 && PyErr_Occurred()) return -1;
    /* categories[category] and executions_by_category[category] must exist (Python raises KeyError otherwise) */
    if (PyDict_GetItemWithError(p->categories, category) == NULL ||
        PyDict_GetItemWithError(p->by_category, category) == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int absent, op_absent = 1;
    PyObject *by_name = entry_of(p->by_name, name, &absent), *by_op = NULL, *op_key = NULL;
    if (by_name == NULL && !absent) return PyErr_Occurred() ? -1 : 0;
    if (hlo_op != Py_None) {
        op_key = PyTuple_Pack(2, hlo_module, hlo_op);
        if (op_key == NULL) {
            Py_XDECREF(by_name);
            return -1;
        }
        by_op = entry_of(p->by_hlo_op, op_key, &op_absent);
        if (by_op == NULL && !op_absent) {
            Py_DECREF(op_key);
            Py_XDECREF(by_name);
            return PyErr_Occurred() ? -1 : 0;
        }
    }
    /* Taken: the same updates as _Accumulator.add, in its order. The fields read after a call of Python code (which
     * could set the event's fields anew) are held. */
    Py_INCREF(process);
    Py_INCREF(correlation);
    double d = PyFloat_AS_DOUBLE(duration), s = PyFloat_AS_DOUBLE(start);
    p->events++;
    p->device_time += d;
    if (add_to(p->categories, category, NULL, duration) < 0) goto error;
    if (add_to(p->by_category, category, NULL, one) < 0) goto error;
    if (add_to(p->source_time, source, float_zero, duration) < 0) goto error;
    if (count_in(p->by_name, name, by_name, duration) < 0) goto error;
    if (op_key != NULL && count_in(p->by_hlo_op, op_key, by_op, duration) < 0) goto error;
    char is_kernel = (char)same_text(kind, kernel_kind);
    if (is_kernel) {
        p->kernels++;
        if (add_to(p->kernel_counts, name, int_zero, one) < 0) goto error;
    }
    if (same_text(category, collective)) {
        PyObject *done = PyObject_CallMethodOneArg(p->acc, s_note_collective, event);
        if (done == NULL) goto error;
        Py_DECREF(done);
    }
    if (PySet_Add(p->devices, process) < 0) goto error;
    double end = s + d;
    long long corr = -1;  /* _NO_CORRELATION, also for an id beyond 64 bits */
    if (correlation != Py_None) {
        int overflow;
        corr = PyLong_AsLongLongAndOverflow(correlation, &overflow);
        if (overflow) corr = -1;
        else if (corr == -1 && PyErr_Occurred()) goto error;
    }
    char category_byte = (char)category_number;
    if (put(&p->buf[X_START], &s, 8) < 0 || put(&p->buf[X_END], &end, 8) < 0 || put(&p->buf[X_CORR], &corr, 8) < 0 ||
        put(&p->buf[X_KERNEL], &is_kernel, 1) < 0 || put(&p->buf[X_CATEGORY], &category_byte, 1) < 0)
        goto error;
    double anchor = s;
    if (hlo_module != Py_None) {  /* which program execution it is part of: Python's bookkeeping */
        PyObject *at = PyObject_CallMethodOneArg(p->acc, s_execution_start, event);
        if (at == NULL) goto error;
        anchor = PyFloat_AsDouble(at);
        Py_DECREF(at);
        if (anchor == -1.0 && PyErr_Occurred()) goto error;
    }
    if (put(&p->buf[X_ANCHOR], &anchor, 8) < 0) goto error;
    Py_DECREF(process);
    Py_DECREF(correlation);
    Py_XDECREF(by_name);
    Py_XDECREF(by_op);
    Py_XDECREF(op_key);
    return 1;
error:
    Py_DECREF(process);
    Py_DECREF(correlation);
    Py_XDECREF(by_name);
    Py_XDECREF(by_op);
    Py_XDECREF(op_key);
    return -1;
}

/* A host runtime call: its time, and its correlation id for the placement in steps. */
static int take_runtime(Pass *p, PyObject *event) {
    PyObject *start = FIELD(event, E_START), *duration = FIELD(event, E_DUR), *correlation = FIELD(event, E_CORRELATION);
    if (!PyFloat_CheckExact(start) || !PyFloat_CheckExact(duration) ||
        (correlation != Py_None && !PyLong_CheckExact(correlation)))
        return 0;
    double d = PyFloat_AS_DOUBLE(duration), s = PyFloat_AS_DOUBLE(start);
    p->events++;
    p->host_runtime += d;
    if (correlation != Py_None) {
        int overflow;
        long long corr = PyLong_AsLongLongAndOverflow(correlation, &overflow);
        if (corr == -1 && PyErr_Occurred()) return -1;
        if (!overflow &&
            (put(&p->buf[L_CORR], &corr, 8) < 0 || put(&p->buf[L_START], &s, 8) < 0 || put(&p->buf[L_DUR], &d, 8) < 0))
            return -1;
    }
    return 1;
}

static int take(Pass *p, PyObject *event) {
    if (Py_TYPE(event) != event_type) return 0;
    for (int i = 0; i < N_EVENT; i++)
        if (FIELD(event, i) == NULL) return 0;  /* an unset field: Python raises AttributeError */
    PyObject *device = FIELD(event, E_DEVICE), *kind = FIELD(event, E_KIND);
    if ((device != Py_True && device != Py_False) || !PyUnicode_CheckExact(kind)) return 0;
    if (device == Py_True) {
        int executes = PySet_Contains(exec_kinds, kind);
        if (executes < 0) return -1;
        if (executes) return take_execution(p, event, kind);
    }
    if (same_text(kind, runtime_kind)) return take_runtime(p, event);
    if (same_text(kind, step_kind)) return 0;  /* step markers: few, and kept by Python */
    p->events++;
    return 1;
}

static PyObject *container(PyObject *acc, const char *name, PyTypeObject *type) {
    PyObject *value = PyObject_GetAttrString(acc, name);
    if (value != NULL && !Py_IS_TYPE(value, type)) {
        PyErr_Format(PyExc_TypeError, "add_all: the accumulator's %s is not a %s", name, type->tp_name);
        Py_CLEAR(value);
    }
    return value;
}

static void release(Pass *p) {
    PyObject **held[] = {&p->categories, &p->by_category, &p->source_time, &p->by_name, &p->by_hlo_op,
                         &p->kernel_counts, &p->devices};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) Py_CLEAR(*held[i]);
    for (int i = 0; i < N_BUF; i++) {
        Py_CLEAR(p->arrays[i]);
        PyMem_Free(p->buf[i].data);
    }
}

static PyObject *add_all(PyObject *module, PyObject *args) {
    PyObject *acc, *events;
    if (!PyArg_ParseTuple(args, "OO:add_all", &acc, &events)) return NULL;
    if (event_type == NULL || accumulator_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "add_all: setup() and set_accumulator_class() were not called");
        return NULL;
    }
    if (Py_TYPE(acc) != accumulator_type) {  /* a subclass may change what add() does: it runs its own loop */
        PyErr_Format(PyExc_TypeError, "add_all: expected a %s, not %s", accumulator_type->tp_name, Py_TYPE(acc)->tp_name);
        return NULL;
    }
    Pass p;
    memset(&p, 0, sizeof p);
    p.acc = acc;
    if (!(p.categories = container(acc, "categories", &PyDict_Type)) ||
        !(p.by_category = container(acc, "executions_by_category", &PyDict_Type)) ||
        !(p.source_time = container(acc, "source_time", &PyDict_Type)) ||
        !(p.by_name = container(acc, "by_name", &PyDict_Type)) ||
        !(p.by_hlo_op = container(acc, "by_hlo_op", &PyDict_Type)) ||
        !(p.kernel_counts = container(acc, "kernel_counts", &PyDict_Type)) ||
        !(p.devices = container(acc, "devices", &PySet_Type)))
        goto fail;
    for (int i = 0; i < N_BUF; i++) {
        p.arrays[i] = container(acc, buf_names[i], (PyTypeObject *)array_type);
        if (p.arrays[i] == NULL) goto fail;
        PyObject *code = PyObject_GetAttrString(p.arrays[i], "typecode");
        if (code == NULL) goto fail;
        int matches = PyUnicode_Check(code) && PyUnicode_GET_LENGTH(code) == 1 &&
                      PyUnicode_READ_CHAR(code, 0) == (Py_UCS4)buf_codes[i];
        Py_DECREF(code);
        if (!matches) {
            PyErr_Format(PyExc_TypeError, "add_all: the accumulator's %s is not an array('%c')", buf_names[i],
                         buf_codes[i]);
            goto fail;
        }
    }
    if (load(&p) < 0) goto fail;
    PyObject *iterator = PyObject_GetIter(events);
    if (iterator == NULL) goto fail;
    PyObject *event;
    int failed = 0;
    while (!failed && (event = PyIter_Next(iterator)) != NULL) {
        int taken = take(&p, event);
        if (taken == 0) taken = hand_back(&p, event) < 0 ? -1 : 1;
        Py_DECREF(event);
        failed = taken < 0;
        for (int i = 0; !failed && i < N_BUF; i++)
            if (p.buf[i].len >= FLUSH_BYTES) failed = flush(&p) < 0;
    }
    Py_DECREF(iterator);
    if (failed || PyErr_Occurred()) {  /* the events consumed so far stay counted, as in the Python loop */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (!p.handed_back && store(&p) < 0) PyErr_Clear();
        PyErr_Restore(type, value, traceback);
        goto fail;
    }
    if (store(&p) < 0) goto fail;
    release(&p);
    Py_RETURN_NONE;
fail:
    release(&p);
    return NULL;
}

/* ---- after the pass: host dispatch and the placement in steps ---- */

typedef struct {
    Py_buffer view;
    Py_ssize_t n;
} Column;

/* A flat array of `code` ('q': int64, 'd': double) through the buffer protocol. */
static int column(PyObject *obj, char code, const char *name, Column *c) {
    if (PyObject_GetBuffer(obj, &c->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (c->view.format == NULL || c->view.format[0] != code || c->view.format[1] != '\0' || c->view.itemsize != 8) {
        PyErr_Format(PyExc_TypeError, "%s: expected an array('%c')", name, code);
        PyBuffer_Release(&c->view);
        c->view.obj = NULL;
        return -1;
    }
    c->n = c->view.len / 8;
    return 0;
}

static void release_columns(Column *columns, int count) {
    for (int i = 0; i < count; i++)
        if (columns[i].view.obj != NULL) PyBuffer_Release(&columns[i].view);
}

static int compare_ids(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The device executions' correlation ids, sorted, for membership tests. */
static long long *sorted_ids(const Column *exec_corr) {
    long long *ids = PyMem_Malloc(exec_corr->n ? exec_corr->n * sizeof(long long) : 1);
    if (ids == NULL) return (long long *)PyErr_NoMemory();
    memcpy(ids, exec_corr->view.buf, exec_corr->n * sizeof(long long));
    qsort(ids, exec_corr->n, sizeof(long long), compare_ids);
    return ids;
}

static int contains(const long long *ids, Py_ssize_t n, long long id) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && ids[lo] == id;
}

static int same_length(Column *a, Column *b, const char *who) {
    if (a->n == b->n) return 0;
    PyErr_Format(PyExc_ValueError, "%s: columns of different lengths (%zd and %zd)", who, a->n, b->n);
    return -1;
}

static PyObject *dispatched_time(PyObject *module, PyObject *args) {
    PyObject *objects[3];
    Column c[3];
    memset(c, 0, sizeof c);
    if (!PyArg_ParseTuple(args, "OOO:dispatched_time", &objects[0], &objects[1], &objects[2])) return NULL;
    if (column(objects[0], 'q', "dispatched_time", &c[0]) < 0 || column(objects[1], 'd', "dispatched_time", &c[1]) < 0 ||
        column(objects[2], 'q', "dispatched_time", &c[2]) < 0 || same_length(&c[0], &c[1], "dispatched_time") < 0) {
        release_columns(c, 3);
        return NULL;
    }
    long long *ids = sorted_ids(&c[2]);
    if (ids == NULL) {
        release_columns(c, 3);
        return NULL;
    }
    const long long *corr = c[0].view.buf;
    const double *dur = c[1].view.buf;
    double total = 0.0;
    int any = 0;
    for (Py_ssize_t i = 0; i < c[0].n; i++)
        if (contains(ids, c[2].n, corr[i])) {
            total += dur[i];
            any = 1;
        }
    PyMem_Free(ids);
    release_columns(c, 3);
    return any ? PyFloat_FromDouble(total) : PyLong_FromLong(0);  /* Python's running total starts as the int 0 */
}

/* _LaunchSteps: launches by correlation id, as increasing runs (at most MAX_RUNS) and the rest apart. */
#define MAX_RUNS 32
#define OUTSIDE_STEPS (-1)
#define NO_STEP (-1)
#define EARLY (-2)

typedef struct {
    long long *ids;
    int *steps;
    Py_ssize_t n, cap;
} Run;

typedef struct {
    long long id;
    Py_ssize_t order;
    int step;
} Other;

typedef struct {
    Run runs[MAX_RUNS];
    int count;
    Other *others;
    Py_ssize_t n_others, others_cap;
} Launches;

static int run_append(Run *run, long long id, int step) {
    if (run->n == run->cap) {
        Py_ssize_t cap = run->cap ? run->cap * 2 : 64;
        long long *ids = PyMem_Realloc(run->ids, cap * sizeof(long long));
        if (ids == NULL) return -1;
        run->ids = ids;
        int *steps = PyMem_Realloc(run->steps, cap * sizeof(int));
        if (steps == NULL) return -1;
        run->steps = steps;
        run->cap = cap;
    }
    run->ids[run->n] = id;
    run->steps[run->n] = step;
    run->n++;
    return 0;
}

static int launches_add(Launches *l, long long id, int step) {
    for (int r = 0; r < l->count; r++)
        if (l->runs[r].ids[l->runs[r].n - 1] <= id) return run_append(&l->runs[r], id, step);
    if (l->count < MAX_RUNS) return run_append(&l->runs[l->count++], id, step);
    if (l->n_others == l->others_cap) {
        Py_ssize_t cap = l->others_cap ? l->others_cap * 2 : 256;
        Other *others = PyMem_Realloc(l->others, cap * sizeof(Other));
        if (others == NULL) return -1;
        l->others = others;
        l->others_cap = cap;
    }
    l->others[l->n_others].id = id;
    l->others[l->n_others].order = l->n_others;
    l->others[l->n_others].step = step;
    l->n_others++;
    return 0;
}

static int compare_others(const void *a, const void *b) {
    const Other *x = a, *y = b;
    if (x->id != y->id) return (x->id > y->id) - (x->id < y->id);
    return (x->order > y->order) - (x->order < y->order);
}

/* The step of the launch with this id: 1 and *step when found (OUTSIDE_STEPS: made outside every step), else 0. */
static int launches_step_of(const Launches *l, long long id, int *step) {
    for (int r = 0; r < l->count; r++) {
        const Run *run = &l->runs[r];
        Py_ssize_t lo = 0, hi = run->n;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (run->ids[mid] < id) lo = mid + 1;
            else hi = mid;
        }
        if (lo < run->n && run->ids[lo] == id) {
            *step = run->steps[lo];
            return 1;
        }
    }
    /* the rest: a dict in Python, so the last launch added with this id wins */
    Py_ssize_t lo = 0, hi = l->n_others;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (l->others[mid].id <= id) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && l->others[lo - 1].id == id) {
        *step = l->others[lo - 1].step;
        return 1;
    }
    return 0;
}

static void launches_free(Launches *l) {
    for (int r = 0; r < MAX_RUNS; r++) {
        PyMem_Free(l->runs[r].ids);
        PyMem_Free(l->runs[r].steps);
    }
    PyMem_Free(l->others);
}

/* bisect.bisect_right(starts, t) - 1 */
static Py_ssize_t last_started(const double *starts, Py_ssize_t n, double t) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (t < starts[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo - 1;
}

enum { P_EXEC_CORR, P_EXEC_ANCHOR, P_LAUNCH_CORR, P_LAUNCH_START, P_LAUNCH_DUR, P_WINDOW_START, P_WINDOW_END, N_P };

static PyObject *place(PyObject *module, PyObject *args) {
    PyObject *objects[N_P];
    int host_windows;
    long long flow_base;
    if (!PyArg_ParseTuple(args, "OOOOOOOpL:place", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4],
                          &objects[5], &objects[6], &host_windows, &flow_base))
        return NULL;
    static const char codes[N_P] = {'q', 'd', 'q', 'd', 'd', 'd', 'd'};
    Column c[N_P];
    memset(c, 0, sizeof c);
    Launches launches;
    memset(&launches, 0, sizeof launches);
    long long *ids = NULL;
    double *time = NULL;
    int *steps = NULL;
    PyObject *result = NULL;
    for (int i = 0; i < N_P; i++)
        if (column(objects[i], codes[i], "place", &c[i]) < 0) goto done;
    if (same_length(&c[P_EXEC_CORR], &c[P_EXEC_ANCHOR], "place") < 0 ||
        same_length(&c[P_LAUNCH_CORR], &c[P_LAUNCH_START], "place") < 0 ||
        same_length(&c[P_LAUNCH_CORR], &c[P_LAUNCH_DUR], "place") < 0 ||
        same_length(&c[P_WINDOW_START], &c[P_WINDOW_END], "place") < 0)
        goto done;
    Py_ssize_t windows = c[P_WINDOW_START].n, n_launches = c[P_LAUNCH_CORR].n, n_exec = c[P_EXEC_CORR].n;
    if (windows > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "place: too many steps");
        goto done;
    }
    const double *window_start = c[P_WINDOW_START].view.buf, *window_end = c[P_WINDOW_END].view.buf;
    const long long *launch_corr = c[P_LAUNCH_CORR].view.buf, *exec_corr = c[P_EXEC_CORR].view.buf;
    const double *launch_start = c[P_LAUNCH_START].view.buf, *launch_dur = c[P_LAUNCH_DUR].view.buf;
    const double *exec_anchor = c[P_EXEC_ANCHOR].view.buf;
    ids = sorted_ids(&c[P_EXEC_CORR]);
    time = PyMem_Calloc(windows ? windows : 1, sizeof(double));
    steps = PyMem_Malloc(n_exec ? n_exec * sizeof(int) : 1);
    if (ids == NULL || time == NULL || steps == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_launches; i++) {  /* StepLocator.index_at, then _LaunchSteps._add */
        Py_ssize_t index = last_started(window_start, windows, launch_start[i]);
        int step = OUTSIDE_STEPS;
        if (index >= 0 && launch_start[i] <= window_end[index]) {
            step = (int)index;
            if (contains(ids, n_exec, launch_corr[i])) time[index] += launch_dur[i];
        }
        if (launches_add(&launches, launch_corr[i], step) < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (launches.n_others) qsort(launches.others, launches.n_others, sizeof(Other), compare_others);
    int use_launches = host_windows && n_launches > 0;
    for (Py_ssize_t i = 0; i < n_exec; i++) {
        int step = NO_STEP, found = 0;
        if (use_launches && exec_corr[i] != -1) {
            found = launches_step_of(&launches, exec_corr[i], &step);
            if (!found && exec_corr[i] < flow_base) {
                steps[i] = EARLY;  /* launched before the profiler started recording */
                continue;
            }
            if (found && step == OUTSIDE_STEPS) found = 0;
        }
        if (!found) {
            Py_ssize_t index = last_started(window_start, windows, exec_anchor[i]);
            step = index >= 0 ? (int)index : NO_STEP;
        }
        steps[i] = step;
    }
    PyObject *per_step = PyList_New(windows);
    if (per_step == NULL) goto done;
    for (Py_ssize_t w = 0; w < windows; w++) {
        PyObject *value = PyFloat_FromDouble(time[w]);
        if (value == NULL) {
            Py_DECREF(per_step);
            goto done;
        }
        PyList_SET_ITEM(per_step, w, value);
    }
    PyObject *placed = PyObject_CallFunction(array_type, "sy#", "i", (const char *)steps, n_exec * (Py_ssize_t)sizeof(int));
    if (placed == NULL) {
        Py_DECREF(per_step);
        goto done;
    }
    result = PyTuple_Pack(2, placed, per_step);
    Py_DECREF(placed);
    Py_DECREF(per_step);
done:
    release_columns(c, N_P);
    launches_free(&launches);
    PyMem_Free(ids);
    PyMem_Free(time);
    PyMem_Free(steps);
    return result;
}


/* ---- the figures of each step (stats._step_figures; busy time as steps.busy_summary, collectives as
 * steps.exposed_time) ---- */

typedef struct {
    double start, end;
    Py_ssize_t order;  /* Python's sort is stable: ties keep their order */
} Interval;

static int compare_intervals(const void *a, const void *b) {
    const Interval *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

typedef struct {
    double busy, span, idle, largest_gap;
    Py_ssize_t gaps;
} Busy;

/* steps.busy_summary: sorts `iv` in place. */
static Busy busy_of(Interval *iv, Py_ssize_t n) {
    Busy b = {0.0, 0.0, 0.0, 0.0, 0};
    if (n == 0) return b;
    qsort(iv, n, sizeof(Interval), compare_intervals);
    double current_start = iv[0].start, current_end = iv[0].end, first_start = current_start;
    for (Py_ssize_t i = 1; i < n; i++) {
        if (iv[i].start > current_end) {
            b.busy += current_end - current_start;
            double gap = iv[i].start - current_end;
            b.gaps++;
            if (gap > b.largest_gap) b.largest_gap = gap;
            current_start = iv[i].start;
            current_end = iv[i].end;
        } else if (iv[i].end > current_end) {
            current_end = iv[i].end;
        }
    }
    b.busy += current_end - current_start;
    b.span = current_end - first_start;
    b.idle = b.span - b.busy;
    if (0.0 > b.idle) b.idle = 0.0;
    return b;
}

/* steps.merge_intervals: sorts `iv` in place and merges it into its first *n entries. */
static void merge(Interval *iv, Py_ssize_t *n) {
    qsort(iv, *n, sizeof(Interval), compare_intervals);
    Py_ssize_t merged = 0;
    for (Py_ssize_t i = 0; i < *n; i++) {
        if (merged && iv[i].start <= iv[merged - 1].end) {
            if (iv[i].end > iv[merged - 1].end) iv[merged - 1].end = iv[i].end;
        } else {
            iv[merged++] = iv[i];
        }
    }
    *n = merged;
}

/* steps.exposed_time of merged, sorted intervals: interval_length(subtract_intervals(a, b)); *any = 0 when the
 * difference is empty (Python's total is then the int 0). */
static double exposed(const Interval *a, Py_ssize_t na, const Interval *b, Py_ssize_t nb, int *any) {
    double total = 0.0;
    *any = 0;
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < na; i++) {
        double s = a[i].start, e = a[i].end, cursor = s;
        while (j < nb && b[j].end <= s) j++;
        Py_ssize_t k = j;
        while (k < nb && b[k].start < e) {
            if (b[k].start > cursor) {
                total += b[k].start - cursor;
                *any = 1;
            }
            if (b[k].end > cursor) cursor = b[k].end;
            k++;
        }
        if (cursor < e) {
            total += e - cursor;
            *any = 1;
        }
    }
    return total;
}

static PyObject *floats_list(const double *values, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        PyObject *value = PyFloat_FromDouble(values[i]);
        if (value == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, value);
    }
    return list;
}

static PyObject *longs_list(const long long *values, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        PyObject *value = PyLong_FromLongLong(values[i]);
        if (value == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, value);
    }
    return list;
}

/* A flat array of one-byte or four-byte integers ('b' or 'i'). */
static int small_ints(PyObject *obj, char code, int size, const char *name, Column *c) {
    if (PyObject_GetBuffer(obj, &c->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (c->view.format == NULL || c->view.format[0] != code || c->view.format[1] != '\0' || c->view.itemsize != size) {
        PyErr_Format(PyExc_TypeError, "%s: expected an array('%c')", name, code);
        PyBuffer_Release(&c->view);
        c->view.obj = NULL;
        return -1;
    }
    c->n = c->view.len / size;
    return 0;
}

/* One step's figures: (kernels, counts, times, busy, span, idle, gaps, largest gap, collective, exposed). */
static PyObject *one_step(Interval *all, Interval *scratch, Py_ssize_t n, const signed char *flags, long long kernels,
                          const long long *counts, const double *times, Py_ssize_t categories) {
    Busy busy = busy_of(all, n);  /* sorts `all`; flags[order] is each execution's flag (`scratch`: room for 2n) */
    double collective_us = 0.0, exposed_us = 0.0;
    int exposed_any = 1;  /* a float 0.0 unless exposed_time's running total stayed the int 0 */
    Py_ssize_t n_collective = 0, n_other = 0;
    for (Py_ssize_t i = 0; i < n; i++) n_collective += flags[all[i].order] != 0;
    if (n_collective) {  /* each part keeps its executions' order for ties, as the Python lists do */
        Interval *collective = scratch, *other = scratch + n_collective;
        Py_ssize_t c = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (flags[all[i].order]) collective[c++] = all[i];
            else other[n_other++] = all[i];
        }
        memcpy(other + n_other, collective, n_collective * sizeof(Interval));  /* a copy for busy_summary */
        collective_us = busy_of(other + n_other, n_collective).busy;
        Py_ssize_t merged_collective = n_collective, merged_other = n_other;
        merge(collective, &merged_collective);
        merge(other, &merged_other);
        exposed_us = exposed(collective, merged_collective, other, merged_other, &exposed_any);
    }
    PyObject *count_list = longs_list(counts, categories), *time_list = floats_list(times, categories);
    PyObject *exposed_value = exposed_any ? PyFloat_FromDouble(exposed_us) : PyLong_FromLong(0);
    PyObject *step = NULL;
    if (count_list != NULL && time_list != NULL && exposed_value != NULL)
        step = Py_BuildValue("(LOOdddnddO)", kernels, count_list, time_list, busy.busy, busy.span, busy.idle,
                             busy.gaps, busy.largest_gap, collective_us, exposed_value);
    Py_XDECREF(count_list);
    Py_XDECREF(time_list);
    Py_XDECREF(exposed_value);
    return step;
}

static PyObject *step_figures(PyObject *module, PyObject *args) {
    PyObject *objects[5];
    Py_ssize_t steps, categories, collective_index;
    if (!PyArg_ParseTuple(args, "OOOOOnnn:step_figures", &objects[0], &objects[1], &objects[2], &objects[3],
                          &objects[4], &steps, &categories, &collective_index))
        return NULL;
    if (steps < 0 || categories < 1 || categories > 127 || collective_index < 0 || collective_index >= categories) {
        PyErr_SetString(PyExc_ValueError, "step_figures: steps, categories or collective index out of range");
        return NULL;
    }
    Column c[5];
    memset(c, 0, sizeof c);
    PyObject *result = NULL, *figures = NULL;
    Py_ssize_t *first = NULL, *members = NULL;
    Interval *intervals = NULL;
    signed char *flags = NULL;
    long long *counts = NULL;
    double *times = NULL;
    if (column(objects[0], 'd', "step_figures", &c[0]) < 0 || column(objects[1], 'd', "step_figures", &c[1]) < 0 ||
        small_ints(objects[2], 'i', sizeof(int), "step_figures", &c[2]) < 0 ||
        small_ints(objects[3], 'b', 1, "step_figures", &c[3]) < 0 ||
        small_ints(objects[4], 'b', 1, "step_figures", &c[4]) < 0 || same_length(&c[0], &c[1], "step_figures") < 0 ||
        same_length(&c[0], &c[2], "step_figures") < 0 || same_length(&c[0], &c[3], "step_figures") < 0 ||
        same_length(&c[0], &c[4], "step_figures") < 0)
        goto done;
    Py_ssize_t n = c[0].n;
    const double *start = c[0].view.buf, *end = c[1].view.buf;
    const int *step_of = c[2].view.buf;
    const signed char *is_kernel = c[3].view.buf, *category = c[4].view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (step_of[i] >= steps || category[i] < 0 || category[i] >= categories) {
            PyErr_SetString(PyExc_ValueError, "step_figures: a step or category index out of range");
            goto done;
        }
        if (isnan(start[i]) || isnan(end[i])) {  /* no order to sort by: left to the Python code */
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    /* the executions of each step, in their order: a counting sort by step */
    if (steps >= PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(Py_ssize_t)) {
        PyErr_NoMemory();
        goto done;
    }
    first = PyMem_Calloc(steps + 1, sizeof(Py_ssize_t));
    members = PyMem_Malloc((n ? n : 1) * sizeof(Py_ssize_t));
    if (first == NULL || members == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t largest = 0;  /* the scratch is one step's: the largest */
    for (Py_ssize_t i = 0; i < n; i++)
        if (step_of[i] >= 0) first[step_of[i] + 1]++;
    for (Py_ssize_t s = 1; s <= steps; s++)
        if (first[s] > largest) largest = first[s];
    intervals = PyMem_Malloc((largest ? 3 * largest : 1) * sizeof(Interval));
    flags = PyMem_Malloc(largest ? largest : 1);
    counts = PyMem_Malloc(categories * sizeof(long long));
    times = PyMem_Malloc(categories * sizeof(double));
    if (intervals == NULL || flags == NULL || counts == NULL || times == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    long long early_executions = 0, early_kernels = 0;
    double early_time = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (step_of[i] == EARLY) {
            early_executions++;
            early_kernels += is_kernel[i];
            early_time += end[i] - start[i];
        }
    }
    for (Py_ssize_t s = 0; s < steps; s++) first[s + 1] += first[s];
    for (Py_ssize_t i = 0; i < n; i++)
        if (step_of[i] >= 0) members[first[step_of[i]]++] = i;
    for (Py_ssize_t s = steps; s > 0; s--) first[s] = first[s - 1];  /* back to each step's start */
    first[0] = 0;
    figures = PyList_New(steps);
    if (figures == NULL) goto done;
    for (Py_ssize_t s = 0; s < steps; s++) {
        Py_ssize_t count = first[s + 1] - first[s];
        long long kernels = 0;
        for (Py_ssize_t k = 0; k < categories; k++) {
            counts[k] = 0;
            times[k] = 0.0;
        }
        for (Py_ssize_t j = 0; j < count; j++) {
            Py_ssize_t i = members[first[s] + j];
            intervals[j].start = start[i];
            intervals[j].end = end[i];
            intervals[j].order = j;
            flags[j] = category[i] == collective_index;
            kernels += is_kernel[i];
            counts[category[i]]++;
            times[category[i]] += end[i] - start[i];
        }
        PyObject *step = one_step(intervals, intervals + count, count, flags, kernels, counts, times, categories);
        if (step == NULL) goto done;
        PyList_SET_ITEM(figures, s, step);
    }
    result = Py_BuildValue("(O(LLd))", figures, early_executions, early_kernels, early_time);
done:
    Py_XDECREF(figures);
    release_columns(c, 5);
    PyMem_Free(first);
    PyMem_Free(members);
    PyMem_Free(intervals);
    PyMem_Free(flags);
    PyMem_Free(counts);
    PyMem_Free(times);
    return result;
}

/* ---- load.CheckedEvents: the events of a trace without those with impossible times ---- */

typedef struct {
    PyObject_HEAD
    PyObject *source;  /* the events' iterator; NULL once it is finished */
    PyObject *possible, *finish;  /* load._possible(event), CheckedEvents._finish(skipped) */
    double max_event_us, max_time_us;
    Py_ssize_t skipped;
    int running;  /* in next(): a re-entrant next() is refused, as a running generator refuses it */
} Checked;

static PyTypeObject CheckedType;

static PyObject *Checked_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *events, *possible, *finish;
    double max_event_us, max_time_us;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Checked() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOdd:Checked", &events, &possible, &finish, &max_event_us, &max_time_us)) return NULL;
    if (event_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Checked: setup() was not called");
        return NULL;
    }
    PyObject *source = PyObject_GetIter(events);
    if (source == NULL) return NULL;
    Checked *self = PyObject_GC_New(Checked, type);
    if (self == NULL) {
        Py_DECREF(source);
        return NULL;
    }
    self->source = source;
    self->possible = Py_NewRef(possible);
    self->finish = Py_NewRef(finish);
    self->max_event_us = max_event_us;
    self->max_time_us = max_time_us;
    self->skipped = 0;
    self->running = 0;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* 1: the event's times are possible, 0: not, -1: error. */
static int possible(Checked *self, PyObject *event) {
    if (Py_TYPE(event) == event_type) {
        PyObject *duration = FIELD(event, E_DUR), *start = FIELD(event, E_START);  /* NULL: unset, Python raises */
        if (duration != NULL && start != NULL && PyFloat_CheckExact(duration) && PyFloat_CheckExact(start)) {
            double d = PyFloat_AS_DOUBLE(duration), s = PyFloat_AS_DOUBLE(start);
            return 0 <= d && d <= self->max_event_us && -self->max_time_us <= s && s <= self->max_time_us;  /* NaN: 0 */
        }
    }
    PyObject *answer = PyObject_CallOneArg(self->possible, event);
    if (answer == NULL) return -1;
    int truth = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return truth;
}

static PyObject *Checked_next(Checked *self) {
    if (self->source == NULL) return NULL;
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "Checked: already executing");
        return NULL;
    }
    self->running = 1;
    PyObject *source = Py_NewRef(self->source), *event;  /* held: Python code called below cannot free it */
    while ((event = PyIter_Next(source)) != NULL) {
        int ok = possible(self, event);
        if (ok > 0) {
            Py_DECREF(source);
            self->running = 0;
            return event;
        }
        Py_DECREF(event);
        if (ok < 0) break;
        self->skipped++;
    }
    Py_DECREF(source);
    Py_CLEAR(self->source);  /* finished, as the Python generator would be, after an error too */
    PyObject *done = NULL;
    if (!PyErr_Occurred()) {
        PyObject *finish = Py_NewRef(self->finish);
        done = PyObject_CallFunction(finish, "n", self->skipped);
        Py_DECREF(finish);
    }
    Py_XDECREF(done);
    self->running = 0;
    return NULL;
}

static int Checked_traverse(Checked *self, visitproc visit, void *arg) {
    Py_VISIT(self->source);
    Py_VISIT(self->possible);
    Py_VISIT(self->finish);
    return 0;
}

static int Checked_clear(Checked *self) {
    Py_CLEAR(self->source);
    Py_CLEAR(self->possible);
    Py_CLEAR(self->finish);
    return 0;
}

static void Checked_dealloc(Checked *self) {
    PyObject_GC_UnTrack(self);
    Checked_clear(self);
    PyObject_GC_Del(self);
}

static PyTypeObject CheckedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hloscope.trace._stats_native.Checked",
    .tp_basicsize = sizeof(Checked),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Checked(events, possible, finish, max_event_us, max_time_us): the events whose times are possible; "
              "finish(skipped) when they are all read",
    .tp_new = Checked_new,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Checked_next,
    .tp_traverse = (traverseproc)Checked_traverse,
    .tp_clear = (inquiry)Checked_clear,
    .tp_dealloc = (destructor)Checked_dealloc,
};

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(Event, DEVICE_EXEC_KINDS, KERNEL, RUNTIME, STEP, COLLECTIVE, category_index): the class and constants"},
    {"set_accumulator_class", set_accumulator_class, METH_O,
     "set_accumulator_class(stats._Accumulator): the only class add_all takes (a subclass may change add())"},
    {"add_all", add_all, METH_VARARGS, "add_all(accumulator, events): accumulator.add(event) for each event"},
    {"dispatched_time", dispatched_time, METH_VARARGS,
     "dispatched_time(launch_corr, launch_dur, exec_corr): the time of the launches of device executions"},
    {"place", place, METH_VARARGS,
     "place(exec_corr, exec_anchor, launch_corr, launch_start, launch_dur, window_start, window_end, host_windows, "
     "flow_base) -> (array('i') of step indices, host launch time per step)"},
    {"step_figures", step_figures, METH_VARARGS,
     "step_figures(exec_start, exec_end, step_of_execution, exec_is_kernel, exec_category, steps, categories, "
     "collective_index) -> ([per step: (kernels, counts, times, busy, span, idle, gaps, largest gap, collective, "
     "exposed)], (early executions, early kernels, early us))"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef stats_native_module = {PyModuleDef_HEAD_INIT, "_stats_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__stats_native(void) {
    PyObject *array = PyImport_ImportModule("array");
    if (array == NULL) return NULL;
    array_type = PyObject_GetAttrString(array, "array");
    Py_DECREF(array);
    one = PyLong_FromLong(1);
    int_zero = PyLong_FromLong(0);
    float_zero = PyFloat_FromDouble(0.0);
    s_add = PyUnicode_InternFromString("add");
    s_note_collective = PyUnicode_InternFromString("_note_collective");
    s_execution_start = PyUnicode_InternFromString("_execution_start");
    if (array_type == NULL || one == NULL || int_zero == NULL || float_zero == NULL || s_add == NULL ||
        s_note_collective == NULL || s_execution_start == NULL)
        return NULL;
    if (PyType_Ready(&CheckedType) < 0) return NULL;
    PyObject *module = PyModule_Create(&stats_native_module);
    if (module != NULL && PyModule_AddObjectRef(module, "Checked", (PyObject *)&CheckedType) < 0) Py_CLEAR(module);
    return module;
}
