/*
 * Native hot path of minhash-doc/1 (docs/minhash-doc-1.md): tokens, shingles,
 * lookup3 shingle hashes, one-permutation binning and densification, in one
 * pass over the text.  The pure-Python reference is _minhash_purepy.py; tests hold both
 * to the same bits.
 *
 * The tokeniser is the one of _native.c (simhash-doc/1 tokens, _tokenize.h,
 * driven by the same Unicode 15.0 class table).  Tokens are written one after
 * the other into one UTF-8 buffer, separated by one space, so that every
 * shingle (n consecutive tokens joined by a space) is a contiguous slice of it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_lookup3.h"  /* jenkins64(): lookup3 hashlittle2, shared with the other extension */
#include "_tokenize.h" /* tokenize_text(): the simhash-doc/1 tokeniser, shared with the other extension */

typedef struct {
    text_view_t view;
    char *buf;       /* tokens' UTF-8, each followed by one space */
    size_t buf_len;
    size_t *starts;  /* per token: offset of its first byte in buf */
    size_t *ends;    /* per token: offset just past its last byte */
    Py_ssize_t count, cap;
} tokens_t;

/* The token sink: text[start:end) and one space appended to buf.  buf was sized for
 * the worst case up front (every code point 4 bytes plus a space after each, see tokenize). */
static int append_token(void *sink, Py_ssize_t start, Py_ssize_t end)
{
    tokens_t *tk = (tokens_t *)sink;
    if (tk->count == tk->cap) {
        Py_ssize_t cap = tk->cap * 2;
        size_t *s = PyMem_Realloc(tk->starts, (size_t)cap * sizeof(size_t));
        if (s == NULL)
            goto no_memory;
        tk->starts = s;
        size_t *e = PyMem_Realloc(tk->ends, (size_t)cap * sizeof(size_t));
        if (e == NULL)
            goto no_memory;
        tk->ends = e;
        tk->cap = cap;
    }
    tk->starts[tk->count] = tk->buf_len;
    tk->buf_len += utf8_slice(&tk->view, start, end, tk->buf + tk->buf_len);
    tk->ends[tk->count] = tk->buf_len;
    tk->buf[tk->buf_len++] = ' ';
    tk->count++;
    return 0;
no_memory:
    PyErr_NoMemory();
    return -1;
}

/* Tokenise text into tk (which the caller frees with tokens_free, also on failure). */
static int tokenize(PyObject *text, const uint8_t *table, tokens_t *tk)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    memset(tk, 0, sizeof(*tk));
    text_view_init(&tk->view, text, table);
    /* A bigram stretch of m characters gives m - 1 tokens of 2 characters: at most
     * 2n code points in tokens, each at most 4 bytes, plus one space per token. */
    tk->buf = PyMem_Malloc((size_t)n * 8 + (size_t)n * 2 + 16);
    tk->cap = 64;
    tk->starts = PyMem_Malloc((size_t)tk->cap * sizeof(size_t));
    tk->ends = PyMem_Malloc((size_t)tk->cap * sizeof(size_t));
    if (tk->buf == NULL || tk->starts == NULL || tk->ends == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return tokenize_text(&tk->view, n, append_token, tk);
}

static void tokens_free(tokens_t *tk)
{
    PyMem_Free(tk->buf);
    PyMem_Free(tk->starts);
    PyMem_Free(tk->ends);
}

/* Hash of shingle j: tokens j .. j+n-1, or all tokens when there are fewer than n. */
static inline uint64_t shingle_hash(const tokens_t *tk, Py_ssize_t j, Py_ssize_t n)
{
    Py_ssize_t last = tk->count < n ? tk->count - 1 : j + n - 1;
    size_t s = tk->starts[j];
    return jenkins64((const uint8_t *)tk->buf + s, tk->ends[last] - s);
}

static inline Py_ssize_t shingle_count(const tokens_t *tk, Py_ssize_t n)
{
    if (tk->count == 0)
        return 0;
    return tk->count < n ? 1 : tk->count - n + 1;
}

/* shingle_hashes(normalized, table, n) -> list of int, in text order. */
static PyObject *py_shingle_hashes(PyObject *self, PyObject *args)
{
    PyObject *text, *out = NULL;
    Py_buffer table;
    Py_ssize_t n;
    tokens_t tk;

    if (!PyArg_ParseTuple(args, "Uy*n", &text, &table, &n))
        return NULL;
    if (check_class_table(&table) < 0 || n < 1) {
        if (n < 1 && !PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "shingle size must be at least 1");
        PyBuffer_Release(&table);
        return NULL;
    }
    if (tokenize(text, (const uint8_t *)table.buf, &tk) == 0) {
        Py_ssize_t m = shingle_count(&tk, n);
        out = PyList_New(m);
        for (Py_ssize_t j = 0; out != NULL && j < m; j++) {
            PyObject *h = PyLong_FromUnsignedLongLong(shingle_hash(&tk, j, n));
            if (h == NULL)
                Py_CLEAR(out);
            else
                PyList_SET_ITEM(out, j, h);
        }
    }
    tokens_free(&tk);
    PyBuffer_Release(&table);
    return out;
}

/* splitmix64's output function; must match _minhash_purepy.mix64. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define SEED 0x6D696E6861736831ull /* ASCII "minhash1" */
#define MAX_PROBES 1024
#define EMPTY 0xFFFFFFFFu

/* One-permutation MinHash with optimal densification over hashes of shingles
 * (docs/minhash-doc-1.md): h = c | b << 32 goes to bin (b * k) >> 32 with value c;
 * an empty bin copies the first non-empty bin among its probes.  `filled` is
 * caller-provided scratch of k bytes. */
static void sketch_tokens(const tokens_t *tk, Py_ssize_t n, Py_ssize_t k, uint32_t *values, uint8_t *filled)
{
    Py_ssize_t m = shingle_count(tk, n), any = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        values[i] = EMPTY;
        filled[i] = 0;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        uint64_t h = shingle_hash(tk, j, n);
        size_t i = (size_t)(((h >> 32) * (uint64_t)k) >> 32);
        uint32_t c = (uint32_t)h;
        if (!filled[i] || c < values[i]) {
            values[i] = c;
            filled[i] = 1;
        }
        any = 1;
    }
    if (!any)
        return;
    /* Densify from the original bins only: mark densified ones 2 so that they are never copied. */
    for (Py_ssize_t i = 0; i < k; i++) {
        if (filled[i])
            continue;
        Py_ssize_t j = -1;
        for (uint64_t t = 1; t <= MAX_PROBES; t++) {
            Py_ssize_t p = (Py_ssize_t)(mix64(SEED ^ ((uint64_t)i << 32) ^ t) % (uint64_t)k);
            if (filled[p] == 1) {
                j = p;
                break;
            }
        }
        for (Py_ssize_t step = 1; j < 0 && step < k; step++)
            if (filled[(i + step) % k] == 1)
                j = (i + step) % k;
        values[i] = values[j];
        filled[i] = 2;
    }
}

/* sketch_into(normalized, table, n, out) -> token count: out (k uint32, writable) gets the sketch. */
static PyObject *py_sketch_into(PyObject *self, PyObject *args)
{
    PyObject *text;
    Py_buffer table, out;
    Py_ssize_t n, k;
    tokens_t tk;
    PyObject *result = NULL;

    if (!PyArg_ParseTuple(args, "Uy*nw*", &text, &table, &n, &out))
        return NULL;
    k = out.len / 4;
    if (check_class_table(&table) < 0)
        goto done;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "shingle size must be at least 1");
        goto done;
    }
    if (out.len % 4 != 0 || k < 1) {
        PyErr_SetString(PyExc_ValueError, "out needs 4 bytes per value and at least one value");
        goto done;
    }
    if (tokenize(text, (const uint8_t *)table.buf, &tk) == 0) {
        uint8_t *filled = PyMem_Malloc((size_t)k);
        if (filled == NULL) {
            PyErr_NoMemory();
        } else {
            sketch_tokens(&tk, n, k, (uint32_t *)out.buf, filled);
            PyMem_Free(filled);
            result = PyLong_FromSsize_t(tk.count);
        }
    }
    tokens_free(&tk);
done:
    PyBuffer_Release(&table);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"shingle_hashes", py_shingle_hashes, METH_VARARGS,
     "shingle_hashes(normalized, table, n) -> [int]: jenkins64 of each n-token shingle."},
    {"sketch_into", py_sketch_into, METH_VARARGS,
     "sketch_into(normalized, table, n, out) -> token count: fills out with the sketch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_minhash", "Native minhash-doc/1 hot path.", -1, methods,
};

PyMODINIT_FUNC PyInit__minhash(void) { return PyModule_Create(&module); }
