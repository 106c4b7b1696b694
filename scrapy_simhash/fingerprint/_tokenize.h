/*
 * The tokeniser of simhash-doc/1 (and so of minhash-doc/1), shared by _native.c and
 * _minhash.c so that the two schemes cannot drift apart.  It works on an NFC-casefolded
 * str (pinned_unicode.normalize) and the class table of pinned_unicode.class_table(), one
 * byte per code point, built from the Unicode 15.0 tables the package ships:
 *   CLS_RUN      letter, mark, decimal digit or connector punctuation (part of a run)
 *   CLS_LETTER   category L
 *   CLS_UNSPACED script Han, Hiragana, Katakana, Thai, Lao, Khmer or Myanmar
 * Code points Unicode 15.0 does not assign, and surrogates, have no flag: they separate
 * runs, so a token never holds a surrogate and always encodes as UTF-8.
 *
 * tokenize_text() finds the tokens in text order and hands each one, as a slice
 * [start, end) of the text, to the caller's sink; the sink sets a Python error and
 * returns -1 to stop.
 */
#ifndef SCRAPY_SIMHASH_TOKENIZE_H
#define SCRAPY_SIMHASH_TOKENIZE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define CLS_RUN 1
#define CLS_LETTER 2
#define CLS_UNSPACED 4
#define CLASS_TABLE_SIZE 0x110000

typedef struct {
    int kind;
    const void *data;
    const uint8_t *table;
} text_view_t;

typedef int (*token_sink_t)(void *sink, Py_ssize_t start, Py_ssize_t end);

static inline void text_view_init(text_view_t *view, PyObject *text, const uint8_t *table)
{
    view->kind = PyUnicode_KIND(text);
    view->data = PyUnicode_DATA(text);
    view->table = table;
}

static inline uint8_t cls_at(const text_view_t *view, Py_ssize_t i)
{
    return view->table[PyUnicode_READ(view->kind, view->data, i)];
}

/* A ValueError unless the buffer is a class table (one byte per code point). */
static int check_class_table(const Py_buffer *table)
{
    if (table->len != CLASS_TABLE_SIZE) {
        PyErr_SetString(PyExc_ValueError, "class table must have 0x110000 entries");
        return -1;
    }
    return 0;
}

static size_t utf8_put(char *out, Py_UCS4 ch)
{
    if (ch < 0x80) {
        out[0] = (char)ch;
        return 1;
    }
    if (ch < 0x800) {
        out[0] = (char)(0xC0 | (ch >> 6));
        out[1] = (char)(0x80 | (ch & 0x3F));
        return 2;
    }
    if (ch < 0x10000) {
        out[0] = (char)(0xE0 | (ch >> 12));
        out[1] = (char)(0x80 | ((ch >> 6) & 0x3F));
        out[2] = (char)(0x80 | (ch & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (ch >> 18));
    out[1] = (char)(0x80 | ((ch >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((ch >> 6) & 0x3F));
    out[3] = (char)(0x80 | (ch & 0x3F));
    return 4;
}

/* The UTF-8 of text[start:end) into out (at most 4 bytes per code point); returns its length. */
static inline size_t utf8_slice(const text_view_t *view, Py_ssize_t start, Py_ssize_t end, char *out)
{
    size_t n = 0;
    for (Py_ssize_t i = start; i < end; i++)
        n += utf8_put(out + n, PyUnicode_READ(view->kind, view->data, i));
    return n;
}

/* A part of a run outside unspaced stretches is a token if it holds a letter. */
static inline int emit_if_letter(const text_view_t *view, Py_ssize_t start, Py_ssize_t end,
                                 token_sink_t emit, void *sink)
{
    for (Py_ssize_t i = start; i < end; i++)
        if (cls_at(view, i) & CLS_LETTER)
            return emit(sink, start, end);
    return 0;
}

/* The tokens of one run that holds a letter: itself, or its unspaced stretches as bigrams
 * (a stretch of one character: a unigram) and the parts around them that hold a letter. */
static inline int tokenize_run(const text_view_t *view, Py_ssize_t start, Py_ssize_t end, int unspaced,
                               token_sink_t emit, void *sink)
{
    if (!unspaced)
        return emit(sink, start, end);
    Py_ssize_t i = start, part = start;
    while (i < end) {
        if (!(cls_at(view, i) & CLS_UNSPACED)) {
            i++;
            continue;
        }
        Py_ssize_t s = i;
        while (i < end && (cls_at(view, i) & CLS_UNSPACED))
            i++;
        if (emit_if_letter(view, part, s, emit, sink) < 0)
            return -1;
        if (i - s == 1) {
            if (emit(sink, s, i) < 0)
                return -1;
        } else {
            for (Py_ssize_t b = s; b + 1 < i; b++)
                if (emit(sink, b, b + 2) < 0)
                    return -1;
        }
        part = i;
    }
    return emit_if_letter(view, part, end, emit, sink);
}

/* Every token of text[0:n) in text order, to emit(sink, start, end); -1 (error set) if a sink call fails. */
static inline int tokenize_text(const text_view_t *view, Py_ssize_t n, token_sink_t emit, void *sink)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = cls_at(view, i);
        if (!(c & CLS_RUN)) {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        int letter = 0, unspaced = 0;
        while (i < n && ((c = cls_at(view, i)) & CLS_RUN)) {
            letter |= c & CLS_LETTER;
            unspaced |= c & CLS_UNSPACED;
            i++;
        }
        if (letter && tokenize_run(view, start, i, unspaced, emit, sink) < 0)
            return -1;
    }
    return 0;
}

#endif /* SCRAPY_SIMHASH_TOKENIZE_H */
