/* The HLO parser's two hot loops in C: reading the common instruction line, and resolving the operands of an
 * instruction whose line ends at its operand list. hloscope/hlo/native.py documents the contract of each; the Python
 * parser (parser.py, model.py) stays the reference for every line and instruction these functions hand back.
 *
 * Both functions only ever *take* the common case and hand anything else back untouched, so a line or instruction is
 * either processed exactly as the Python code would process it, or not at all.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../native_slots.h"

static PyObject *s_root, *s_parameter, *s_constant, *s_empty_tuple;

/* The slots of HloInstruction and of cost.Cost, read and written in place (the way CPython's own slot descriptors
 * do), so that making and checking an instruction or a cost takes no Python call. `bind` finds their offsets from
 * the classes' member descriptors and refuses classes whose slots are not exactly these, so a changed class fails
 * loudly (native.py then raises at import), never silently. */
enum { ATTRS, CALLS, END, OPERANDS, COMPUTATION, LINENO, NAME, OPCODE, POS, SHAPE_TEXT, TEXT, N_SLOTS };
static const char *slot_names[N_SLOTS] = {"_attrs", "_calls", "_end", "_operands", "computation", "lineno",
                                          "name", "opcode", "pos", "shape_text", "text"};
enum { FLOPS, TRANSCENDENTALS, BYTES_ACCESSED, LIBRARY_FLOPS, LIBRARY_BYTES, N_COST_SLOTS };
static const char *cost_slot_names[N_COST_SLOTS] = {"flops", "transcendentals", "bytes_accessed", "library_flops",
                                                    "library_bytes"};
static PyTypeObject *instruction_type = NULL, *cost_type = NULL;
static Py_ssize_t slot_offset[N_SLOTS], cost_slot_offset[N_COST_SLOTS];

#define SLOT(obj, i) (*(PyObject **)((char *)(obj) + slot_offset[i]))
#define COST_SLOT(obj, i) (*(PyObject **)((char *)(obj) + cost_slot_offset[i]))

/* Exactly `names` (its __slots__, on object): a class with more fields could be made with some left unset. */
static int bind_slots(PyObject *cls, const char **names, int count, Py_ssize_t *offsets) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "bind: expected a class");
        return -1;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL) return -1;
    Py_ssize_t declared = PySequence_Size(slots);
    Py_DECREF(slots);
    if (declared != count || type->tp_base != &PyBaseObject_Type ||
        type->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + count * sizeof(PyObject *))) {
        PyErr_Format(PyExc_TypeError, "bind: the slots of %s are not the ones _native.c knows", type->tp_name);
        return -1;
    }
    return slot_offsets(type, names, count, offsets, "bind");
}

static PyObject *bind(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "bind(HloInstruction, Cost)");
        return NULL;
    }
    /* both classes checked before anything is kept: a refused bind() leaves the last good one in place */
    Py_ssize_t offsets[N_SLOTS], cost_offsets[N_COST_SLOTS];
    if (bind_slots(args[0], slot_names, N_SLOTS, offsets) < 0 ||
        bind_slots(args[1], cost_slot_names, N_COST_SLOTS, cost_offsets) < 0)
        return NULL;
    memcpy(slot_offset, offsets, sizeof offsets);
    memcpy(cost_slot_offset, cost_offsets, sizeof cost_offsets);
    Py_INCREF(args[0]);
    Py_XSETREF(instruction_type, (PyTypeObject *)args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(cost_type, (PyTypeObject *)args[1]);
    Py_RETURN_NONE;
}

/* The checks every entry point makes first: its number of arguments, and bind() called (0, or -1 and an error). */
static int ready(const char *function, Py_ssize_t nargs, Py_ssize_t expected) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", function, expected);
        return -1;
    }
    if (instruction_type == NULL || cost_type == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s: bind() the HloInstruction and Cost classes first", function);
        return -1;
    }
    return 0;
}

/* HloInstruction(name, shape_text, opcode, text, pos, lineno, computation, end), as its __init__ makes it. */
static PyObject *new_instruction(PyObject *name, PyObject *shape, PyObject *opcode, PyObject *text, PyObject *pos,
                                 PyObject *lineno, PyObject *computation, PyObject *end) {
    PyObject *obj = instruction_type->tp_alloc(instruction_type, 0);
    if (obj == NULL) return NULL;
    PyObject *values[N_SLOTS];
    values[ATTRS] = Py_None;
    values[CALLS] = Py_None;
    values[END] = end;
    values[OPERANDS] = Py_None;
    values[COMPUTATION] = computation;
    values[LINENO] = lineno;
    values[NAME] = name;
    values[OPCODE] = opcode;
    values[POS] = pos;
    values[SHAPE_TEXT] = shape;
    values[TEXT] = text;
    for (int i = 0; i < N_SLOTS; i++) {
        Py_INCREF(values[i]);
        SLOT(obj, i) = values[i];
    }
    return obj;
}

static int is_name_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.' || c == '$';
}

static int is_name_char(unsigned char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

static int is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }

static int is_lower_digit(unsigned char c) { return is_lower(c) || (c >= '0' && c <= '9'); }

/* What parser._INSTRUCTION captures, on an ASCII line:
 *   [ \t]*(ROOT )?%?(NAME) = ([a-z][a-z0-9]*\[[^ ]*) ([a-z][a-z0-9\-]*)\(
 * Offsets of name, shape and opcode, and the index just after '('. Returns 0 where the regex would not match with
 * these groups (the caller then hands the line back; the Python parser decides). */
typedef struct {
    int root;
    Py_ssize_t name, name_end, shape, shape_end, opcode, opcode_end, pos;
} Head;

static int match_head(const unsigned char *s, Py_ssize_t n, Head *h) {
    Py_ssize_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    h->root = 0;
    if (n - i >= 5 && memcmp(s + i, "ROOT ", 5) == 0) {
        h->root = 1;
        i += 5;
    }
    if (i < n && s[i] == '%') i++;
    h->name = i;
    if (i >= n || !is_name_start(s[i])) return 0;
    i++;
    while (i < n && is_name_char(s[i])) i++;
    h->name_end = i;
    if (n - i < 3 || memcmp(s + i, " = ", 3) != 0) return 0;
    i += 3;
    h->shape = i;
    if (i >= n || !is_lower(s[i])) return 0;
    i++;
    while (i < n && is_lower_digit(s[i])) i++;
    if (i >= n || s[i] != '[') return 0;
    while (i < n && s[i] != ' ') i++;
    h->shape_end = i;
    if (i >= n) return 0;
    i++; /* the space */
    h->opcode = i;
    if (i >= n || !is_lower(s[i])) return 0;
    i++;
    while (i < n && (is_lower_digit(s[i]) || s[i] == '-')) i++;
    h->opcode_end = i;
    if (i >= n || s[i] != '(') return 0;
    h->pos = i + 1;
    return 1;
}

static Py_ssize_t find_char(const unsigned char *s, Py_ssize_t from, Py_ssize_t to, unsigned char c) {
    const unsigned char *hit = from < to ? memchr(s + from, c, (size_t)(to - from)) : NULL;
    return hit ? hit - s : -1;
}

/* One string object per distinct text (parser.py's `shared`): modules repeat shapes and opcodes thousands of times. */
static PyObject *shared_string(PyObject *shared, const unsigned char *s, Py_ssize_t n) {
    PyObject *fresh = PyUnicode_FromStringAndSize((const char *)s, n);
    if (fresh == NULL) return NULL;
    PyObject *kept = PyDict_SetDefault(shared, fresh, fresh);
    Py_XINCREF(kept);
    Py_DECREF(fresh);
    return kept;
}

/* The parameter number as parser._special reads it, when it is plain digits; -1 otherwise (handed back). */
static long long parameter_number(const unsigned char *s, Py_ssize_t from, Py_ssize_t to) {
    if (to <= from || to - from > 18) return -1;
    long long number = 0;
    for (Py_ssize_t i = from; i < to; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        number = number * 10 + (s[i] - '0');
    }
    return number;
}

/* Takes one line: 1 taken (an instruction appended), 0 handed back, -1 error. */
static int take_line(PyObject *line, long lineno, PyObject *comp, PyObject *instructions, PyObject *shared,
                     PyObject *plain, PyObject *parameters) {
    if (!PyUnicode_Check(line) || !PyUnicode_IS_ASCII(line)) return 0;
    const unsigned char *s = PyUnicode_1BYTE_DATA(line);
    Py_ssize_t n = PyUnicode_GET_LENGTH(line);
    Head h;
    if (!match_head(s, n, &h)) return 0;
    /* A line that may continue on the next one (parser._CONTINUES) is the Python parser's. */
    if (n >= 2 && s[n - 1] == '\n' && (s[n - 2] == '{' || s[n - 2] == ',' || s[n - 2] == '(' || s[n - 2] == '='))
        return 0;
    /* A line opening a comment is the Python parser's: the comment may run over the lines after it. */
    for (Py_ssize_t i = 0; i + 1 < n; i++)
        if (s[i] == '/' && s[i + 1] == '*') return 0;
    Py_ssize_t close = find_char(s, h.pos, n, ')');
    if (close < 0 || find_char(s, h.pos, close, '(') >= 0) return 0; /* unclosed, or a nested operand */
    if (h.root) {
        PyObject *root = PyObject_GetAttr(comp, s_root);
        if (root == NULL) return -1;
        int has_root = root != Py_None;
        Py_DECREF(root);
        if (has_root) return 0; /* a second ROOT: the Python parser reports it */
    }
    int result = -1;
    PyObject *number = NULL, *name = NULL, *shape = NULL, *opcode = NULL, *pos = NULL, *lno = NULL, *end = NULL,
             *instr = NULL;
    opcode = shared_string(shared, s + h.opcode, h.opcode_end - h.opcode);
    if (opcode == NULL) goto done;
    int is_parameter = PyUnicode_Compare(opcode, s_parameter) == 0;
    if (is_parameter) {
        long long value = parameter_number(s, h.pos, close);
        if (value < 0) {
            result = 0;
            goto done;
        }
        number = PyLong_FromLongLong(value);
        if (number == NULL) goto done;
        int known = PyDict_Contains(parameters, number);
        if (known != 0) { /* a duplicate number: the Python parser reports it */
            result = known < 0 ? -1 : 0;
            goto done;
        }
    } else {
        int is_plain = PySet_Contains(plain, opcode);
        if (is_plain <= 0) {
            result = is_plain < 0 ? -1 : 0;
            goto done;
        }
    }
    name = PyUnicode_FromStringAndSize((const char *)s + h.name, h.name_end - h.name);
    shape = name ? shared_string(shared, s + h.shape, h.shape_end - h.shape) : NULL;
    pos = shape ? PyLong_FromSsize_t(h.pos) : NULL;
    lno = pos ? PyLong_FromLong(lineno) : NULL;
    end = lno ? PyLong_FromSsize_t(close) : NULL;
    if (end == NULL) goto done;
    instr = new_instruction(name, shape, opcode, line, pos, lno, comp, end);
    if (instr == NULL || PyList_Append(instructions, instr) < 0) goto done;
    if (h.root && PyObject_SetAttr(comp, s_root, instr) < 0) goto done;
    if (number != NULL && PyDict_SetItem(parameters, number, instr) < 0) goto done;
    result = 1;
done:
    Py_XDECREF(number);
    Py_XDECREF(name);
    Py_XDECREF(shape);
    Py_XDECREF(opcode);
    Py_XDECREF(pos);
    Py_XDECREF(lno);
    Py_XDECREF(end);
    Py_XDECREF(instr);
    return result;
}

static PyObject *scan_instructions(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("scan_instructions", nargs, 7) < 0) return NULL;
    PyObject *lines = args[0], *comp = args[2], *instructions = args[3], *shared = args[4], *plain = args[5],
             *parameters = args[6];
    long lineno = PyLong_AsLong(args[1]);
    if (lineno == -1 && PyErr_Occurred()) return NULL;
    if (!PyIter_Check(lines) || !PyList_Check(instructions) || !PyDict_Check(shared) || !PyAnySet_Check(plain) ||
        !PyDict_Check(parameters) || lineno < 0 || lineno > INT_MAX) {
        PyErr_SetString(PyExc_TypeError, "scan_instructions: wrong argument types");
        return NULL;
    }
    for (;;) {
        PyObject *line = PyIter_Next(lines);
        if (line == NULL) {
            if (PyErr_Occurred()) return NULL;
            return Py_BuildValue("(Ol)", Py_None, lineno);
        }
        lineno++; /* from at most INT_MAX, one per line: no overflow of a long */
        int taken = take_line(line, lineno, comp, instructions, shared, plain, parameters);
        if (taken == 1) {
            Py_DECREF(line);
            continue;
        }
        if (taken < 0) {
            Py_DECREF(line);
            return NULL;
        }
        PyObject *result = Py_BuildValue("(Nl)", line, lineno);
        return result;
    }
}

/* ---- validation: operands of instructions whose line ends at the ')' of their operand list ------------------ */

/* The operand list `a, b` (or `%a, %b`: validate drops the '%' of the first name and of each ", %") as a tuple of
 * the instructions of by_name, when each name is known and its shape parsed; NULL with no error otherwise (handed
 * back: the Python loop looks up the same names and reports what is wrong). Names are split at each ", " exactly as
 * str.split(", ") splits them. */
static PyObject *resolve_operands(const unsigned char *s, Py_ssize_t n, PyObject *by_name, PyObject *parsed) {
    int percent = s[0] == '%';
    Py_ssize_t count = 1;
    for (Py_ssize_t i = 0; i + 1 < n; i++)
        if (s[i] == ',' && s[i + 1] == ' ') count++;
    PyObject *operands = PyTuple_New(count);
    if (operands == NULL) return NULL;
    Py_ssize_t start = 0, k = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (i < n && !(s[i] == ',' && i + 1 < n && s[i + 1] == ' ')) continue;
        Py_ssize_t from = start;
        if (percent) { /* "%a, %b": each piece must start with the '%' validate removes; any other '%' fails */
            if (from >= i || s[from] != '%') goto fail;
            from++;
        }
        if (from == i || memchr(s + from, '%', (size_t)(i - from)) != NULL) goto fail;
        PyObject *key = PyUnicode_FromStringAndSize((const char *)s + from, i - from);
        if (key == NULL) goto fail;
        PyObject *operand = PyDict_GetItemWithError(by_name, key);
        Py_DECREF(key);
        if (operand == NULL || Py_TYPE(operand) != instruction_type || SLOT(operand, SHAPE_TEXT) == NULL ||
            !PyUnicode_CheckExact(SLOT(operand, SHAPE_TEXT)))
            goto fail;
        int known = PySet_Contains(parsed, SLOT(operand, SHAPE_TEXT));
        if (known <= 0) goto fail;
        Py_INCREF(operand);
        PyTuple_SET_ITEM(operands, k++, operand);
        start = i + 2;
        i++;
    }
    return operands;
fail:
    Py_DECREF(operands);
    return NULL;
}

/* ---- attribute lists, as the regular expressions of attrs.py and model.py accept them ------------------------
 * Python's `\s` on ASCII text, and the tail matchers of HloModule.validate (model._PLAIN_TAIL and
 * model._PLAIN_LITERAL_TAIL, built from attrs.attribute_pattern): every quantifier there is possessive or cannot
 * backtrack, so a left-to-right scan accepts exactly what they accept. Anything deeper than they look (brackets
 * nested more than five deep) is handed back, as their match fails there too. */
static int is_space(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static Py_ssize_t skip_spaces(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && is_space(s[i])) i++;
    return i;
}

static int is_opener(unsigned char c) { return c == '{' || c == '(' || c == '['; }

static int is_closer(unsigned char c) { return c == '}' || c == ')' || c == ']'; }

/* `"(?:[^"\\]|\\.)*+"` from the opening quote at i: the index after the closing one, or -1. */
static Py_ssize_t skip_string(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    for (i++; i < n; i++) {
        if (s[i] == '\\') {
            if (++i >= n) return -1;
        } else if (s[i] == '"') {
            return i + 1;
        }
    }
    return -1;
}

/* attrs._nested(depth) from i, inside an opened bracket: the index of the bracket that closes it, or -1. */
static Py_ssize_t skip_nested(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, int depth) {
    while (i < n) {
        unsigned char c = s[i];
        if (c == '"') {
            i = skip_string(s, i, n);
            if (i < 0) return -1;
        } else if (is_opener(c)) {
            if (depth == 0) return -1;
            i = skip_nested(s, i + 1, n, depth - 1);
            if (i < 0) return -1;
            i++;
        } else if (is_closer(c)) {
            return i;
        } else {
            i++;
        }
    }
    return -1;
}

/* attrs._TOP_VALUE from i: where it stops (a top-level ',', a closer, or what it cannot read). */
static Py_ssize_t skip_value(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n) {
        unsigned char c = s[i];
        if (c == '"') {
            Py_ssize_t j = skip_string(s, i, n);
            if (j < 0) return i;
            i = j;
        } else if (is_opener(c)) {
            Py_ssize_t j = skip_nested(s, i + 1, n, 4);
            if (j < 0) return i;
            i = j + 1;
        } else if (is_closer(c) || c == ',') {
            return i;
        } else {
            i++;
        }
    }
    return i;
}

static int is_key_start(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

static int is_key_char(unsigned char c) { return is_key_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; }

/* model.CALLED_COMPUTATION_ATTRS, and the other key that names instructions (model._REFERENCES) */
static const char *called_keys[] = {"calls", "to_apply", "body", "condition", "true_computation",
                                    "false_computation", "select", "scatter", "branch_computations",
                                    "called_computations", "async_computation", NULL};

static int is_called_key(const unsigned char *s, Py_ssize_t len) {
    for (int k = 0; called_keys[k] != NULL; k++)
        if ((Py_ssize_t)strlen(called_keys[k]) == len && memcmp(s, called_keys[k], (size_t)len) == 0) return 1;
    return 0;
}

static int is_reference_key(const unsigned char *s, Py_ssize_t len) {
    return is_called_key(s, len) || (len == 20 && memcmp(s, "control-predecessors", 20) == 0);
}

/* `\s*,\s*KEY\s*=\s*` from i: the index after it (key at *key, *key_len), or -1. */
static Py_ssize_t attribute_head(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, Py_ssize_t *key,
                                 Py_ssize_t *key_len) {
    i = skip_spaces(s, i, n);
    if (i >= n || s[i] != ',') return -1;
    i = skip_spaces(s, i + 1, n);
    if (i >= n || !is_key_start(s[i])) return -1;
    *key = i;
    while (i < n && is_key_char(s[i])) i++;
    *key_len = i - *key;
    i = skip_spaces(s, i, n);
    if (i >= n || s[i] != '=') return -1;
    return skip_spaces(s, i + 1, n);
}

/* attrs.attribute_pattern(model._REFERENCES) repeated (`*+`): the index after the last one it reads. */
static Py_ssize_t other_attributes(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    for (;;) {
        Py_ssize_t key, key_len;
        Py_ssize_t j = attribute_head(s, i, n, &key, &key_len);
        if (j < 0 || is_reference_key(s + key, key_len) || j >= n || is_space(s[j]) || s[j] == ',') return i;
        i = skip_value(s, j, n);
    }
}

/* A comment to the end of the text (spaces, then two slashes, then anything) at i */
static int comment_to_end(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    i = skip_spaces(s, i, n);
    return i + 1 < n && s[i] == '/' && s[i + 1] == '/';
}

/* The attribute list after the operands' ')' at `close`, as model._PLAIN_TAIL reads it: 1 when it matches, with the
 * one called computation's name at *call (length *call_len, 0 when none). */
static int plain_tail(const unsigned char *s, Py_ssize_t close, Py_ssize_t n, int allow_call, Py_ssize_t *call,
                      Py_ssize_t *call_len) {
    Py_ssize_t i = close + 1;
    *call_len = 0;
    if (comment_to_end(s, i, n)) return 1;
    i = other_attributes(s, i, n);
    if (allow_call) { /* _ONE_CALL: `, calls=%name` (a bare name up to a ',' or the end), then other attributes */
        Py_ssize_t key, key_len;
        Py_ssize_t j = attribute_head(s, i, n, &key, &key_len);
        if (j >= 0 && is_called_key(s + key, key_len)) {
            if (j < n && s[j] == '%') j++;
            Py_ssize_t name = j;
            if (j < n && is_name_start(s[j])) {
                for (j++; j < n && is_name_char(s[j]); j++) {
                }
                Py_ssize_t after = skip_spaces(s, j, n);
                if (after == n || s[after] == ',') {
                    *call = name;
                    *call_len = j - name;
                    i = other_attributes(s, j, n);
                }
            }
        }
    }
    if (skip_spaces(s, i, n) == n) return 1;
    *call_len = 0;
    return 0;
}

/* The first of `stops` from i, or -1. */
static Py_ssize_t find_any(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, const char *stops) {
    for (; i < n; i++)
        if (strchr(stops, s[i]) != NULL && s[i] != '\0') return i;
    return -1;
}

/* What HloModule.validate's loop does for one instruction that needs no exact scan: 1 taken, 0 handed back,
 * -1 error. */
static int take_instruction(PyObject *instr, PyObject *by_name, PyObject *parsed, PyObject *computations,
                            PyObject *no_calls) {
    if (Py_TYPE(instr) != instruction_type) return 0;
    PyObject *shape = SLOT(instr, SHAPE_TEXT), *text = SLOT(instr, TEXT), *end_obj = SLOT(instr, END),
             *pos_obj = SLOT(instr, POS), *opcode = SLOT(instr, OPCODE);
    /* Exact str and int only (what the parser makes): then no look-up below can run Python code (a subclass's
     * __hash__ or __eq__) while these borrowed references are held, and every comparison means what it does in the
     * Python loop. Anything else is handed back. */
    if (!shape || !text || !end_obj || !pos_obj || !opcode || SLOT(instr, OPERANDS) != Py_None ||
        SLOT(instr, ATTRS) != Py_None || !PyUnicode_CheckExact(shape) || !PyUnicode_CheckExact(text) ||
        !PyUnicode_CheckExact(opcode) || !PyUnicode_IS_ASCII(text) || !PyLong_CheckExact(end_obj) ||
        !PyLong_CheckExact(pos_obj))
        return 0;
    int known = PySet_Contains(parsed, shape);
    if (known <= 0) return known;
    Py_ssize_t end = PyLong_AsSsize_t(end_obj), pos = PyLong_AsSsize_t(pos_obj);
    if ((end == -1 || pos == -1) && PyErr_Occurred()) return -1;
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (pos < 0 || pos > n) return 0;
    /* model.HloModule.validate's `bare`: the line ends at the ')' the parser found */
    int bare = end >= pos && ((end == n - 2 && s[n - 1] == '\n') || end == n - 1);
    int literal = PyUnicode_Compare(opcode, s_constant) == 0 || PyUnicode_Compare(opcode, s_parameter) == 0;
    Py_ssize_t names_end = end, call = 0, call_len = 0;
    if (!bare) {
        /* _PLAIN_LITERAL_TAIL: `[^()"]*\)` then attributes naming nothing; _PLAIN_TAIL: `([^()"{}\[\]]*)\)` then
         * attributes naming at most one computation */
        names_end = find_any(s, pos, n, literal ? "()\"" : "()\"{}[]");
        if (names_end < 0 || s[names_end] != ')' || !plain_tail(s, names_end, n, !literal, &call, &call_len)) return 0;
    }
    PyObject *operands = NULL, *calls = NULL;
    if (literal || pos == names_end) {
        Py_INCREF(s_empty_tuple);
        operands = s_empty_tuple;
    } else {
        operands = resolve_operands(s + pos, names_end - pos, by_name, parsed);
        if (operands == NULL) return PyErr_Occurred() ? -1 : 0;
    }
    if (call_len > 0) {
        PyObject *name = PyUnicode_FromStringAndSize((const char *)s + call, call_len);
        PyObject *callee = name ? PyDict_GetItemWithError(computations, name) : NULL;
        Py_XDECREF(name);
        if (callee == NULL) { /* an undefined computation: the Python loop reports it */
            Py_DECREF(operands);
            return PyErr_Occurred() ? -1 : 0;
        }
        calls = PyTuple_Pack(1, callee);
        if (calls == NULL) {
            Py_DECREF(operands);
            return -1;
        }
    } else {
        Py_INCREF(no_calls);
        calls = no_calls;
    }
    Py_XSETREF(SLOT(instr, OPERANDS), operands);
    Py_XSETREF(SLOT(instr, CALLS), calls);
    return 1;
}

static PyObject *resolve_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("resolve_plain", nargs, 6) < 0) return NULL;
    PyObject *instructions = args[0], *by_name = args[2], *parsed = args[3], *computations = args[4],
             *no_calls = args[5];
    Py_ssize_t index = PyLong_AsSsize_t(args[1]);
    if (index == -1 && PyErr_Occurred()) return NULL;
    if (index < 0) {
        PyErr_SetString(PyExc_ValueError, "index must not be negative");
        return NULL;
    }
    if (!PyList_Check(instructions) || !PyDict_Check(by_name) || !PyAnySet_Check(parsed) ||
        !PyDict_Check(computations)) {
        PyErr_SetString(PyExc_TypeError, "resolve_plain: wrong argument types");
        return NULL;
    }
    for (; index < PyList_GET_SIZE(instructions); index++) {
        PyObject *instr = PyList_GET_ITEM(instructions, index);
        Py_INCREF(instr);
        int taken = take_instruction(instr, by_name, parsed, computations, no_calls);
        Py_DECREF(instr);
        if (taken < 0) return NULL;
        if (taken == 0) break;
    }
    return PyLong_FromSsize_t(index);
}

/* ---- the cost walk: CostAnalysis.computation_cost's loop for costs already known, instructions that cost nothing,
 * elementwise instructions (half of a module) and those that cost their default bytes only, with the figures and the
 * order of the sums of the Python loop */

static PyObject *s_zero_float;

/* Cost(flops, transcendentals, bytes_accessed), library figures 0.0, as the dataclass's __init__ makes it. */
static PyObject *new_cost(PyObject *flops, PyObject *transcendentals, PyObject *bytes_accessed) {
    PyObject *obj = cost_type->tp_alloc(cost_type, 0);
    if (obj == NULL) return NULL;
    PyObject *values[N_COST_SLOTS] = {flops, transcendentals, bytes_accessed, s_zero_float, s_zero_float};
    for (int i = 0; i < N_COST_SLOTS; i++) {
        Py_INCREF(values[i]);
        COST_SLOT(obj, i) = values[i];
    }
    return obj;
}

/* The (output bytes, shape size, elements) facts of a shape text, borrowed; NULL (no error) when not known yet. */
static PyObject *facts_of(PyObject *facts_by_text, PyObject *instr) {
    if (Py_TYPE(instr) != instruction_type || SLOT(instr, SHAPE_TEXT) == NULL ||
        !PyUnicode_CheckExact(SLOT(instr, SHAPE_TEXT)))
        return NULL;
    PyObject *facts = PyDict_GetItemWithError(facts_by_text, SLOT(instr, SHAPE_TEXT));
    if (facts == NULL || !PyTuple_CheckExact(facts) || PyTuple_GET_SIZE(facts) != 3) return NULL;
    for (int k = 0; k < 3; k++) /* ints, as CostAnalysis._facts makes them: adding them runs no Python code */
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(facts, k))) return NULL;
    return facts;
}

enum { DEFAULT_ONLY, ELEMENTWISE_FLOPS, ELEMENTWISE_TRANSCENDENTALS };

/* cost._default_bytes (output bytes, plus each operand's size), with cost._elementwise's one FLOP or transcendental
 * per output element, or nothing more (cost.DEFAULT_BYTES_ONLY): a new Cost, or NULL (no error: handed back). */
static PyObject *default_cost(PyObject *instr, PyObject *facts_by_text, int kind) {
    PyObject *facts = facts_of(facts_by_text, instr);
    PyObject *operands = SLOT(instr, OPERANDS);
    if (facts == NULL || operands == NULL || !PyTuple_CheckExact(operands)) return NULL;
    PyObject *size = PyTuple_GET_ITEM(facts, 0);
    Py_INCREF(size);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(operands); k++) {
        PyObject *operand_facts = facts_of(facts_by_text, PyTuple_GET_ITEM(operands, k));
        if (operand_facts == NULL) {
            Py_DECREF(size);
            return NULL;
        }
        Py_SETREF(size, PyNumber_Add(size, PyTuple_GET_ITEM(operand_facts, 1)));
        if (size == NULL) return NULL;
    }
    PyObject *count = PyTuple_GET_ITEM(facts, 2), *cost;
    if (kind == ELEMENTWISE_FLOPS)
        cost = new_cost(count, s_zero_float, size);
    else if (kind == ELEMENTWISE_TRANSCENDENTALS)
        cost = new_cost(s_zero_float, count, size);
    else
        cost = new_cost(s_zero_float, s_zero_float, size);
    Py_DECREF(size);
    return cost;
}

static PyObject *cost_common(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("cost_common", nargs, 10) < 0) return NULL;
    PyObject *instructions = args[0], *costs = args[2], *facts_by_text = args[3], *zero_bytes = args[4],
             *elementwise = args[5], *transcendental = args[6], *default_only = args[7], *zero = args[8],
             *sums = args[9];
    Py_ssize_t index = PyLong_AsSsize_t(args[1]);
    if (index == -1 && PyErr_Occurred()) return NULL;
    if (index < 0) {
        PyErr_SetString(PyExc_ValueError, "index must not be negative");
        return NULL;
    }
    if (!PyList_Check(instructions) || !PyDict_Check(costs) || !PyDict_Check(facts_by_text) ||
        !PyAnySet_Check(zero_bytes) || !PyAnySet_Check(elementwise) || !PyAnySet_Check(transcendental) ||
        !PyAnySet_Check(default_only) ||
        !PyList_Check(sums) || PyList_GET_SIZE(sums) != N_COST_SLOTS) {
        PyErr_SetString(PyExc_TypeError, "cost_common: wrong argument types");
        return NULL;
    }
    double total[N_COST_SLOTS];
    for (int k = 0; k < N_COST_SLOTS; k++) {
        PyObject *value = PyList_GET_ITEM(sums, k);
        if (!PyFloat_CheckExact(value)) {
            PyErr_SetString(PyExc_TypeError, "cost_common: sums must be floats");
            return NULL;
        }
        total[k] = PyFloat_AS_DOUBLE(value);
    }
    for (; index < PyList_GET_SIZE(instructions); index++) {
        PyObject *instr = PyList_GET_ITEM(instructions, index);
        if (Py_TYPE(instr) != instruction_type || SLOT(instr, OPCODE) == NULL || !PyUnicode_CheckExact(SLOT(instr, OPCODE)))
            break; /* an exact str opcode (what the parser makes): its set look-ups run no Python code */
        PyObject *cost = PyDict_GetItemWithError(costs, instr); /* borrowed: the dict keeps it while we read it */
        if (cost == NULL) {
            if (PyErr_Occurred()) return NULL;
            PyObject *op = SLOT(instr, OPCODE);
            int found = PySet_Contains(zero_bytes, op);
            if (found < 0) return NULL;
            if (found) {
                if (PyDict_SetItem(costs, instr, zero) < 0) return NULL;
                continue;
            }
            int kind;
            found = PySet_Contains(elementwise, op);
            if (found < 0) return NULL;
            if (found) {
                int is_transcendental = PySet_Contains(transcendental, op);
                if (is_transcendental < 0) return NULL;
                kind = is_transcendental ? ELEMENTWISE_TRANSCENDENTALS : ELEMENTWISE_FLOPS;
            } else {
                found = PySet_Contains(default_only, op);
                if (found <= 0) {
                    if (found < 0) return NULL;
                    break; /* an opcode with a rule of its own: the Python loop costs it */
                }
                kind = DEFAULT_ONLY;
            }
            PyObject *made = default_cost(instr, facts_by_text, kind);
            if (made == NULL) {
                if (PyErr_Occurred()) return NULL;
                break; /* a shape not seen yet, or operands not resolved: the Python loop */
            }
            int stored = PyDict_SetItem(costs, instr, made);
            Py_DECREF(made);
            if (stored < 0) return NULL;
            cost = made; /* the dict holds it */
        }
        if (cost == zero) continue;
        if (Py_TYPE(cost) != cost_type) break;
        /* `flops += cost.flops` and the four others: float + (float or int), each converted as float.__add__ does */
        double add[N_COST_SLOTS];
        int ok = 1;
        for (int k = 0; k < N_COST_SLOTS && ok; k++) {
            PyObject *value = COST_SLOT(cost, k);
            if (value != NULL && PyFloat_CheckExact(value)) {
                add[k] = PyFloat_AS_DOUBLE(value);
            } else if (value != NULL && PyLong_CheckExact(value)) {
                add[k] = PyLong_AsDouble(value);
                if (add[k] == -1.0 && PyErr_Occurred()) {
                    PyErr_Clear();
                    ok = 0;
                }
            } else {
                ok = 0;
            }
        }
        if (!ok) break; /* the Python loop adds it (and reports what is wrong) */
        for (int k = 0; k < N_COST_SLOTS; k++) total[k] += add[k];
    }
    for (int k = 0; k < N_COST_SLOTS; k++) {
        PyObject *value = PyFloat_FromDouble(total[k]);
        if (value == NULL) return NULL;
        if (PyList_SetItem(sums, k, value) < 0) return NULL; /* steals value, releases the old float */
    }
    return PyLong_FromSsize_t(index);
}

/* ---- parser._open_brackets: (unclosed parentheses, unclosed braces and square brackets) of a text, counting the
 * brackets outside quoted strings when the raw counts do not balance (parser._STRING, not re.S: an escaped newline
 * ends no string) */
static PyObject *open_brackets(PyObject *module, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "open_brackets: expected str");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t counts[6] = {0, 0, 0, 0, 0, 0}; /* ( ) { } [ ] */
    int quoted = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        switch (PyUnicode_READ(kind, data, i)) {
            case '(': counts[0]++; break;
            case ')': counts[1]++; break;
            case '{': counts[2]++; break;
            case '}': counts[3]++; break;
            case '[': counts[4]++; break;
            case ']': counts[5]++; break;
            case '"': quoted = 1; break;
        }
    }
    if (counts[0] == counts[1] && counts[2] == counts[3] && counts[4] == counts[5]) return Py_BuildValue("(ii)", 0, 0);
    if (quoted) { /* the counts again, leaving out each string `"(?:[^"\\]|\\.)*"` as re.sub finds them */
        for (int k = 0; k < 6; k++) counts[k] = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c == '"') {
                Py_ssize_t j = i + 1;
                int closed = 0;
                while (j < n) {
                    Py_UCS4 d = PyUnicode_READ(kind, data, j);
                    if (d == '\\') {
                        if (j + 1 >= n || PyUnicode_READ(kind, data, j + 1) == '\n') break; /* `\\.`: not a newline */
                        j += 2;
                    } else if (d == '"') {
                        closed = 1;
                        break;
                    } else {
                        j++;
                    }
                }
                if (closed) {
                    i = j; /* the closing quote; the loop steps past it */
                    continue;
                }
            }
            switch (c) {
                case '(': counts[0]++; break;
                case ')': counts[1]++; break;
                case '{': counts[2]++; break;
                case '}': counts[3]++; break;
                case '[': counts[4]++; break;
                case ']': counts[5]++; break;
            }
        }
    }
    return Py_BuildValue("(nn)", counts[0] - counts[1], counts[2] + counts[4] - counts[3] - counts[5]);
}

static PyMethodDef methods[] = {
    {"scan_instructions", (PyCFunction)(void (*)(void))scan_instructions, METH_FASTCALL,
     "scan_instructions(lines, lineno, comp, instructions, shared, plain, parameters) -> (line | None, lineno)"},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(HloInstruction, Cost): the classes whose objects the fast paths read and make"},
    {"open_brackets", (PyCFunction)open_brackets, METH_O,
     "open_brackets(text) -> (unclosed parentheses, unclosed braces and square brackets), as parser._open_brackets"},
    {"cost_common", (PyCFunction)(void (*)(void))cost_common, METH_FASTCALL,
     "cost_common(instructions, index, costs, facts_by_text, zero_bytes, elementwise, transcendental, default_only, "
     "zero, sums) -> "
     "index of the first instruction handed back"},
    {"resolve_plain", (PyCFunction)(void (*)(void))resolve_plain, METH_FASTCALL,
     "resolve_plain(instructions, index, by_name, parsed, computations, no_calls) -> index of the first instruction "
     "handed back"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    s_root = PyUnicode_InternFromString("_root");
    s_parameter = PyUnicode_InternFromString("parameter");
    s_constant = PyUnicode_InternFromString("constant");
    s_empty_tuple = PyTuple_New(0);
    s_zero_float = PyFloat_FromDouble(0.0);
    if (!s_root || !s_parameter || !s_constant || !s_empty_tuple || !s_zero_float)
        return NULL;
    return PyModule_Create(&native_module);
}
