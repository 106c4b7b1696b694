/*
 * Native hot path of simhash-doc/1: lookup3 hashlittle2 over each feature's
 * UTF-8 bytes and the 64 signed counters, and simhash_text(), which tokenises
 * too (the tokeniser of _tokenize.h, shared with _minhash.c).
 *
 * lookup3 is Bob Jenkins' public-domain code (lookup3.c, May 2006), reduced to
 * the byte-at-a-time little-endian reading of hashlittle2, which gives the same
 * result on every platform.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_lookup3.h"  /* jenkins64(): lookup3 hashlittle2, shared with the other extension */
#include "_tokenize.h" /* tokenize_text(): the simhash-doc/1 tokeniser, shared with the other extension */

static PyObject *py_jenkins64(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    uint64_t h;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    h = jenkins64((const uint8_t *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(h);
}

static inline void add_hash(double *v, uint64_t h, double w)
{
    for (int i = 0; i < 64; i++)
        v[i] += ((h >> i) & 1u) ? w : -w;
}

static inline void add_hash_unit(int64_t *v, uint64_t h)
{
    /* Branch-free +1/-1 per bit; compilers vectorise this loop. */
    for (int i = 0; i < 64; i++)
        v[i] += (int64_t)(((h >> i) & 1u) << 1) - 1;
}

static int feature_hash(PyObject *item, uint64_t *out)
{
    Py_ssize_t size;
    const char *utf8;
    if (!PyUnicode_Check(item)) {
        PyErr_Format(PyExc_TypeError, "features must be str, not %.100s",
                     Py_TYPE(item)->tp_name);
        return -1;
    }
    utf8 = PyUnicode_AsUTF8AndSize(item, &size);
    if (utf8 == NULL)
        return -1; /* e.g. lone surrogates: not encodable as UTF-8 */
    *out = jenkins64((const uint8_t *)utf8, (size_t)size);
    return 0;
}

/* simhash_features(iterable of str) -> int: every item is one feature of weight 1. */
static PyObject *py_simhash_features(PyObject *self, PyObject *arg)
{
    int64_t v[64] = {0};
    uint64_t h, result = 0;
    PyObject *it, *item;

    it = PyObject_GetIter(arg);
    if (it == NULL)
        return NULL;
    while ((item = PyIter_Next(it)) != NULL) {
        int rc = feature_hash(item, &h);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(it);
            return NULL;
        }
        add_hash_unit(v, h);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    for (int i = 0; i < 64; i++)
        if (v[i] > 0)
            result |= (uint64_t)1 << i;
    return PyLong_FromUnsignedLongLong(result);
}

/* simhash_weighted(iterable of (str, number)) -> int. */
static PyObject *py_simhash_weighted(PyObject *self, PyObject *arg)
{
    double v[64] = {0};
    uint64_t h, result = 0;
    PyObject *it, *pair;

    it = PyObject_GetIter(arg);
    if (it == NULL)
        return NULL;
    while ((pair = PyIter_Next(it)) != NULL) {
        PyObject *feature, *weight;
        double w;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "weighted features must be (str, weight) pairs");
            goto fail;
        }
        feature = PyTuple_GET_ITEM(pair, 0);
        weight = PyTuple_GET_ITEM(pair, 1);
        w = PyFloat_AsDouble(weight);
        if (w == -1.0 && PyErr_Occurred())
            goto fail;
        if (feature_hash(feature, &h) < 0)
            goto fail;
        Py_DECREF(pair);
        add_hash(v, h, w);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    for (int i = 0; i < 64; i++)
        if (v[i] > 0)
            result |= (uint64_t)1 << i;
    return PyLong_FromUnsignedLongLong(result);
fail:
    Py_DECREF(pair);
    Py_DECREF(it);
    return NULL;
}

/* ---- simhash_text(normalized_text, class_table) -> (simhash, token_count) ----
 *
 * Distinct tokens are kept in an exact hash set (hash, then bytes), so the result
 * equals the pure-Python path even if two tokens' 64-bit hashes collide.
 */
typedef struct {
    uint64_t hash;
    size_t offset; /* into arena */
    size_t length;
    int used;
} slot_t;

typedef struct {
    slot_t *slots;
    size_t capacity; /* power of two */
    size_t count;
    char *arena;
    size_t arena_len, arena_cap;
    int64_t ones[64]; /* per bit: how many distinct tokens have it set */
} token_set_t;

static int set_init(token_set_t *set)
{
    memset(set, 0, sizeof(*set));
    set->capacity = 256;
    set->slots = PyMem_Calloc(set->capacity, sizeof(slot_t));
    set->arena_cap = 4096;
    set->arena = PyMem_Malloc(set->arena_cap);
    if (set->slots == NULL || set->arena == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void set_free(token_set_t *set)
{
    PyMem_Free(set->slots);
    PyMem_Free(set->arena);
}

static int set_grow(token_set_t *set)
{
    size_t new_cap = set->capacity * 2, mask = new_cap - 1;
    slot_t *fresh = PyMem_Calloc(new_cap, sizeof(slot_t));
    if (fresh == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < set->capacity; i++) {
        if (!set->slots[i].used)
            continue;
        size_t j = (size_t)set->slots[i].hash & mask;
        while (fresh[j].used)
            j = (j + 1) & mask;
        fresh[j] = set->slots[i];
    }
    PyMem_Free(set->slots);
    set->slots = fresh;
    set->capacity = new_cap;
    return 0;
}

/* Add one token (UTF-8 bytes); counts its bits the first time it is seen. */
static int set_add(token_set_t *set, const char *bytes, size_t length)
{
    uint64_t h = jenkins64((const uint8_t *)bytes, length);
    size_t mask = set->capacity - 1, j = (size_t)h & mask;
    while (set->slots[j].used) {
        slot_t *slot = &set->slots[j];
        if (slot->hash == h && slot->length == length &&
            memcmp(set->arena + slot->offset, bytes, length) == 0)
            return 0; /* seen before: a distinct token counts once */
        j = (j + 1) & mask;
    }
    if (set->arena_len + length > set->arena_cap) {
        size_t cap = set->arena_cap * 2;
        while (cap < set->arena_len + length)
            cap *= 2;
        char *grown = PyMem_Realloc(set->arena, cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        set->arena = grown;
        set->arena_cap = cap;
    }
    memcpy(set->arena + set->arena_len, bytes, length);
    set->slots[j].hash = h;
    set->slots[j].offset = set->arena_len;
    set->slots[j].length = length;
    set->slots[j].used = 1;
    set->arena_len += length;
    set->count++;
    for (int i = 0; i < 64; i++)
        set->ones[i] += (int64_t)((h >> i) & 1u);
    if (set->count * 2 > set->capacity)
        return set_grow(set);
    return 0;
}

typedef struct {
    text_view_t view;
    char *buffer; /* scratch for one token's UTF-8, 4 bytes per code point */
    token_set_t set;
    Py_ssize_t tokens;
} tokenizer_t;

/* The token sink: text[start:end) into the set of distinct tokens. */
static int add_token(void *sink, Py_ssize_t start, Py_ssize_t end)
{
    tokenizer_t *tk = (tokenizer_t *)sink;
    size_t n = utf8_slice(&tk->view, start, end, tk->buffer);
    tk->tokens++;
    return set_add(&tk->set, tk->buffer, n);
}

static PyObject *py_simhash_text(PyObject *self, PyObject *args)
{
    PyObject *text;
    Py_buffer table;
    tokenizer_t tk;
    Py_ssize_t n, longest = 0;
    uint64_t result = 0;
    int failed;

    if (!PyArg_ParseTuple(args, "Uy*", &text, &table))
        return NULL;
    if (check_class_table(&table) < 0) {
        PyBuffer_Release(&table);
        return NULL;
    }
    n = PyUnicode_GET_LENGTH(text);
    text_view_init(&tk.view, text, (const uint8_t *)table.buf);
    tk.tokens = 0;

    /* The scratch buffer holds the longest run. */
    for (Py_ssize_t j = 0, run = 0; j < n; j++) {
        run = (cls_at(&tk.view, j) & CLS_RUN) ? run + 1 : 0;
        if (run > longest)
            longest = run;
    }
    tk.buffer = PyMem_Malloc((size_t)longest * 4 + 4);
    if (tk.buffer == NULL || set_init(&tk.set) < 0) {
        PyMem_Free(tk.buffer);
        PyBuffer_Release(&table);
        return PyErr_NoMemory();
    }

    failed = tokenize_text(&tk.view, n, add_token, &tk) < 0;
    if (!failed) {
        for (int b = 0; b < 64; b++)
            if (2 * tk.set.ones[b] > (int64_t)tk.set.count)
                result |= (uint64_t)1 << b;
    }
    set_free(&tk.set);
    PyMem_Free(tk.buffer);
    PyBuffer_Release(&table);
    if (failed)
        return NULL;
    return Py_BuildValue("(Kn)", (unsigned long long)result, tk.tokens);
}

/* any_flagged(text, table) -> bool: whether the table's byte of some code point of text is not 0.
 * pinned_unicode.needs_tables() asks it with the table of the code points this interpreter
 * could normalise differently from Unicode 15.0: one lookup per code point. */
static PyObject *py_any_flagged(PyObject *self, PyObject *args)
{
    PyObject *text;
    Py_buffer table;
    text_view_t view;
    int found = 0;

    if (!PyArg_ParseTuple(args, "Uy*", &text, &table))
        return NULL;
    if (check_class_table(&table) < 0) {
        PyBuffer_Release(&table);
        return NULL;
    }
    text_view_init(&view, text, (const uint8_t *)table.buf);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(text); i < n && !found; i++)
        found = cls_at(&view, i) != 0;
    PyBuffer_Release(&table);
    return PyBool_FromLong(found);
}

static PyMethodDef methods[] = {
    {"jenkins64", py_jenkins64, METH_O,
     "jenkins64(data) -> int: lookup3 hashlittle2(data, 0, 0) as c | b << 32."},
    {"simhash_features", py_simhash_features, METH_O,
     "simhash_features(features) -> int: simhash of str features, weight 1 each."},
    {"simhash_weighted", py_simhash_weighted, METH_O,
     "simhash_weighted(pairs) -> int: simhash of (str, weight) pairs."},
    {"any_flagged", py_any_flagged, METH_VARARGS,
     "any_flagged(text, table) -> bool: whether table[code point] != 0 for a code point of text."},
    {"simhash_text", py_simhash_text, METH_VARARGS,
     "simhash_text(normalized, table) -> (simhash, token count) of a NFC-casefolded text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Native simhash-doc/1 hot path.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
