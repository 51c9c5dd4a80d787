/* The Kineto reader's per-event loop in C: msgspec-decoded trace events -> hloscope Events, for the two cases that
 * make up almost every trace (GPU activity; PyTorch host events other than step markers). Everything else is handed
 * to the Python builder's own methods, in file order, so the Python loop (`_EventBuilder.structs_to_events` in
 * kineto.py) stays the one definition of what an event means: tests/test_trace_kineto_native.py reads every Kineto
 * fixture both ways and compares every Event.
 *
 * Fields of the msgspec structs and of Event are read and written in place through their member descriptors'
 * offsets (as CPython's own slot descriptors do); `Maker` refuses classes whose slots are not the ones named here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../native_slots.h"

enum { E_NAME, E_START, E_DUR, E_KIND, E_DEVICE, E_LANE, E_PROCESS, E_CATEGORY, E_STEP, E_HLO_OP, E_HLO_MODULE,
       E_CORRELATION, E_SOURCE, N_EVENT };
static const char *event_fields[N_EVENT] = {"name", "start_us", "dur_us", "kind", "device", "lane", "process",
                                            "category", "step", "hlo_op", "hlo_module", "correlation",
                                            "category_source"};
enum { I_PH, I_CAT, I_NAME, I_TS, I_DUR, I_PID, I_TID, I_ARGS, N_ITEM };
static const char *item_fields[N_ITEM] = {"ph", "cat", "name", "ts", "dur", "pid", "tid", "args"};
enum { A_CORRELATION, A_CORRELATION_ID, A_STREAM, A_HLO_OP, A_HLO_MODULE, A_STEP_NUM, A_NAME, N_ARGS };
static const char *args_fields[N_ARGS] = {"correlation", "correlation_id", "stream", "hlo_op", "hlo_module",
                                          "step_num", "name"};

#define FIELD(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* Every object a Maker holds, in the order of Maker's arguments after the three classes. */
enum { SOURCE_NAMES, OTHER, DEVICE_CATS, DEVICE_KIND_CATS, DEVICE_EVENT_KINDS, HOST_CATS, PLACES, CATEGORIES, PROCESS,
       STREAM_LANE, THREAD, METADATA, COMPLETE, SLOW_CORRELATION, CATEGORY_FOR, GIVE_UP, N_HELD };

typedef struct {
    PyObject_HEAD
    PyTypeObject *event_type, *item_type, *args_type;
    Py_ssize_t event_offset[N_EVENT], item_offset[N_ITEM], args_offset[N_ARGS];
    long long flow_base;  /* FLOW_CORRELATION_BASE */
    PyObject *zero;
    PyObject *held[N_HELD];  /* kineto.py's values and tables, and the builder's methods for every case not taken here */
} Maker;

static PyObject *s_x, *s_m, *s_step_prefix;

static int Maker_init(Maker *self, PyObject *args, PyObject *kwds) {
    PyObject *types[3], *held[N_HELD];
    long long flow_base;
    if (!PyArg_ParseTuple(args, "O!O!O!OOLO!O!O!O!O!O!OOOOOOOO:Maker", &PyType_Type, &types[0], &PyType_Type,
                          &types[1], &PyType_Type, &types[2], &held[SOURCE_NAMES], &held[OTHER], &flow_base,
                          &PyDict_Type, &held[DEVICE_CATS], &PyFrozenSet_Type, &held[DEVICE_KIND_CATS], &PyDict_Type,
                          &held[DEVICE_EVENT_KINDS], &PyDict_Type, &held[HOST_CATS], &PyDict_Type, &held[PLACES],
                          &PyDict_Type, &held[CATEGORIES], &held[PROCESS], &held[STREAM_LANE], &held[THREAD],
                          &held[METADATA], &held[COMPLETE], &held[SLOW_CORRELATION], &held[CATEGORY_FOR],
                          &held[GIVE_UP]))
        return -1;
    if (self->zero != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Maker: already initialised");
        return -1;
    }
    PyTypeObject *event = (PyTypeObject *)types[0];
    if (event->tp_base != &PyBaseObject_Type ||
        event->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + N_EVENT * sizeof(PyObject *))) {
        PyErr_SetString(PyExc_TypeError, "Maker: Event's slots are not the ones _kineto_native.c knows");
        return -1;
    }
    if (slot_offsets(event, event_fields, N_EVENT, self->event_offset, "Maker") < 0 ||
        slot_offsets((PyTypeObject *)types[1], item_fields, N_ITEM, self->item_offset, "Maker") < 0 ||
        slot_offsets((PyTypeObject *)types[2], args_fields, N_ARGS, self->args_offset, "Maker") < 0)
        return -1;
    self->zero = PyFloat_FromDouble(0.0);
    if (self->zero == NULL) return -1;
    self->event_type = (PyTypeObject *)Py_NewRef(types[0]);
    self->item_type = (PyTypeObject *)Py_NewRef(types[1]);
    self->args_type = (PyTypeObject *)Py_NewRef(types[2]);
    self->flow_base = flow_base;
    for (int i = 0; i < N_HELD; i++) self->held[i] = Py_NewRef(held[i]);
    return 0;
}

/* A Maker holds the builder's bound methods, and the builder holds its Maker: a cycle for the garbage collector. */
static int Maker_traverse(Maker *self, visitproc visit, void *arg) {
    Py_VISIT(self->event_type);
    Py_VISIT(self->item_type);
    Py_VISIT(self->args_type);
    for (int i = 0; i < N_HELD; i++) Py_VISIT(self->held[i]);
    return 0;
}

static int Maker_clear(Maker *self) {
    Py_CLEAR(self->event_type);
    Py_CLEAR(self->item_type);
    Py_CLEAR(self->args_type);
    for (int i = 0; i < N_HELD; i++) Py_CLEAR(self->held[i]);
    return 0;
}

static void Maker_dealloc(Maker *self) {
    PyObject_GC_UnTrack(self);
    Maker_clear(self);
    Py_CLEAR(self->zero);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Event(name, start, dur, kind, device, lane, process, category, None, None, None, correlation), as its __init__
 * makes it (category_source: its default). */
static PyObject *new_event(Maker *mk, PyObject *name, PyObject *start, PyObject *dur, PyObject *kind, PyObject *device,
                           PyObject *lane, PyObject *process, PyObject *category, PyObject *correlation) {
    PyObject *event = mk->event_type->tp_alloc(mk->event_type, 0);
    if (event == NULL) return NULL;
    PyObject *values[N_EVENT] = {name, start, dur, kind, device, lane, process, category, Py_None, Py_None, Py_None,
                                 correlation, mk->held[SOURCE_NAMES]};
    for (int i = 0; i < N_EVENT; i++) {
        Py_INCREF(values[i]);
        FIELD(event, mk->event_offset[i]) = values[i];
    }
    return event;
}

/* dict[key] or, when missing, dict[key] = make(a, b) (make: a Python callable; b may be NULL). New reference. */
static PyObject *cached(PyObject *dict, PyObject *key, PyObject *make, PyObject *a, PyObject *b) {
    PyObject *value = PyDict_GetItemWithError(dict, key);
    if (value != NULL) {
        Py_INCREF(value);
        return value;
    }
    if (PyErr_Occurred()) return NULL;
    value = b == NULL ? PyObject_CallOneArg(make, a) : PyObject_CallFunctionObjArgs(make, a, b, NULL);
    if (value != NULL && PyDict_SetItem(dict, key, value) < 0) Py_CLEAR(value);
    return value;
}

/* places[(pid, lane_id, device)] = (process name, lane name), made by the builder on first use. New reference. */
static PyObject *place_of(Maker *mk, PyObject *pid, PyObject *tid, PyObject *lane_id, int device) {
    PyObject *key = PyTuple_Pack(3, pid, lane_id, device ? Py_True : Py_False);
    if (key == NULL) return NULL;
    PyObject *place = PyDict_GetItemWithError(mk->held[PLACES], key);
    if (place != NULL) {
        if (!PyTuple_CheckExact(place) || PyTuple_GET_SIZE(place) != 2) { /* only the builders write this table */
            PyErr_SetString(PyExc_TypeError, "_kineto_native: a place is not a (process, lane) pair");
            place = NULL;
        } else {
            Py_INCREF(place);
        }
    } else if (!PyErr_Occurred()) {
        PyObject *process = PyObject_CallOneArg(mk->held[PROCESS], pid);
        PyObject *lane = process == NULL ? NULL
                         : device        ? PyObject_CallOneArg(mk->held[STREAM_LANE], lane_id)
                                         : PyObject_CallFunctionObjArgs(mk->held[THREAD], pid, tid, NULL);
        if (lane != NULL) place = PyTuple_Pack(2, process, lane);
        Py_XDECREF(process);
        Py_XDECREF(lane);
        if (place != NULL && PyDict_SetItem(mk->held[PLACES], key, place) < 0) Py_CLEAR(place);
    }
    Py_DECREF(key);
    return place;
}

/* The event's correlation id (`correlation`, else `correlation_id`) as the Python loop keeps it: none, or an int in
 * [0, FLOW_CORRELATION_BASE), as it is; anything else through the builder's renumbering (slow_correlation), which
 * gives the same for those two cases. New reference. */
static PyObject *correlation_of(Maker *mk, PyObject *correlation, PyObject *correlation_id) {
    PyObject *id = correlation != Py_None ? correlation : correlation_id;
    if (id == Py_None) /* no id (most host events): the renumbering of None is None */
        Py_RETURN_NONE;
    if (PyLong_CheckExact(id)) {
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(id, &overflow);
        if (value == -1 && PyErr_Occurred()) return NULL;
        if (!overflow && value >= 0 && value < mk->flow_base) /* kept as it is, by either name */
            return Py_NewRef(id);
    }
    return PyObject_CallFunctionObjArgs(mk->held[SLOW_CORRELATION], correlation, correlation_id, NULL);
}

static int is_string(PyObject *value, PyObject *text) {
    return value == text || (PyUnicode_CheckExact(value) && PyUnicode_Compare(value, text) == 0);
}

/* One complete event of a GPU activity or PyTorch host category (args present): the Event, or NULL with no error set
 * when the item is none of those (the caller hands it to the builder's _complete). */
static PyObject *common_event(Maker *mk, PyObject *item, PyObject *args, PyObject *name, PyObject *start,
                              PyObject *dur, PyObject *correlation) {
    PyObject *category = FIELD(item, mk->item_offset[I_CAT]);
    PyObject *pid = FIELD(item, mk->item_offset[I_PID]);
    PyObject *tid = FIELD(item, mk->item_offset[I_TID]);
    PyObject *kind = PyDict_GetItemWithError(mk->held[DEVICE_CATS], category);
    if (kind != NULL) { /* Kineto GPU activity */
        int special = PySet_Contains(mk->held[DEVICE_KIND_CATS], category);
        if (special < 0) return NULL;
        if (special) {
            PyObject *key = PyTuple_Pack(2, category, name);
            if (key == NULL) return NULL;
            PyObject *own = PyDict_GetItemWithError(mk->held[DEVICE_EVENT_KINDS], key);
            Py_DECREF(key);
            if (own == NULL && PyErr_Occurred()) return NULL;
            if (own != NULL) kind = own;
        }
        PyObject *stream = FIELD(args, mk->args_offset[A_STREAM]);
        PyObject *place = place_of(mk, pid, tid, stream != Py_None ? stream : tid, 1);
        if (place == NULL) return NULL;
        PyObject *key = PyTuple_Pack(2, name, kind);
        PyObject *named = key == NULL ? NULL : cached(mk->held[CATEGORIES], key, mk->held[CATEGORY_FOR], name, kind);
        Py_XDECREF(key);
        PyObject *event = named == NULL ? NULL
                                        : new_event(mk, name, start, dur, kind, Py_True, PyTuple_GET_ITEM(place, 1),
                                                    PyTuple_GET_ITEM(place, 0), named, correlation);
        Py_XDECREF(named);
        Py_DECREF(place);
        return event;
    }
    if (PyErr_Occurred()) return NULL;
    kind = PyDict_GetItemWithError(mk->held[HOST_CATS], category);
    if (kind == NULL) return NULL;
    int step = PyUnicode_Tailmatch(name, s_step_prefix, 0, PY_SSIZE_T_MAX, -1);
    if (step != 0) return NULL; /* a step marker (1), or an error (-1) */
    PyObject *place = place_of(mk, pid, tid, tid, 0);
    if (place == NULL) return NULL;
    PyObject *event = new_event(mk, name, start, dur, kind, Py_False, PyTuple_GET_ITEM(place, 1),
                                PyTuple_GET_ITEM(place, 0), mk->held[OTHER], correlation);
    Py_DECREF(place);
    return event;
}

/* The Event of one decoded item, NULL with no error for an item that makes none ("M" and other phases). */
static PyObject *item_event(Maker *mk, PyObject *item) {
    if (!Py_IS_TYPE(item, mk->item_type)) {
        PyErr_SetString(PyExc_TypeError, "_kineto_native: not a decoded trace event");
        return NULL;
    }
    for (int i = 0; i < N_ITEM; i++) {
        if (FIELD(item, mk->item_offset[i]) == NULL) { /* msgspec sets every field; never read an empty slot */
            PyErr_Format(PyExc_AttributeError, "_kineto_native: event field '%s' is not set", item_fields[i]);
            return NULL;
        }
    }
    PyObject *args = FIELD(item, mk->item_offset[I_ARGS]);
    if (args != Py_None && !Py_IS_TYPE(args, mk->args_type)) {
        PyErr_SetString(PyExc_TypeError, "_kineto_native: not decoded trace event args");
        return NULL;
    }
    for (int i = 0; args != Py_None && i < N_ARGS; i++) {
        if (FIELD(args, mk->args_offset[i]) == NULL) {
            PyErr_Format(PyExc_AttributeError, "_kineto_native: args field '%s' is not set", args_fields[i]);
            return NULL;
        }
    }
    PyObject *phase = FIELD(item, mk->item_offset[I_PH]);
    PyObject *pid = FIELD(item, mk->item_offset[I_PID]);
    PyObject *tid = FIELD(item, mk->item_offset[I_TID]);
    if (!is_string(phase, s_x)) {
        if (is_string(phase, s_m)) {
            PyObject *value = args != Py_None ? FIELD(args, mk->args_offset[A_NAME]) : Py_None;
            PyObject *done = PyObject_CallFunctionObjArgs(mk->held[METADATA], FIELD(item, mk->item_offset[I_NAME]), pid,
                                                          tid, value, NULL);
            if (done == NULL) return NULL;
            Py_DECREF(done);
        }
        return NULL;
    }
    PyObject *start = FIELD(item, mk->item_offset[I_TS]);
    if (start == Py_None) { /* let the streaming parser report it with its position */
        PyErr_SetString(mk->held[GIVE_UP], "complete event without ts");
        return NULL;
    }
    PyObject *dur = FIELD(item, mk->item_offset[I_DUR]);
    if (dur == Py_None) dur = mk->zero;
    PyObject *name = FIELD(item, mk->item_offset[I_NAME]);
    name = PyUnicode_CheckExact(name) ? Py_NewRef(name) : PyObject_Str(name);
    if (name == NULL) return NULL;
    PyObject *category = FIELD(item, mk->item_offset[I_CAT]);
    PyObject *event = NULL;
    if (args == Py_None) {
        event = PyObject_CallFunctionObjArgs(mk->held[COMPLETE], name, category, start, dur, pid, tid, NULL);
        Py_DECREF(name);
        return event;
    }
    PyObject *correlation = correlation_of(mk, FIELD(args, mk->args_offset[A_CORRELATION]),
                                           FIELD(args, mk->args_offset[A_CORRELATION_ID]));
    if (correlation != NULL) {
        event = common_event(mk, item, args, name, start, dur, correlation);
        if (event == NULL && !PyErr_Occurred()) {
            PyObject *argv[] = {name, category, start, dur, pid, tid, FIELD(args, mk->args_offset[A_STREAM]),
                                correlation, FIELD(args, mk->args_offset[A_HLO_OP]),
                                FIELD(args, mk->args_offset[A_HLO_MODULE]), FIELD(args, mk->args_offset[A_STEP_NUM])};
            event = PyObject_Vectorcall(mk->held[COMPLETE], argv, sizeof(argv) / sizeof(argv[0]), NULL);
        }
        Py_DECREF(correlation);
    }
    Py_DECREF(name);
    return event;
}

/* ------------------------------------------------------------------------------------------ the iterator */

typedef struct {
    PyObject_HEAD
    Maker *maker;
    PyObject *chunk;
    Py_ssize_t index;
} Events;

static PyTypeObject EventsType;

static PyObject *Maker_events(Maker *self, PyObject *chunk) {
    if (!PyList_CheckExact(chunk)) {
        PyErr_SetString(PyExc_TypeError, "events: expected the list of one decoded chunk");
        return NULL;
    }
    Events *events = PyObject_GC_New(Events, &EventsType);
    if (events == NULL) return NULL;
    events->maker = (Maker *)Py_NewRef(self);
    events->chunk = Py_NewRef(chunk);
    events->index = 0;
    PyObject_GC_Track(events);
    return (PyObject *)events;
}

static PyObject *Events_next(Events *self) {
    while (self->chunk != NULL && self->index < PyList_GET_SIZE(self->chunk)) {
        PyObject *item = Py_NewRef(PyList_GET_ITEM(self->chunk, self->index));
        self->index++;
        PyObject *event = item_event(self->maker, item);
        Py_DECREF(item);
        if (event != NULL) return event;
        if (PyErr_Occurred()) break;  /* finished after an error, as the Python generator is */
    }
    Py_CLEAR(self->chunk);
    return NULL;
}

/* GC-tracked: a cycle through the iterator (its Maker holds the builder's methods) is collected. */
static int Events_traverse(Events *self, visitproc visit, void *arg) {
    Py_VISIT(self->maker);
    Py_VISIT(self->chunk);
    return 0;
}

static int Events_clear(Events *self) {
    Py_CLEAR(self->maker);
    Py_CLEAR(self->chunk);
    return 0;
}

static void Events_dealloc(Events *self) {
    PyObject_GC_UnTrack(self);
    Events_clear(self);
    PyObject_GC_Del(self);
}

static PyTypeObject EventsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hloscope.trace._kineto_native.Events",
    .tp_basicsize = sizeof(Events),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The Events of one decoded chunk, in file order.",
    .tp_traverse = (traverseproc)Events_traverse,
    .tp_clear = (inquiry)Events_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Events_next,
    .tp_dealloc = (destructor)Events_dealloc,
};

static PyMethodDef Maker_methods[] = {
    {"events", (PyCFunction)Maker_events, METH_O, "events(chunk) -> iterator of the chunk's Events"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MakerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hloscope.trace._kineto_native.Maker",
    .tp_basicsize = sizeof(Maker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Maker_traverse,
    .tp_clear = (inquiry)Maker_clear,
    .tp_doc = "Maker(Event, TraceEvent, Args, SOURCE_NAMES, OTHER, FLOW_CORRELATION_BASE, device_cats, "
              "device_kind_cats, device_event_kinds, host_cats, places, categories, process, stream_lane, thread, "
              "metadata, complete, slow_correlation, category_for, GiveUp): one pass's event builder",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Maker_init,
    .tp_dealloc = (destructor)Maker_dealloc,
    .tp_methods = Maker_methods,
};

static struct PyModuleDef kineto_native_module = {PyModuleDef_HEAD_INIT, "_kineto_native", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__kineto_native(void) {
    s_x = PyUnicode_InternFromString("X");
    s_m = PyUnicode_InternFromString("M");
    s_step_prefix = PyUnicode_InternFromString("ProfilerStep#");
    if (!s_x || !s_m || !s_step_prefix || PyType_Ready(&MakerType) < 0 || PyType_Ready(&EventsType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&kineto_native_module);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "Maker", (PyObject *)&MakerType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
