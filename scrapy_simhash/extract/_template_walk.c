/* The template step's walks over lxml's tree, in C (scrapy_simhash/extract/boilerplate.py, tree_text.py).
 *
 * The step reads each page's lxml tree many times from Python: which elements' role, id or class name
 * a template part (an XPath over every element with an attribute, then four attribute reads each), which
 * regions lie inside others (an element proxy for every ancestor), the text of a block without spaces
 * and how much of it is link text (an XPath call each). Those were about two thirds of the step's CPU.
 * Here they read lxml's libxml2 tree directly through lxml's public C API (lxml.etree_api.h) and hand
 * back lxml elements, strings and counts.
 *
 * The answers are Python's, element for element (tests/test_template_walk.py holds them to the Python
 * forms, on every corpus page and on generated markup). Where C would have to fold or decode text as
 * Python does it (an id or class that is not ASCII; a text that is not UTF-8), a function answers None
 * and the caller does it in Python. Without this module (no compiler at install, or an lxml whose C API
 * does not match the one it was built with) the step runs in Python, with the same texts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* lxml's headers define helpers this module does not use */
#include "lxml-version.h"
#include "etree_defs.h"
#include "lxml.etree.h"
#include "lxml.etree_api.h"
#pragma GCC diagnostic pop

static PyObject *element_type = NULL; /* lxml.etree._Element */

/* The value of the element's attribute ``name`` without a namespace, as lxml's ``el.get(name)``
 * reads it, or NULL when there is none. *simple is 0 when the value is not one text node (entity
 * references and the like): the caller then lets Python read it. */
static const xmlChar *attribute(xmlNode *node, const char *name, int *simple) {
    for (xmlAttr *attr = node->properties; attr != NULL; attr = attr->next) {
        if (attr->ns != NULL || strcmp((const char *)attr->name, name) != 0)
            continue;
        xmlNode *child = attr->children;
        if (child == NULL)
            return (const xmlChar *)"";
        if (child->type != XML_TEXT_NODE || child->next != NULL || child->content == NULL) {
            *simple = 0;
            return (const xmlChar *)"";
        }
        return child->content;
    }
    return NULL;
}

static int ascii_only(const xmlChar *text) {
    for (; *text; text++)
        if (*text >= 0x80)
            return 0;
    return 1;
}

/* Whether ``text`` (ASCII), lowercased, contains one of ``words`` (lowercase ASCII bytes). */
static int names_a_word(const xmlChar *text, PyObject *words, char *buffer, size_t size) {
    size_t length = strlen((const char *)text);
    char *lower = length < size ? buffer : PyMem_Malloc(length + 1);
    if (lower == NULL)
        return -1;
    for (size_t i = 0; i < length; i++) {
        char c = (char)text[i];
        lower[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    lower[length] = '\0';
    int found = 0;
    Py_ssize_t count = PyTuple_GET_SIZE(words);
    for (Py_ssize_t i = 0; i < count && !found; i++)
        found = strstr(lower, PyBytes_AS_STRING(PyTuple_GET_ITEM(words, i))) != NULL;
    if (lower != buffer)
        PyMem_Free(lower);
    return found;
}

static int in_tuple(const xmlChar *value, PyObject *values) {
    Py_ssize_t count = PyTuple_GET_SIZE(values);
    for (Py_ssize_t i = 0; i < count; i++)
        if (strcmp((const char *)value, PyBytes_AS_STRING(PyTuple_GET_ITEM(values, i))) == 0)
            return 1;
    return 0;
}

static int append(PyObject *list, struct LxmlDocument *doc, xmlNode *node) {
    PyObject *element = (PyObject *)elementFactory(doc, node);
    if (element == NULL)
        return -1;
    int failed = PyList_Append(list, element);
    Py_DECREF(element);
    return failed;
}

static int all_bytes(PyObject *tuple) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(tuple, i)))
            return 0;
    return 1;
}

/* The node after ``node`` under ``top`` in document order (depth first through elements), NULL past
 * the last. */
static xmlNode *next_under(xmlNode *node, xmlNode *top) {
    if (node->children != NULL && node->type == XML_ELEMENT_NODE)
        return node->children;
    while (node != top && node->next == NULL)
        node = node->parent;
    return node == top ? NULL : node->next;
}

/* attributed(body, words, roles) -> (template, article) or None: lists of the elements under ``body``
 * in document order, as boilerplate._by_attributes finds them. ``words``: the lowercase ASCII bytes an
 * id or class names a template part by; ``roles``: the template roles. None: an element's id or class
 * is not ASCII (or an attribute is not plain text), which only Python's str.lower() folds exactly: the
 * caller walks in Python. */
static PyObject *attributed(PyObject *self, PyObject *args) {
    PyObject *body, *words, *roles;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O!:attributed", (PyTypeObject *)element_type, &body, &PyTuple_Type, &words,
                          &PyTuple_Type, &roles))
        return NULL;
    if (!all_bytes(words) || !all_bytes(roles)) {
        PyErr_SetString(PyExc_TypeError, "attributed(element, tuple of bytes, tuple of bytes)");
        return NULL;
    }
    struct LxmlElement *root = (struct LxmlElement *)body;
    PyObject *template = PyList_New(0), *article = PyList_New(0);
    if (template == NULL || article == NULL)
        goto fail;
    char buffer[512];
    xmlNode *top = root->_c_node;
    for (xmlNode *node = top->children; node != NULL; node = next_under(node, top)) {
        if (node->type == XML_ELEMENT_NODE) {
            int simple = 1;
            const xmlChar *role = attribute(node, "role", &simple);
            const xmlChar *prop = attribute(node, "itemprop", &simple);
            const xmlChar *ident = attribute(node, "id", &simple);
            const xmlChar *cls = attribute(node, "class", &simple);
            if (!simple || (ident != NULL && !ascii_only(ident)) || (cls != NULL && !ascii_only(cls))) {
                Py_DECREF(template);
                Py_DECREF(article);
                Py_RETURN_NONE;
            }
            int is_main = role != NULL && strcmp((const char *)role, "main") == 0;
            if (is_main || (prop != NULL && strcmp((const char *)prop, "articleBody") == 0))
                if (append(article, root->_doc, node) < 0)
                    goto fail;
            int found = role != NULL && in_tuple(role, roles);
            if (!found && ident != NULL)
                found = names_a_word(ident, words, buffer, sizeof buffer);
            if (found == 0 && cls != NULL)
                found = names_a_word(cls, words, buffer, sizeof buffer);
            if (found < 0) {
                PyErr_NoMemory();
                goto fail;
            }
            if (found && append(template, root->_doc, node) < 0)
                goto fail;
        }
    }
    return Py_BuildValue("(NN)", template, article);
fail:
    Py_XDECREF(template);
    Py_XDECREF(article);
    return NULL;
}

static int compare_pointers(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (xmlNode *const *)a, y = (uintptr_t) * (xmlNode *const *)b;
    return (x > y) - (x < y);
}

/* outermost(elements) -> list: the lxml elements of the list (no two the same) that have no ancestor
 * in it, in the list's order: the regions the template step removes, none inside another. */
static PyObject *outermost(PyObject *self, PyObject *args) {
    PyObject *elements;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!:outermost", &PyList_Type, &elements))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(elements);
    for (Py_ssize_t i = 0; i < count; i++) {
        int is_element = PyObject_IsInstance(PyList_GET_ITEM(elements, i), element_type);
        if (is_element <= 0) {
            if (is_element == 0)
                PyErr_SetString(PyExc_TypeError, "outermost(list of elements)");
            return NULL;
        }
    }
    xmlNode **sorted = PyMem_Malloc((count ? count : 1) * sizeof(xmlNode *));
    if (sorted == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++)
        sorted[i] = ((struct LxmlElement *)PyList_GET_ITEM(elements, i))->_c_node;
    qsort(sorted, (size_t)count, sizeof(xmlNode *), compare_pointers);
    PyObject *kept = PyList_New(0);
    for (Py_ssize_t i = 0; kept != NULL && i < count; i++) {
        PyObject *element = PyList_GET_ITEM(elements, i);
        int inside = 0;
        for (xmlNode *up = ((struct LxmlElement *)element)->_c_node->parent;
             up != NULL && up->type == XML_ELEMENT_NODE && !inside; up = up->parent)
            inside = bsearch(&up, sorted, (size_t)count, sizeof(xmlNode *), compare_pointers) != NULL;
        if (!inside && PyList_Append(kept, element) < 0)
            Py_CLEAR(kept);
    }
    PyMem_Free(sorted);
    return kept;
}

static int is_text(xmlNode *node) {
    return (node->type == XML_TEXT_NODE || node->type == XML_CDATA_SECTION_NODE) && node->content != NULL;
}

/* Decode the code point at *p (UTF-8) into *c and step past it; -1 for a sequence that is not UTF-8 as
 * Python's strict decoder reads it (overlong, a surrogate, past U+10FFFF, cut short). */
static int next_code_point(const unsigned char **p, Py_UCS4 *c) {
    static const Py_UCS4 least[4] = {0, 0x80, 0x800, 0x10000};
    const unsigned char *q = *p;
    Py_UCS4 value = *q;
    int more = value < 0x80 ? 0 : value < 0xC0 ? -1 : value < 0xE0 ? 1 : value < 0xF0 ? 2 : value < 0xF8 ? 3 : -1;
    if (more < 0)
        return -1;
    if (more)
        value &= 0x3F >> more;
    for (int i = 1; i <= more; i++) {
        if ((q[i] & 0xC0) != 0x80) /* also stops at the terminating NUL */
            return -1;
        value = (value << 6) | (q[i] & 0x3F);
    }
    if (value < least[more] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF))
        return -1;
    *c = value;
    *p = q + more + 1;
    return 0;
}

/* The number of code points of UTF-8 ``text`` that are not whitespace as str.split() reads it, or -1
 * when ``text`` is not valid UTF-8. */
static Py_ssize_t non_space_length(const xmlChar *text) {
    Py_ssize_t count = 0;
    for (const unsigned char *p = text; *p;) {
        Py_UCS4 c;
        if (next_code_point(&p, &c) < 0)
            return -1;
        count += !Py_UNICODE_ISSPACE(c);
    }
    return count;
}

/* The element's text without whitespace, as "".join(string(element).split()): text and CDATA nodes
 * under it in document order (its tail left out), or None when a text is not valid UTF-8. */
static PyObject *text_of(PyObject *self, PyObject *args) {
    PyObject *element;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!:text_of", (PyTypeObject *)element_type, &element))
        return NULL;
    xmlNode *top = ((struct LxmlElement *)element)->_c_node;
    size_t size = 0, used = 0;
    for (xmlNode *node = top->children; node != NULL; node = next_under(node, top))
        if (is_text(node))
            size += strlen((const char *)node->content);
    Py_UCS4 *chars = PyMem_Malloc((size ? size : 1) * sizeof(Py_UCS4));
    if (chars == NULL)
        return PyErr_NoMemory();
    for (xmlNode *node = top->children; node != NULL; node = next_under(node, top)) {
        if (!is_text(node))
            continue;
        for (const unsigned char *p = node->content; *p;) {
            Py_UCS4 c;
            if (next_code_point(&p, &c) < 0)
                goto invalid;
            if (!Py_UNICODE_ISSPACE(c))
                chars[used++] = c;
        }
    }
    PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, chars, (Py_ssize_t)used);
    PyMem_Free(chars);
    return text;
invalid:
    PyMem_Free(chars);
    Py_RETURN_NONE;
}

/* link_share(block) -> (text, link_text): the block's text and its links' text (under an ``a``), in
 * characters that are not whitespace, or None when a text is not valid UTF-8. */
static PyObject *link_share(PyObject *self, PyObject *args) {
    PyObject *element;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!:link_share", (PyTypeObject *)element_type, &element))
        return NULL;
    xmlNode *top = ((struct LxmlElement *)element)->_c_node;
    Py_ssize_t text = 0, links = 0;
    for (xmlNode *node = top->children; node != NULL; node = next_under(node, top)) {
        if (!is_text(node))
            continue;
        Py_ssize_t length = non_space_length(node->content);
        if (length < 0)
            Py_RETURN_NONE;
        text += length;
        for (xmlNode *up = node->parent; up != NULL && up != top; up = up->parent)
            if (up->type == XML_ELEMENT_NODE && up->ns == NULL && strcmp((const char *)up->name, "a") == 0) {
                links += length;
                break;
            }
    }
    return Py_BuildValue("(nn)", text, links);
}

static PyMethodDef methods[] = {
    {"text_of", text_of, METH_VARARGS, "text_of(element) -> str or None: its text without whitespace."},
    {"link_share", link_share, METH_VARARGS,
     "link_share(block) -> (text, link_text) or None: non-space characters in all and in link text."},
    {"outermost", outermost, METH_VARARGS,
     "outermost(elements) -> list: the elements without an ancestor among them, in their order."},
    {"attributed", attributed, METH_VARARGS,
     "attributed(body, words, roles) -> (template, article) or None: the template step's attribute walk."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_template_walk", "The template step's walks over lxml's tree, in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__template_walk(void) {
    if (import_lxml__etree() < 0)
        return NULL;
    PyObject *etree = PyImport_ImportModule("lxml.etree");
    if (etree == NULL)
        return NULL;
    element_type = PyObject_GetAttrString(etree, "_Element");
    Py_DECREF(etree);
    if (element_type == NULL)
        return NULL;
    return PyModule_Create(&module);
}
