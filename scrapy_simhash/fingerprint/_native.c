/*
 * Native hot path of simhash-doc/1: lookup3 hashlittle2 over each feature's
 * UTF-8 bytes and the 64 signed counters.  Tokenisation stays in Python (the
 * `regex` module) so that both paths share one definition of a token; only the
 * per-feature arithmetic, which dominates the cost, lives here.
 *
 * lookup3 is Bob Jenkins' public-domain code (lookup3.c, May 2006), reduced to
 * the byte-at-a-time little-endian reading of hashlittle2, which gives the same
 * result on every platform.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ROT(x, k) (((x) << (k)) | ((x) >> (32 - (k))))

#define MIX(a, b, c)                \
    {                               \
        a -= c; a ^= ROT(c, 4);  c += b; \
        b -= a; b ^= ROT(a, 6);  a += c; \
        c -= b; c ^= ROT(b, 8);  b += a; \
        a -= c; a ^= ROT(c, 16); c += b; \
        b -= a; b ^= ROT(a, 19); a += c; \
        c -= b; c ^= ROT(b, 4);  b += a; \
    }

#define FINAL(a, b, c)              \
    {                               \
        c ^= b; c -= ROT(b, 14);    \
        a ^= c; a -= ROT(c, 11);    \
        b ^= a; b -= ROT(a, 25);    \
        c ^= b; c -= ROT(b, 16);    \
        a ^= c; a -= ROT(c, 4);     \
        b ^= a; b -= ROT(a, 14);    \
        c ^= b; c -= ROT(b, 24);    \
    }

static inline uint32_t load_le32(const uint8_t *k)
{
    return (uint32_t)k[0] | ((uint32_t)k[1] << 8) | ((uint32_t)k[2] << 16) |
           ((uint32_t)k[3] << 24);
}

/* hashlittle2(key, length, &c, &b) with both initial values 0; returns c | b << 32. */
static uint64_t jenkins64(const uint8_t *k, size_t length)
{
    uint32_t a, b, c;
    a = b = c = 0xdeadbeefu + (uint32_t)length;

    while (length > 12) {
        a += load_le32(k);
        b += load_le32(k + 4);
        c += load_le32(k + 8);
        MIX(a, b, c);
        length -= 12;
        k += 12;
    }
    switch (length) { /* all the case statements fall through */
    case 12: c += ((uint32_t)k[11]) << 24; /* fall through */
    case 11: c += ((uint32_t)k[10]) << 16; /* fall through */
    case 10: c += ((uint32_t)k[9]) << 8;   /* fall through */
    case 9:  c += k[8];                    /* fall through */
    case 8:  b += ((uint32_t)k[7]) << 24;  /* fall through */
    case 7:  b += ((uint32_t)k[6]) << 16;  /* fall through */
    case 6:  b += ((uint32_t)k[5]) << 8;   /* fall through */
    case 5:  b += k[4];                    /* fall through */
    case 4:  a += ((uint32_t)k[3]) << 24;  /* fall through */
    case 3:  a += ((uint32_t)k[2]) << 16;  /* fall through */
    case 2:  a += ((uint32_t)k[1]) << 8;   /* fall through */
    case 1:  a += k[0]; break;
    case 0:  return (uint64_t)c | ((uint64_t)b << 32);
    }
    FINAL(a, b, c);
    return (uint64_t)c | ((uint64_t)b << 32);
}

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

static PyMethodDef methods[] = {
    {"jenkins64", py_jenkins64, METH_O,
     "jenkins64(data) -> int: lookup3 hashlittle2(data, 0, 0) as c | b << 32."},
    {"simhash_features", py_simhash_features, METH_O,
     "simhash_features(features) -> int: simhash of str features, weight 1 each."},
    {"simhash_weighted", py_simhash_weighted, METH_O,
     "simhash_weighted(pairs) -> int: simhash of (str, weight) pairs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Native simhash-doc/1 hot path.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
