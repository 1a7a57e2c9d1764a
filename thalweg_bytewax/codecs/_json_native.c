/*
 * JSON documents to Arrow buffers, one pass, no Python objects per value.
 *
 * The columnar core of thalweg_bytewax.codecs.json. A Decoder is built once from a
 * plan (a tree of tuples describing the Arrow types to fill, see _json_fast.py) and
 * decodes a batch of rows (one buffer + int32 offsets) into Arrow buffers: validity
 * bitmaps, int64 / float64 values, bit-packed booleans, int32 offsets and UTF-8 bytes.
 *
 * It accepts only what it can decode exactly as the codec's per-value path would:
 * strict RFC 8259 syntax, valid UTF-8, integers without fraction or exponent inside
 * the plan's range, and so on. A row it does not accept for any reason (a type
 * mismatch, a repeated key, an unknown field in a strict object, a key under the
 * reserved prefix, a lone surrogate, an exotic number) is rolled back and marked
 * "deferred"; the Python side decides those rows with the per-value path, which
 * either converts them or names what is wrong. A row that is no JSON at all -- cut
 * short, invalid UTF-8, not starting like a JSON value, content after the document,
 * empty -- is not deferred but rejected here, with the error and position orjson gives
 * for it, so a flood of broken rows costs one pass and no per-row Python parse.
 * Required fields are not checked here: a missing or null value is a null, found
 * afterwards by the same columnar check the codec applies to every batch. Inside the
 * values of a map or the items of a large list, which that check does not walk, a
 * missing or null value defers the row.
 *
 * The parse runs without the GIL, so worker threads decode in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif

#include "_body_offsets.h"

enum Kind { K_NULL = 0, K_BOOL, K_INT, K_FLOAT, K_STRING, K_LIST, K_STRUCT, K_MAP };

#define MAX_DEPTH 512
#define MAX_NUMBER 64

/* ------------------------------------------------------------------ plan */

typedef struct Node {
    int kind;
    int id;               /* index of this node's column state */
    int64_t imin, imax;   /* K_INT */
    int strict;           /* K_STRUCT: unknown fields defer the row */
    int top;              /* K_STRUCT: the document itself (reserved-prefix check) */
    int unchecked;        /* inside a map's values or an unchecked list's items: a null
                             here defers the row */
    Py_ssize_t nfields;   /* K_STRUCT */
    char **names;
    Py_ssize_t *name_lens;
    unsigned char *plain;   /* K_STRUCT: the name has no quote, backslash or control
                               byte, so a key is that name exactly when its bytes are */
    struct Node **children; /* K_STRUCT fields; K_LIST / K_MAP: children[0] = item */
    struct Node *keys;      /* K_MAP: the key column (K_STRING) */
} Node;

static void node_free(Node *n) {
    if (n == NULL) return;
    Py_ssize_t nchild = n->kind == K_STRUCT ? n->nfields : (n->kind == K_LIST || n->kind == K_MAP);
    if (n->children) {
        for (Py_ssize_t i = 0; i < nchild; i++) node_free(n->children[i]);
        PyMem_Free(n->children);
    }
    if (n->names) {
        for (Py_ssize_t i = 0; i < n->nfields; i++) PyMem_Free(n->names[i]);
        PyMem_Free(n->names);
    }
    PyMem_Free(n->name_lens);
    PyMem_Free(n->plain);
    node_free(n->keys);
    PyMem_Free(n);
}

static Node *node_new(int kind, int *count) {
    Node *n = PyMem_Calloc(1, sizeof(Node));
    if (n == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    n->kind = kind;
    n->id = (*count)++;
    return n;
}

static Node *plan_parse(PyObject *plan, int *count, int depth, int unchecked) {
    if (depth > 64) {
        PyErr_SetString(PyExc_ValueError, "json plan nests too deeply");
        return NULL;
    }
    if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) < 1) {
        PyErr_SetString(PyExc_TypeError, "json plan node must be a non-empty tuple");
        return NULL;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(plan, 0));
    if (kind == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t size = PyTuple_GET_SIZE(plan);
    Node *n = NULL;
    switch (kind) {
    case K_NULL:
    case K_BOOL:
    case K_FLOAT:
    case K_STRING:
        n = node_new((int)kind, count);
        if (n != NULL) n->unchecked = unchecked;
        return n;
    case K_INT: {
        if (size != 3) break;
        n = node_new(K_INT, count);
        if (n == NULL) return NULL;
        n->unchecked = unchecked;
        n->imin = PyLong_AsLongLong(PyTuple_GET_ITEM(plan, 1));
        n->imax = PyLong_AsLongLong(PyTuple_GET_ITEM(plan, 2));
        if (PyErr_Occurred()) goto fail;
        return n;
    }
    case K_LIST:
    case K_MAP: {
        /* (K_LIST, item[, unchecked]) / (K_MAP, item) */
        if (size != 2 && !(kind == K_LIST && size == 3)) break;
        int below = unchecked || kind == K_MAP;
        if (size == 3) {
            int flag = PyObject_IsTrue(PyTuple_GET_ITEM(plan, 2));
            if (flag < 0) return NULL;
            below = below || flag;
        }
        n = node_new((int)kind, count);
        if (n == NULL) return NULL;
        n->unchecked = unchecked;
        if (kind == K_MAP) {
            n->keys = node_new(K_STRING, count);
            if (n->keys == NULL) goto fail;
        }
        n->children = PyMem_Calloc(1, sizeof(Node *));
        if (n->children == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        n->children[0] =
            plan_parse(PyTuple_GET_ITEM(plan, 1), count, depth + 1, below);
        if (n->children[0] == NULL) goto fail;
        return n;
    }
    case K_STRUCT: {
        if (size != 5) break;
        PyObject *names = PyTuple_GET_ITEM(plan, 3);
        PyObject *children = PyTuple_GET_ITEM(plan, 4);
        if (!PyTuple_Check(names) || !PyTuple_Check(children) ||
            PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(children)) {
            PyErr_SetString(PyExc_TypeError, "json plan struct: names and children differ");
            return NULL;
        }
        n = node_new(K_STRUCT, count);
        if (n == NULL) return NULL;
        n->unchecked = unchecked;
        n->strict = PyObject_IsTrue(PyTuple_GET_ITEM(plan, 1));
        n->top = PyObject_IsTrue(PyTuple_GET_ITEM(plan, 2));
        if (n->strict < 0 || n->top < 0) goto fail;
        n->nfields = PyTuple_GET_SIZE(names);
        Py_ssize_t k = n->nfields ? n->nfields : 1;
        n->names = PyMem_Calloc(k, sizeof(char *));
        n->name_lens = PyMem_Calloc(k, sizeof(Py_ssize_t));
        n->children = PyMem_Calloc(k, sizeof(Node *));
        n->plain = PyMem_Calloc(k, 1);
        if (!n->names || !n->name_lens || !n->children || !n->plain) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n->nfields; i++) {
            char *s;
            Py_ssize_t len;
            if (PyBytes_AsStringAndSize(PyTuple_GET_ITEM(names, i), &s, &len) < 0) goto fail;
            n->names[i] = PyMem_Malloc(len + 1);
            if (n->names[i] == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            memcpy(n->names[i], s, len + 1);
            n->name_lens[i] = len;
            n->plain[i] = 1;
            for (Py_ssize_t j = 0; j < len; j++) {
                unsigned char ch = (unsigned char)s[j];
                if (ch == '"' || ch == '\\' || ch < 0x20) n->plain[i] = 0;
            }
        }
        for (Py_ssize_t i = 0; i < n->nfields; i++) {
            n->children[i] = plan_parse(PyTuple_GET_ITEM(children, i), count, depth + 1, unchecked);
            if (n->children[i] == NULL) goto fail;
        }
        return n;
    }
    default:
        break;
    }
    PyErr_Format(PyExc_ValueError, "json plan: bad node of kind %ld", kind);
fail:
    node_free(n);
    return NULL;
}

/* ------------------------------------------------------------------ column state */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

typedef struct {
    int64_t length, nulls;
    Buf valid; /* bitmap, one bit per value */
    Buf data;  /* int64 / double / bit-packed bool / UTF-8 bytes */
    Buf offs;  /* int32 offsets (string, list, map); starts with 0 */
    unsigned char *seen; /* K_STRUCT scratch: fields met in the current object */
} Col;

typedef struct {
    int64_t length, nulls;
    size_t data, offs;
} Mark;

static int buf_reserve(Buf *b, size_t extra) {
    size_t need = b->len + extra;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    /* Not zeroed: untouched capacity costs no memory until written. */
    char *p = realloc(b->p, cap);
    if (p == NULL) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Error codes of the parse: DEFER sets the row aside; NOMEM and TOOBIG stop the batch;
   EOD (the document ends where a value, a bracket or more of a token is due) and
   BADTEXT (bytes that are not UTF-8 inside a string) reject the row as malformed. */
enum { OK = 0, DEFER = 1, NOMEM = 2, TOOBIG = 3, EOD = 4, BADTEXT = 5 };

/* A row's status, as returned: OK (read), DEFER (set aside for the per-value path), or
   one of these rejects, each the syntax error the per-value path (orjson) reports for
   the row, at the position returned beside it. */
enum { S_EOD = EOD, S_UTF8 = BADTEXT, S_START = 6, S_AFTER = 7, S_EMPTY = 8, S_BLANK = 9 };

static int set_bit(Buf *b, int64_t i, int on) {
    size_t byte = (size_t)(i >> 3);
    if (byte >= b->len) {
        if (buf_reserve(b, byte + 1 - b->len)) return NOMEM;
        memset(b->p + b->len, 0, byte + 1 - b->len);
        b->len = byte + 1;
    }
    unsigned char mask = (unsigned char)(1u << (i & 7));
    if (on)
        b->p[byte] |= mask;
    else
        b->p[byte] &= (unsigned char)~mask;
    return OK;
}

static int push_offset(Buf *offs, size_t value) {
    if (value > INT32_MAX) return TOOBIG;
    if (buf_reserve(offs, 4)) return NOMEM;
    int32_t v = (int32_t)value;
    memcpy(offs->p + offs->len, &v, 4);
    offs->len += 4;
    return OK;
}

/* One more slot in a column: its validity bit, and for fixed-width kinds its value
   bytes (zero for a null). Variable-width kinds push their end offset themselves.
   The validity bitmap is written only once the column holds a null (a column without
   one exports none): its first null, again after a rollback took every null back,
   marks each earlier slot valid first. */
static int col_append(const Node *n, Col *c, int valid) {
    (void)n;
    int rc;
    if (c->nulls == 0) {
        if (valid) {
            c->length++;
            return OK;
        }
        size_t full = (size_t)(c->length / 8);
        if (c->valid.len < full) {
            if (buf_reserve(&c->valid, full - c->valid.len)) return NOMEM;
            c->valid.len = full;
        }
        if (full) memset(c->valid.p, 0xFF, full);
        for (int64_t i = (int64_t)full * 8; i < c->length; i++)
            if ((rc = set_bit(&c->valid, i, 1))) return rc;
    }
    if ((rc = set_bit(&c->valid, c->length, valid))) return rc;
    if (!valid) c->nulls++;
    c->length++;
    return OK;
}

/* ------------------------------------------------------------------ parser */

typedef struct {
    const unsigned char *p, *end;
    Col *cols;
    const char *prefix;
    size_t prefix_len;
    int depth;
#if defined(_WIN32)
    _locale_t c_locale;
#else
    locale_t c_locale;
#endif
} Parser;

static inline void skip_ws(Parser *ps) {
    while (ps->p < ps->end) {
        unsigned char ch = *ps->p;
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
            ps->p++;
        else
            break;
    }
}

static int literal(Parser *ps, const char *word, size_t len) {
    size_t avail = (size_t)(ps->end - ps->p);
    if (avail < len) return memcmp(ps->p, word, avail) == 0 ? EOD : DEFER;
    if (memcmp(ps->p, word, len) != 0) return DEFER;
    ps->p += len;
    return OK;
}

/* The length of a valid UTF-8 sequence at p (lead byte >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    size_t avail = (size_t)(end - p);
    if (c >= 0xC2 && c <= 0xDF) {
        return (avail >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && p[1] > 0x9F) return 0; /* UTF-16 surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && p[1] > 0x8F) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

/* Whether [p, end), shorter than six bytes, begins a \uXXXX escape: the document ends
   inside it. */
static int partial_u(const unsigned char *p, const unsigned char *end) {
    for (const unsigned char *q = p; q < end; q++) {
        size_t i = (size_t)(q - p);
        unsigned char ch = *q;
        if (i == 0 ? ch != '\\' : i == 1 ? ch != 'u' : !((ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f'))) return 0;
    }
    return 1;
}

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9')
            v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F')
            v |= ch - 'A' + 10;
        else
            return DEFER;
    }
    *out = v;
    return OK;
}

/* A JSON string at ps->p (after the opening quote has been checked), decoded into out
   (when out is not NULL). On return ps->p is past the closing quote. */
static int parse_string(Parser *ps, Buf *out) {
    const unsigned char *p = ps->p + 1, *end = ps->end;
    for (;;) {
        const unsigned char *run = p;
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80) p++;
        if (out && p > run) {
            if (buf_reserve(out, (size_t)(p - run))) return NOMEM;
            memcpy(out->p + out->len, run, (size_t)(p - run));
            out->len += (size_t)(p - run);
        }
        if (p >= end) return EOD;
        unsigned char ch = *p;
        if (ch == '"') {
            ps->p = p + 1;
            return OK;
        }
        if (ch < 0x20) return DEFER; /* a raw control character: not JSON */
        if (ch >= 0x80) {
            size_t k = utf8_len(p, end);
            if (k == 0) return BADTEXT;
            if (out) {
                if (buf_reserve(out, k)) return NOMEM;
                memcpy(out->p + out->len, p, k);
                out->len += k;
            }
            p += k;
            continue;
        }
        /* a backslash */
        if (p + 1 >= end) return EOD;
        unsigned char esc = p[1];
        char one;
        switch (esc) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u': {
            unsigned cp;
            if (end - p < 6) return partial_u(p, end) ? EOD : DEFER;
            if (hex4(p + 2, &cp)) return DEFER;
            p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return DEFER; /* lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p < 6 && partial_u(p, end)) return EOD;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return DEFER; /* lone high surrogate */
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (out) {
                unsigned char enc[4];
                size_t k;
                if (cp < 0x80) {
                    enc[0] = (unsigned char)cp;
                    k = 1;
                } else if (cp < 0x800) {
                    enc[0] = (unsigned char)(0xC0 | (cp >> 6));
                    enc[1] = (unsigned char)(0x80 | (cp & 0x3F));
                    k = 2;
                } else if (cp < 0x10000) {
                    enc[0] = (unsigned char)(0xE0 | (cp >> 12));
                    enc[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    enc[2] = (unsigned char)(0x80 | (cp & 0x3F));
                    k = 3;
                } else {
                    enc[0] = (unsigned char)(0xF0 | (cp >> 18));
                    enc[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                    enc[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    enc[3] = (unsigned char)(0x80 | (cp & 0x3F));
                    k = 4;
                }
                if (buf_reserve(out, k)) return NOMEM;
                memcpy(out->p + out->len, enc, k);
                out->len += k;
            }
            continue;
        }
        default:
            return DEFER;
        }
        if (out) {
            if (buf_reserve(out, 1)) return NOMEM;
            out->p[out->len++] = one;
        }
        p += 2;
    }
}

typedef struct {
    const unsigned char *start;
    size_t len;
    int integral; /* no fraction, no exponent */
    int exponent; /* an exponent part */
} Number;

/* A number token with RFC 8259 grammar. */
static int scan_number(Parser *ps, Number *num) {
    const unsigned char *p = ps->p, *end = ps->end;
    num->start = p;
    num->integral = 1;
    num->exponent = 0;
    if (p < end && *p == '-') p++;
    if (p >= end) return EOD;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return DEFER;
    }
    if (p < end && *p == '.') {
        num->integral = 0;
        p++;
        if (p >= end) return EOD;
        if (*p < '0' || *p > '9') return DEFER;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        num->integral = 0;
        num->exponent = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end) return EOD;
        if (*p < '0' || *p > '9') return DEFER;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    num->len = (size_t)(p - num->start);
    ps->p = p;
    return OK;
}

/* An integral token as int64: at most 18 digits, so it cannot overflow. */
static int number_int(const Number *num, int64_t *out) {
    const unsigned char *p = num->start, *end = num->start + num->len;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (end - p > 18) return DEFER;
    int64_t v = 0;
    for (; p < end; p++) v = v * 10 + (*p - '0');
    *out = neg ? -v : v;
    return OK;
}

/* Powers of ten that a double holds exactly (5^22 < 2^53). */
static const double EXACT_POW10[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* A decimal without an exponent whose digits fit 2^53 and with at most 22 fraction
   digits, as m / 10^k: both operands are exact doubles and IEEE 754 division rounds the
   exact quotient once, so the result is the correctly rounded value strtod returns
   (Clinger's fast path), without strtod's per-call set-up (~0.1 us of a plain order's
   three prices). Returns 0 when the token is not such a decimal. */
static int number_fast_double(const Number *num, double *out) {
    if (num->exponent) return 0;
    const unsigned char *p = num->start, *end = num->start + num->len;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    uint64_t m = 0;
    int digits = 0, fraction = -1;
    for (; p < end; p++) {
        if (*p == '.') {
            fraction = 0;
            continue;
        }
        if (m != 0 || *p != '0') digits++; /* leading zeros add no significant digit */
        if (digits > 15) return 0;          /* 10^15 < 2^53: m stays exact */
        m = m * 10 + (uint64_t)(*p - '0');
        if (fraction >= 0) fraction++;
    }
    if (fraction < 0 || fraction > 22) return 0;
    double v = (double)m / EXACT_POW10[fraction];
    *out = neg ? -v : v;
    return 1;
}

static int number_double(Parser *ps, const Number *num, double *out) {
    if (num->integral) {
        /* The per-value path reads an integer as a Python int and converts it:
           correctly rounded, and -0 is 0.0. */
        int64_t v;
        if (number_int(num, &v)) return DEFER;
        *out = (double)v;
        return OK;
    }
    if (number_fast_double(num, out)) return OK;
    if (num->len >= MAX_NUMBER) return DEFER;
    char text[MAX_NUMBER];
    memcpy(text, num->start, num->len);
    text[num->len] = '\0';
    char *stop;
#if defined(_WIN32)
    double v = _strtod_l(text, &stop, ps->c_locale);
#else
    double v = strtod_l(text, &stop, ps->c_locale);
#endif
    if (stop != text + num->len || isinf(v)) return DEFER;
    if (v == 0.0) {
        /* An underflow to zero: the per-value path decides. */
        for (size_t i = 0; i < num->len; i++) {
            unsigned char ch = text[i];
            if (ch == 'e' || ch == 'E') break;
            if (ch >= '1' && ch <= '9') return DEFER;
        }
    }
    *out = v;
    return OK;
}

/* A number outside the schema still has to be one the per-value path reads: orjson
   refuses any number that overflows a double, wherever it stands. Without an exponent
   a token shorter than MAX_NUMBER is far below that; others are parsed to see. */
static int number_finite(Parser *ps, const Number *num) {
    if (num->len >= MAX_NUMBER) return DEFER;
    if (!num->exponent) return OK;
    char text[MAX_NUMBER];
    memcpy(text, num->start, num->len);
    text[num->len] = '\0';
#if defined(_WIN32)
    double v = _strtod_l(text, NULL, ps->c_locale);
#else
    double v = strtod_l(text, NULL, ps->c_locale);
#endif
    return isinf(v) ? DEFER : OK;
}

/* After a member of an array or object: a comma (OK, more follow) or the closing
   bracket (CLOSED, consumed); anything else defers the row. */
enum { CLOSED = -1 };

/* Past any whitespace, ps->p at `ch`, not consumed: OK; else EOD at the end of the row,
   DEFER at another character. */
static inline int at_char(Parser *ps, unsigned char ch) {
    skip_ws(ps);
    if (ps->p >= ps->end) return EOD;
    return *ps->p == ch ? OK : DEFER;
}

static int after_member(Parser *ps, unsigned char close) {
    skip_ws(ps);
    if (ps->p >= ps->end) return EOD;
    if (*ps->p == ',') {
        ps->p++;
        return OK;
    }
    if (*ps->p == close) {
        ps->p++;
        return CLOSED;
    }
    return DEFER;
}

/* Into an array or object whose opening bracket is at ps->p: CLOSED when it is empty
   (the closing bracket consumed), OK when members follow, DEFER when too deep. */
static int enter(Parser *ps, unsigned char close) {
    if (++ps->depth > MAX_DEPTH) return DEFER;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return CLOSED;
    }
    return OK;
}

static int skip_value(Parser *ps);

static int skip_container(Parser *ps, unsigned char close) {
    int opened = enter(ps, close);
    if (opened == CLOSED) {
        ps->depth--;
        return OK;
    }
    if (opened) return opened;
    for (;;) {
        int rc;
        if (close == '}') {
            if ((rc = at_char(ps, '"'))) return rc;
            if ((rc = parse_string(ps, NULL))) return rc;
            if ((rc = at_char(ps, ':'))) return rc;
            ps->p++;
        }
        if ((rc = skip_value(ps))) return rc;
        if ((rc = after_member(ps, close)) == CLOSED) {
            ps->depth--;
            return OK;
        }
        if (rc) return rc;
    }
}

/* Any JSON value, checked and skipped (a field outside the schema). */
static int skip_value(Parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) return EOD;
    switch (*ps->p) {
    case '{': return skip_container(ps, '}');
    case '[': return skip_container(ps, ']');
    case '"': return parse_string(ps, NULL);
    case 't': return literal(ps, "true", 4);
    case 'f': return literal(ps, "false", 5);
    case 'n': return literal(ps, "null", 4);
    default: {
        Number num;
        int rc = scan_number(ps, &num);
        return rc ? rc : number_finite(ps, &num);
    }
    }
}

static int parse_value(Parser *ps, const Node *n);

static int append_null(Parser *ps, const Node *n);

static int parse_struct(Parser *ps, const Node *n) {
    Col *c = &ps->cols[n->id];
    if (n->nfields) memset(c->seen, 0, (size_t)n->nfields);
    Py_ssize_t next = 0; /* fields usually come in schema order */
    int rc = enter(ps, '}');
    if (rc == DEFER) return rc;
    if (rc != CLOSED) {
        for (;;) {
            if ((rc = at_char(ps, '"'))) return rc;
            const unsigned char *key = ps->p + 1, *q = key;
            size_t klen;
            Py_ssize_t field = -1;
            if (next < n->nfields && n->plain[next] &&
                (size_t)(ps->end - key) > (size_t)n->name_lens[next] &&
                key[n->name_lens[next]] == '"' &&
                memcmp(n->names[next], key, (size_t)n->name_lens[next]) == 0) {
                /* The expected field: its name's bytes, then a quote. The scan below
                   would stop at that quote and find the same name. */
                field = next;
                klen = (size_t)n->name_lens[next];
                q = key + klen;
            } else {
                while (q < ps->end && *q != '"' && *q != '\\' && *q >= 0x20) q++;
                if (q >= ps->end) return EOD; /* its bytes are checked as UTF-8 at the top */
                if (*q != '"') return DEFER;  /* escapes in keys: per value */
                klen = (size_t)(q - key);
                for (Py_ssize_t i = 0; i < n->nfields; i++) {
                    if ((size_t)n->name_lens[i] == klen && memcmp(n->names[i], key, klen) == 0) {
                        field = i;
                        break;
                    }
                }
            }
            if (field < 0) {
                if (n->strict) return DEFER;
                if (n->top && klen >= ps->prefix_len &&
                    memcmp(key, ps->prefix, ps->prefix_len) == 0)
                    return DEFER;
                /* the key's bytes still have to be valid UTF-8 */
                if ((rc = parse_string(ps, NULL))) return rc;
            } else {
                if (c->seen[field]) return DEFER; /* a repeated key: per value */
                c->seen[field] = 1;
                next = field + 1;
                ps->p = q + 1; /* equal to a name, so valid UTF-8 */
            }
            if ((rc = at_char(ps, ':'))) return rc;
            ps->p++;
            if (field < 0) {
                if ((rc = skip_value(ps))) return rc;
            } else {
                if ((rc = parse_value(ps, n->children[field]))) return rc;
            }
            if ((rc = after_member(ps, '}')) == CLOSED) break;
            if (rc) return rc;
        }
    }
    for (Py_ssize_t i = 0; i < n->nfields; i++) {
        if (c->seen[i]) continue;
        if (n->children[i]->unchecked) return DEFER; /* see parse_value */
        if ((rc = append_null(ps, n->children[i]))) return rc;
    }
    ps->depth--;
    return col_append(n, c, 1);
}

static int parse_list(Parser *ps, const Node *n) {
    Col *c = &ps->cols[n->id];
    const Node *item = n->children[0];
    int rc = enter(ps, ']');
    if (rc == DEFER) return rc;
    if (rc != CLOSED) {
        for (;;) {
            if ((rc = parse_value(ps, item))) return rc;
            if ((rc = after_member(ps, ']')) == CLOSED) break;
            if (rc) return rc;
        }
    }
    ps->depth--;
    if ((rc = push_offset(&c->offs, (size_t)ps->cols[item->id].length))) return rc;
    return col_append(n, c, 1);
}

/* Repeated keys of one map: the first MAP_SCAN keys are compared pairwise as they
   come; a larger map has all its keys sorted once it is closed, so that a map of many
   keys costs n log n whatever its keys. */
#define MAP_SCAN 16

typedef struct {
    const char *p;
    size_t len;
} Key;

static int key_cmp(const void *a, const void *b) {
    const Key *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->len ? memcmp(x->p, y->p, x->len) : 0;
}

/* DEFER when two of the keys first..kc->length-1 are equal. */
static int keys_distinct(const Col *kc, int64_t first) {
    size_t count = (size_t)(kc->length - first);
    Key *keys = malloc(count * sizeof(Key));
    if (keys == NULL) return NOMEM;
    const int32_t *ko = (const int32_t *)kc->offs.p;
    for (size_t i = 0; i < count; i++) {
        int64_t j = first + (int64_t)i;
        keys[i].p = kc->data.p + ko[j];
        keys[i].len = (size_t)(ko[j + 1] - ko[j]);
    }
    qsort(keys, count, sizeof(Key), key_cmp);
    int rc = OK;
    for (size_t i = 1; i < count && rc == OK; i++)
        if (key_cmp(&keys[i - 1], &keys[i]) == 0) rc = DEFER;
    free(keys);
    return rc;
}

static int parse_map(Parser *ps, const Node *n) {
    Col *c = &ps->cols[n->id];
    Col *kc = &ps->cols[n->keys->id];
    const Node *item = n->children[0];
    int64_t first = kc->length;
    int rc = enter(ps, '}');
    if (rc == DEFER) return rc;
    if (rc != CLOSED) {
        for (;;) {
            if ((rc = at_char(ps, '"'))) return rc;
            if ((rc = parse_value(ps, n->keys))) return rc;
            /* A repeated key: the per-value path keeps the last value at the first
               key's place, which this layout cannot express cheaply. */
            int64_t last = kc->length - 1;
            if (last - first < MAP_SCAN) {
                const int32_t *ko = (const int32_t *)kc->offs.p;
                size_t klen = (size_t)(ko[last + 1] - ko[last]);
                for (int64_t j = first; j < last; j++) {
                    if ((size_t)(ko[j + 1] - ko[j]) == klen &&
                        memcmp(kc->data.p + ko[j], kc->data.p + ko[last], klen) == 0)
                        return DEFER;
                }
            }
            if ((rc = at_char(ps, ':'))) return rc;
            ps->p++;
            if ((rc = parse_value(ps, item))) return rc;
            if ((rc = after_member(ps, '}')) == CLOSED) break;
            if (rc) return rc;
        }
        if (kc->length - first > MAP_SCAN && (rc = keys_distinct(kc, first))) return rc;
    }
    ps->depth--;
    if ((rc = push_offset(&c->offs, (size_t)kc->length))) return rc;
    return col_append(n, c, 1);
}

static int append_null(Parser *ps, const Node *n) {
    Col *c = &ps->cols[n->id];
    int rc;
    switch (n->kind) {
    case K_INT:
    case K_FLOAT:
        if (buf_reserve(&c->data, 8)) return NOMEM;
        memset(c->data.p + c->data.len, 0, 8);
        c->data.len += 8;
        break;
    case K_BOOL:
        if ((rc = set_bit(&c->data, c->length, 0))) return rc;
        break;
    case K_STRING:
        if ((rc = push_offset(&c->offs, c->data.len))) return rc;
        break;
    case K_LIST:
        if ((rc = push_offset(&c->offs, (size_t)ps->cols[n->children[0]->id].length))) return rc;
        break;
    case K_MAP:
        if ((rc = push_offset(&c->offs, (size_t)ps->cols[n->keys->id].length))) return rc;
        break;
    case K_STRUCT:
        /* A null struct still has one (null) slot in every child. */
        for (Py_ssize_t i = 0; i < n->nfields; i++)
            if ((rc = append_null(ps, n->children[i]))) return rc;
        break;
    default:
        break;
    }
    return col_append(n, c, 0);
}

static int parse_value(Parser *ps, const Node *n) {
    skip_ws(ps);
    if (ps->p >= ps->end) return EOD;
    unsigned char ch = *ps->p;
    if (ch == 'n') {
        int rc = literal(ps, "null", 4);
        if (rc) return rc;
        /* A null inside a map's values or a large list's items may break a required
           field or item, and the columnar required check does not walk those columns:
           the per-value path decides such rows. */
        if (n->unchecked) return DEFER;
        return append_null(ps, n);
    }
    Col *c = &ps->cols[n->id];
    int rc;
    switch (n->kind) {
    case K_BOOL: {
        int on;
        if (ch == 't') {
            if ((rc = literal(ps, "true", 4))) return rc;
            on = 1;
        } else if (ch == 'f') {
            if ((rc = literal(ps, "false", 5))) return rc;
            on = 0;
        } else {
            return DEFER;
        }
        if ((rc = set_bit(&c->data, c->length, on))) return rc;
        return col_append(n, c, 1);
    }
    case K_INT:
    case K_FLOAT: {
        if (ch != '-' && (ch < '0' || ch > '9')) return DEFER;
        Number num;
        if ((rc = scan_number(ps, &num))) return rc;
        if (buf_reserve(&c->data, 8)) return NOMEM;
        if (n->kind == K_INT) {
            int64_t v;
            if (!num.integral || number_int(&num, &v) || v < n->imin || v > n->imax)
                return DEFER;
            memcpy(c->data.p + c->data.len, &v, 8);
        } else {
            double v;
            if (number_double(ps, &num, &v)) return DEFER;
            memcpy(c->data.p + c->data.len, &v, 8);
        }
        c->data.len += 8;
        return col_append(n, c, 1);
    }
    case K_STRING:
        if (ch != '"') return DEFER;
        if ((rc = parse_string(ps, &c->data))) return rc;
        if ((rc = push_offset(&c->offs, c->data.len))) return rc;
        return col_append(n, c, 1);
    case K_LIST:
        return ch == '[' ? parse_list(ps, n) : DEFER;
    case K_STRUCT:
        return ch == '{' ? parse_struct(ps, n) : DEFER;
    case K_MAP:
        return ch == '{' ? parse_map(ps, n) : DEFER;
    default: /* K_NULL holds nothing but null */
        return DEFER;
    }
}

/* ------------------------------------------------------------------ rejects */

/* Whether [p, end) is valid UTF-8 (orjson checks a whole document before parsing). */
static int utf8_valid(const unsigned char *p, const unsigned char *end) {
    while (p < end) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t k = utf8_len(p, end);
        if (k == 0) return 0;
        p += k;
    }
    return 1;
}

/* Whether a document may start with ch as a JSON value other than an object. */
static int value_start(unsigned char ch) {
    return ch == '[' || ch == '"' || ch == '-' || (ch >= '0' && ch <= '9') || ch == 't' ||
           ch == 'f' || ch == 'n';
}

/* A rejected row's status and where the per-value path reports its error: line and
   column (both from 1) and the character (not byte) offset, as Python's JSONDecodeError
   counts them. at is where the error is (the end of the row for S_EOD). */
static unsigned char reject_at(int rc, const unsigned char *row, const unsigned char *end,
                               const unsigned char *at, int32_t *where) {
    where[0] = 1;
    where[1] = 1;
    where[2] = 0;
    if (rc == S_EMPTY || rc == S_BLANK) return (unsigned char)rc;
    if (rc == S_UTF8 || !utf8_valid(row, end)) return S_UTF8;
    int64_t chars = 0, newline = -1, line = 1;
    for (const unsigned char *q = row; q < at; q++) {
        if (*q == '\n') {
            newline = chars;
            line++;
        }
        if ((*q & 0xC0) != 0x80) chars++;
    }
    if (chars > INT32_MAX) chars = INT32_MAX; /* rows are under 2 GiB: never */
    where[0] = (int32_t)(line > INT32_MAX ? INT32_MAX : line);
    where[1] = (int32_t)(chars - newline);
    where[2] = (int32_t)chars;
    return (unsigned char)rc;
}

/* The whole row through the parser: OK, DEFER, a reject status (see reject_at), or
   NOMEM / TOOBIG. On return ps->p is where a reject other than S_EOD was found. */
static int parse_row(Parser *ps, const Node *root) {
    const unsigned char *row = ps->p;
    skip_ws(ps);
    if (ps->p >= ps->end) return ps->end == row ? S_EMPTY : S_BLANK;
    int rc;
    if (*ps->p == '{') {
        rc = parse_struct(ps, root);
    } else if (value_start(*ps->p)) {
        /* Not an object: a schema mismatch for the per-value path, unless it is no
           JSON at all (cut short, or an array or string with more after it). */
        unsigned char first = *ps->p;
        rc = skip_value(ps);
        if (rc != OK) return rc;
        skip_ws(ps);
        if (ps->p < ps->end && (first == '[' || first == '"')) return S_AFTER;
        return DEFER;
    } else if (*ps->p == 0xEF) {
        return DEFER; /* maybe a byte order mark, which orjson names as such */
    } else if (*ps->p == '.' || *ps->p == '+') {
        return DEFER; /* orjson reads these as a number's start ("no digit after sign") */
    } else {
        return S_START;
    }
    if (rc == OK) {
        skip_ws(ps);
        if (ps->p != ps->end) rc = S_AFTER;
    }
    return rc;
}

/* ------------------------------------------------------------------ marks (rollback) */

static void mark_take(const Col *cols, Mark *marks, int count) {
    for (int i = 0; i < count; i++) {
        marks[i].length = cols[i].length;
        marks[i].nulls = cols[i].nulls;
        marks[i].data = cols[i].data.len;
        marks[i].offs = cols[i].offs.len;
    }
}

static void mark_restore(Col *cols, const Mark *marks, int count) {
    for (int i = 0; i < count; i++) {
        cols[i].length = marks[i].length;
        cols[i].nulls = marks[i].nulls;
        cols[i].data.len = marks[i].data;
        cols[i].offs.len = marks[i].offs;
        /* bitmaps are rewritten bit by bit; their byte length may stay longer */
    }
}

/* ------------------------------------------------------------------ the Decoder type */

typedef struct {
    PyObject_HEAD
    Node *root;
    int count;
    char *prefix;
    Py_ssize_t prefix_len;
} Decoder;

static void Decoder_dealloc(Decoder *self) {
    node_free(self->root);
    PyMem_Free(self->prefix);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Decoder_init(Decoder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"plan", "prefix", NULL};
    PyObject *plan;
    const char *prefix;
    Py_ssize_t prefix_len;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oy#", kwlist, &plan, &prefix, &prefix_len))
        return -1;
    if (self->root != NULL) {
        /* another thread may be decoding with this plan without the GIL */
        PyErr_SetString(PyExc_RuntimeError, "json Decoder: already initialised");
        return -1;
    }
    int count = 0;
    Node *root = plan_parse(plan, &count, 0, 0);
    if (root == NULL) return -1;
    if (root->kind != K_STRUCT) {
        node_free(root);
        PyErr_SetString(PyExc_ValueError, "json plan: the document must be a struct");
        return -1;
    }
    char *copy = PyMem_Malloc(prefix_len + 1);
    if (copy == NULL) {
        node_free(root);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, prefix, prefix_len + 1);
    node_free(self->root);
    PyMem_Free(self->prefix);
    self->root = root;
    self->count = count;
    self->prefix = copy;
    self->prefix_len = prefix_len;
    return 0;
}

static void cols_free(Col *cols, int count) {
    if (cols == NULL) return;
    for (int i = 0; i < count; i++) {
        free(cols[i].valid.p);
        free(cols[i].data.p);
        free(cols[i].offs.p);
        free(cols[i].seen);
    }
    free(cols);
}

static int cols_init(const Node *n, Col *cols) {
    Col *c = &cols[n->id];
    if (n->kind == K_STRING || n->kind == K_LIST || n->kind == K_MAP) {
        if (push_offset(&c->offs, 0)) return -1;
    }
    if (n->kind == K_STRUCT) {
        c->seen = calloc(n->nfields ? (size_t)n->nfields : 1, 1);
        if (c->seen == NULL) return -1;
        for (Py_ssize_t i = 0; i < n->nfields; i++)
            if (cols_init(n->children[i], cols)) return -1;
    }
    if (n->kind == K_LIST || n->kind == K_MAP) {
        if (cols_init(n->children[0], cols)) return -1;
    }
    if (n->kind == K_MAP && cols_init(n->keys, cols)) return -1;
    return 0;
}

/* A read-only buffer over memory the reader allocated: the arrays of a batch use it
   without a copy, and it is freed when the last of them goes. */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len;
} Block;

static void Block_dealloc(Block *self) {
    free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Block_getbuffer(Block *self, Py_buffer *view, int flags) {
    static char empty[1];
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p ? self->p : empty, self->len, 1,
                             flags);
}

static PyBufferProcs Block_as_buffer = {.bf_getbuffer = (getbufferproc)Block_getbuffer};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "thalweg_bytewax.codecs._json_native.Block",
    .tp_basicsize = sizeof(Block),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory of one Arrow buffer filled by the JSON reader.",
    .tp_dealloc = (destructor)Block_dealloc,
    .tp_as_buffer = &Block_as_buffer,
};

/* The first len bytes of b as a Block; b gives up its memory. */
static PyObject *take_block(Buf *b, size_t len) {
    Block *block = PyObject_New(Block, &BlockType);
    if (block == NULL) return NULL;
    block->p = b->p;
    block->len = (Py_ssize_t)len;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)block;
}

/* take_block(b, len) when the column has this buffer, else a new reference to None. */
static PyObject *take_block_if(int present, Buf *b, size_t len) {
    if (present) return take_block(b, len);
    Py_INCREF(Py_None);
    return Py_None;
}

/* (length, null_count, validity | None, data | None, offsets | None, children) */
static PyObject *col_export(const Node *n, Col *cols) {
    Col *c = &cols[n->id];
    PyObject *valid = NULL, *data = NULL, *offs = NULL, *children = NULL;
    size_t bits = (size_t)((c->length + 7) / 8);
    valid = take_block_if(c->nulls != 0, &c->valid, bits);
    if (valid == NULL) goto fail;
    data = take_block_if(n->kind == K_INT || n->kind == K_FLOAT || n->kind == K_STRING ||
                             n->kind == K_BOOL,
                         &c->data, n->kind == K_BOOL ? bits : c->data.len);
    if (data == NULL) goto fail;
    offs = take_block_if(n->kind == K_STRING || n->kind == K_LIST || n->kind == K_MAP, &c->offs,
                         c->offs.len);
    if (offs == NULL) goto fail;
    Py_ssize_t nchild = n->kind == K_STRUCT ? n->nfields : (n->kind == K_LIST ? 1 : n->kind == K_MAP ? 2 : 0);
    children = PyTuple_New(nchild);
    if (children == NULL) goto fail;
    for (Py_ssize_t i = 0; i < nchild; i++) {
        const Node *child = n->kind == K_MAP ? (i == 0 ? n->keys : n->children[0]) : n->children[i];
        PyObject *sub = col_export(child, cols);
        if (sub == NULL) goto fail;
        PyTuple_SET_ITEM(children, i, sub);
    }
    return Py_BuildValue("(LLNNNN)", (long long)c->length, (long long)c->nulls, valid, data, offs,
                         children);
fail:
    Py_XDECREF(valid);
    Py_XDECREF(data);
    Py_XDECREF(offs);
    Py_XDECREF(children);
    return NULL;
}

static PyObject *Decoder_decode(Decoder *self, PyObject *args) {
    Py_buffer data, offsets;
    if (self->root == NULL) {
        PyErr_SetString(PyExc_ValueError, "json decoder has no plan (Decoder.__init__ not run)");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*y*", &data, &offsets)) return NULL;
    PyObject *result = NULL, *status = NULL, *where = NULL;
    Col *cols = NULL;
    Mark *marks = NULL;
    Py_ssize_t n = body_count(&offsets, data.len);
    if (n < 0) goto done;
    const int32_t *off = (const int32_t *)offsets.buf;
    status = PyBytes_FromStringAndSize(NULL, n);
    if (status == NULL) goto done;
    unsigned char *st = (unsigned char *)PyBytes_AS_STRING(status);
    /* Per row: line, column and character of a reject (int32 each), else zeros. */
    where = PyBytes_FromStringAndSize(NULL, n * 3 * (Py_ssize_t)sizeof(int32_t));
    if (where == NULL) goto done;
    int32_t *wh = (int32_t *)PyBytes_AS_STRING(where);
    memset(wh, 0, (size_t)n * 3 * sizeof(int32_t));
    cols = calloc((size_t)self->count, sizeof(Col));
    marks = calloc((size_t)self->count, sizeof(Mark));
    if (cols == NULL || marks == NULL || cols_init(self->root, cols)) {
        PyErr_NoMemory();
        goto done;
    }
    Parser ps;
    memset(&ps, 0, sizeof(ps));
    ps.cols = cols;
    ps.prefix = self->prefix;
    ps.prefix_len = (size_t)self->prefix_len;
#if defined(_WIN32)
    ps.c_locale = _create_locale(LC_NUMERIC, "C");
#else
    ps.c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
#endif
    if (!ps.c_locale) {
        PyErr_SetString(PyExc_OSError, "cannot create the C numeric locale");
        goto done;
    }
    int fatal = OK;
    Py_BEGIN_ALLOW_THREADS
    const unsigned char *base = (const unsigned char *)data.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        mark_take(cols, marks, self->count);
        ps.p = base + off[i];
        ps.end = base + off[i + 1];
        ps.depth = 0;
        int rc = parse_row(&ps, self->root);
        if (rc == NOMEM || rc == TOOBIG) {
            fatal = rc;
            break;
        }
        if (rc != OK) mark_restore(cols, marks, self->count);
        if (rc >= EOD) {
            const unsigned char *row = base + off[i], *end = base + off[i + 1];
            rc = reject_at(rc, row, end, rc == S_EOD ? end : ps.p, wh + 3 * i);
        }
        st[i] = (unsigned char)rc;
    }
    Py_END_ALLOW_THREADS
#if defined(_WIN32)
    _free_locale(ps.c_locale);
#else
    freelocale(ps.c_locale);
#endif
    if (fatal == NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (fatal == TOOBIG) {
        PyErr_SetString(PyExc_OverflowError, "json batch holds over 2 GiB of one column");
        goto done;
    }
    PyObject *tree = col_export(self->root, cols);
    if (tree == NULL) goto done;
    result = Py_BuildValue("(OON)", status, where, tree);
done:
    Py_XDECREF(status);
    Py_XDECREF(where);
    cols_free(cols, self->count);
    free(marks);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return result;
}

static PyMethodDef Decoder_methods[] = {
    {"decode", (PyCFunction)Decoder_decode, METH_VARARGS,
     "decode(data, offsets) -> (status, where, tree)\n\n"
     "Decode the rows data[offsets[i]:offsets[i+1]]. status[i] is 0 for a row in the\n"
     "tree, 1 for a row set aside for the per-value path, and 4..9 for a row that is\n"
     "no JSON document (the syntax error orjson reports: end of data, invalid UTF-8,\n"
     "unexpected character, content after the document, empty, blank); where holds\n"
     "its line, column and character offset (int32 each, three per row). The tree\n"
     "holds one (length, null_count, validity, data, offsets, children) tuple per\n"
     "plan node."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "thalweg_bytewax.codecs._json_native.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Decoder(plan, prefix): JSON documents to Arrow buffers for one schema.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Decoder_init,
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_methods = Decoder_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "thalweg_bytewax.codecs._json_native",
    .m_doc = "JSON documents to Arrow buffers (the columnar core of JsonCodec).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__json_native(void) {
    if (PyType_Ready(&BlockType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    /* Decoder is readied and added under its short name; Block is never constructed
     * from Python */
    if (PyModule_AddType(m, &DecoderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
