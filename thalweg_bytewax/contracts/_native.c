/*
 * Row JSON over Arrow buffers: one JSON object per selected row of a batch.
 *
 * Private to thalweg_bytewax.contracts.row_json, which describes the batch as a tree
 * of plan nodes (kind, buffer addresses, offsets) and keeps the arrays alive while
 * this runs. The text is the one row_json's column-wise path writes (orjson's text of
 * the row as to_pylist gives it, NaN and infinities spelled, decimals as text, bytes
 * as hex); columns whose type has no spelling here arrive as RAW nodes, fragments
 * already rendered by that path, and are copied verbatim.
 *
 * rows(root, indices, n, start, offsets, data, capacity) -> int | None
 *   Writes rows start..n-1 into the caller's buffers (int32 offsets of n + 1 entries,
 *   offsets[start] set by an earlier call unless start is 0; data of capacity bytes) and returns the number of rows
 *   done: fewer than n when the next row does not fit (the caller grows the data buffer
 *   and calls again from there).
 *   root: a STRUCT node (the row object; with param 1 a bare concatenation of its
 *   keys and children's texts, e.g. RAW text and integers: DLQ messages); its children
 *   carry a "taken" flag: such a column is indexed by the output row number, the
 *   others by indices[row].
 *   indices: address of n int64 row numbers, or 0 for rows 0..n-1.
 *   None: a value this writer does not spell (a date or instant outside years
 *   1-9999, a date64 that is no whole day, a dictionary index out of range); the
 *   caller then uses its column-wise path.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    K_NULL = 0,
    K_BOOL = 1,
    K_INT = 2,
    K_UINT = 3,
    K_DECIMAL = 4,
    K_STRING = 5,
    K_LARGE_STRING = 6,
    K_RAW = 7,
    K_BINARY = 8,
    K_LARGE_BINARY = 9,
    K_FIXED_BINARY = 10,
    K_TIMESTAMP = 11,
    K_DATE32 = 12,
    K_LIST = 13,
    K_LARGE_LIST = 14,
    K_FIXED_LIST = 15,
    K_STRUCT = 16,
    K_MAP = 17,
    K_DICT = 18,
    K_DATE64 = 19,
    K_LAST = 19
};

typedef struct Node {
    int kind;
    int taken;
    int64_t offset;
    const uint8_t *validity;
    const uint8_t *b1;
    const uint8_t *b2;
    int64_t param;
    int64_t param2;
    Py_ssize_t nchild;
    struct Node **child;
    const char **keys;
    Py_ssize_t *key_len;
} Node;

typedef struct {
    char *p;
    Py_ssize_t len;
    Py_ssize_t cap;
    int full;        /* the buffer cannot take the value: the caller grows it */
    int unsupported; /* a value this writer does not spell */
    int64_t last_days; /* the last date written (INT64_MIN: none) and its text */
    char last_date[10];
} Out;

/* Seconds from 0001-01-01 to the epoch, and from the epoch to 10000-01-01. */
static const int64_t MIN_SECONDS = -62135596800LL;
static const int64_t MAX_SECONDS = 253402300800LL;

static int full(Out *o) {
    o->full = 1;
    return -1;
}

#define RESERVE(o, n) \
    do { \
        if ((o)->cap - (o)->len < (Py_ssize_t)(n)) return full(o); \
    } while (0)

/* n bytes, w <= n <= 2w, as two overlapping loads and stores of w bytes; w is a constant
   where it is inlined (8 or 4), so each memcpy is one move. */
static inline void copy_overlapping(char *d, const char *s, Py_ssize_t n, size_t w) {
    uint64_t a, b;
    memcpy(&a, s, w);
    memcpy(&b, s + n - w, w);
    memcpy(d, &a, w);
    memcpy(d + n - w, &b, w);
}

/* Copies of up to 16 bytes inline (two overlapping loads and stores), longer ones by
   memcpy: keys and most values are short. */
static inline void copy(char *d, const void *src, Py_ssize_t n) {
    const char *s = (const char *)src;
    if (n > 16) {
        memcpy(d, s, (size_t)n);
    } else if (n >= 8) {
        copy_overlapping(d, s, n, 8);
    } else if (n >= 4) {
        copy_overlapping(d, s, n, 4);
    } else {
        for (Py_ssize_t k = 0; k < n; k++) d[k] = s[k];
    }
}

static inline void put(Out *o, const char *s, Py_ssize_t n) {
    copy(o->p + o->len, s, n);
    o->len += n;
}

static inline void put1(Out *o, char c) { o->p[o->len++] = c; }

static int put_checked(Out *o, const char *s, Py_ssize_t n) {
    RESERVE(o, n);
    put(o, s, n);
    return 0;
}

static inline int is_valid(const Node *nd, int64_t j) {
    return nd->validity == NULL || ((nd->validity[j >> 3] >> (j & 7)) & 1);
}

/* Defines NAME(b, width, j): value j of a buffer of integers of width bytes each (1, 2, 4,
   else 8), of the C types P8_t .. P64_t. */
#define DEFINE_INT_AT(NAME, P)                                                 \
    static inline P##64_t NAME(const uint8_t *b, int64_t width, int64_t j) {   \
        switch (width) {                                                       \
            case 1: return ((const P##8_t *)b)[j];                             \
            case 2: return ((const P##16_t *)b)[j];                            \
            case 4: return ((const P##32_t *)b)[j];                            \
            default: return ((const P##64_t *)b)[j];                           \
        }                                                                      \
    }

DEFINE_INT_AT(int_at, int)   /* signed: int64_t int_at(...) */
DEFINE_INT_AT(uint_at, uint) /* unsigned: uint64_t uint_at(...) */
#undef DEFINE_INT_AT

/* "00".."99": two digits per division. */
static const char PAIRS[] =
    "0001020304050607080910111213141516171819202122232425262728293031323334353637383940"
    "4142434445464748495051525354555657585960616263646566676869707172737475767778798081"
    "828384858687888990919293949596979899";

/* The decimal digits of v written backwards ending at end; returns their start. */
static inline char *digits_back(char *end, uint64_t v) {
    while (v >= 100) {
        end -= 2;
        memcpy(end, PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        end -= 2;
        memcpy(end, PAIRS + 2 * v, 2);
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

static void put_u64(Out *o, uint64_t v) {
    char tmp[24];
    char *start = digits_back(tmp + sizeof tmp, v);
    put(o, start, tmp + sizeof tmp - start);
}

static void put_i64(Out *o, int64_t v) {
    if (v < 0) {
        put1(o, '-');
        put_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u64(o, (uint64_t)v);
    }
}

/* v (0 <= v < 10^width) in exactly width digits, zero-padded; two at a time. */
static inline void put_digits(Out *o, int64_t v, int width) {
    char *p = o->p + o->len + width;
    int k = width;
    for (; k >= 2; k -= 2) {
        p -= 2;
        memcpy(p, PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (k) *--p = (char)('0' + v % 10);
    o->len += width;
}

/* --- strings: escaped as orjson escapes them ------------------------------------- */

static uint8_t ESCAPE[256]; /* 0: as is; else the short escape letter or 'u' */

static void init_escapes(void) {
    for (int c = 0; c < 0x20; c++) ESCAPE[c] = 'u';
    ESCAPE['\b'] = 'b';
    ESCAPE['\t'] = 't';
    ESCAPE['\n'] = 'n';
    ESCAPE['\f'] = 'f';
    ESCAPE['\r'] = 'r';
    ESCAPE['"'] = '"';
    ESCAPE['\\'] = '\\';
}

static const char HEX[] = "0123456789abcdef";

/* The first byte at or after k that JSON escapes (a control, '"' or '\\'), or n:
   eight bytes at a time, then one by one. */
static inline int64_t next_escape(const uint8_t *s, int64_t k, int64_t n) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    for (; k + 8 <= n; k += 8) {
        uint64_t v;
        memcpy(&v, s + k, 8);
        uint64_t q = v ^ (ones * '"'), b = v ^ (ones * '\\');
        uint64_t hit = ((v - ones * 0x20) & ~v) | ((q - ones) & ~q) | ((b - ones) & ~b);
        if (hit & highs) break;
    }
    while (k < n && !ESCAPE[s[k]]) k++;
    return k;
}

static int put_string(Out *o, const uint8_t *s, int64_t n) {
    int64_t first = next_escape(s, 0, n);
    if (first == n) {
        RESERVE(o, n + 2);
        put1(o, '"');
        put(o, (const char *)s, n);
        put1(o, '"');
        return 0;
    }
    /* Worst case: every byte a \u00XX escape. */
    RESERVE(o, 6 * n + 2);
    char *p = o->p + o->len;
    *p++ = '"';
    int64_t run = 0;
    for (int64_t k = first; k < n; k++) {
        uint8_t c = s[k];
        uint8_t e = ESCAPE[c];
        if (!e) continue;
        copy(p, s + run, k - run);
        p += k - run;
        run = k + 1;
        *p++ = '\\';
        if (e == 'u') {
            *p++ = 'u';
            *p++ = '0';
            *p++ = '0';
            *p++ = HEX[c >> 4];
            *p++ = HEX[c & 15];
        } else {
            *p++ = (char)e;
        }
    }
    copy(p, s + run, n - run);
    p += n - run;
    *p++ = '"';
    o->len = p - o->p;
    return 0;
}

static int put_hex(Out *o, const uint8_t *s, int64_t n) {
    RESERVE(o, 2 * n + 2);
    char *p = o->p + o->len;
    *p++ = '"';
    for (int64_t k = 0; k < n; k++) {
        *p++ = HEX[s[k] >> 4];
        *p++ = HEX[s[k] & 15];
    }
    *p++ = '"';
    o->len = p - o->p;
    return 0;
}

/* --- dates and instants ------------------------------------------------------------ */

static inline int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* Howard Hinnant's civil_from_days. */
static void civil(int64_t days, int64_t *y, int64_t *m, int64_t *d) {
    int64_t z = days + 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yoe + era * 400 + (*m <= 2);
}

/* YYYY-MM-DD. Rows of a stream mostly share their day: the last one's text is kept. */
static void put_date(Out *o, int64_t days) {
    if (days == o->last_days) {
        put(o, o->last_date, 10);
        return;
    }
    int64_t y, m, d;
    civil(days, &y, &m, &d);
    char *text = o->p + o->len;
    put_digits(o, y, 4);
    put1(o, '-');
    put_digits(o, m, 2);
    put1(o, '-');
    put_digits(o, d, 2);
    memcpy(o->last_date, text, 10);
    o->last_days = days;
}

static int put_timestamp(Out *o, const Node *nd, int64_t raw) {
    int64_t per = nd->param; /* units per second: 1, 1000 or 1000000 */
    if (raw < MIN_SECONDS * per || raw >= MAX_SECONDS * per) {
        o->unsupported = 1;
        return -1;
    }
    int64_t micros = raw * (1000000 / per);
    int64_t secs = floor_div(micros, 1000000);
    int64_t frac = micros - secs * 1000000;
    int64_t days = floor_div(secs, 86400);
    int64_t sod = secs - days * 86400;
    RESERVE(o, 40);
    put1(o, '"');
    put_date(o, days);
    put1(o, 'T');
    put_digits(o, sod / 3600, 2);
    put1(o, ':');
    put_digits(o, sod / 60 % 60, 2);
    put1(o, ':');
    put_digits(o, sod % 60, 2);
    if (frac) {
        put1(o, '.');
        put_digits(o, frac, 6);
    }
    if (nd->param2) put(o, "+00:00", 6);
    put1(o, '"');
    return 0;
}

/* --- decimals: str(Decimal) for scales 0..6 (never exponent form there) ------------ */

static int put_decimal(Out *o, const uint8_t *p, int scale) {
    uint64_t lo, hi;
    memcpy(&lo, p, 8); /* little endian, as Arrow lays decimal128 out on this host */
    memcpy(&hi, p + 8, 8);
    unsigned __int128 v = ((unsigned __int128)hi << 64) | lo;
    int neg = (int64_t)hi < 0;
    if (neg) v = (unsigned __int128)0 - v;
    char tmp[64];
    char *end = tmp + sizeof tmp, *start = end;
    while (v >> 64) { /* 128-bit division only for the digits past 64 bits */
        *--start = (char)('0' + (int)(v % 10));
        v /= 10;
    }
    if (start == end || (uint64_t)v) start = digits_back(start, (uint64_t)v);
    while (end - start <= scale) *--start = '0';
    Py_ssize_t n = end - start;
    RESERVE(o, n + 4);
    put1(o, '"');
    if (neg) put1(o, '-');
    for (const char *d = start; d < end - scale; d++) put1(o, *d);
    if (scale) {
        put1(o, '.');
        for (const char *d = end - scale; d < end; d++) put1(o, *d);
    }
    put1(o, '"');
    return 0;
}

/* --- values -------------------------------------------------------------------------- */

static int write_value(Out *o, const Node *nd, int64_t i);

/* Where value j of a variable-width column starts and ends: [*lo, *hi) of its data (b2), or
   of its child's values for a list. Its offsets (b1) are int64 when `wide` (the large
   types), else int32. */
static inline void bounds(const Node *nd, int64_t j, int wide, int64_t *lo, int64_t *hi) {
    if (wide) {
        const int64_t *off = (const int64_t *)nd->b1;
        *lo = off[j];
        *hi = off[j + 1];
    } else {
        const int32_t *off = (const int32_t *)nd->b1;
        *lo = off[j];
        *hi = off[j + 1];
    }
}

static int write_seq(Out *o, const Node *child, int64_t lo, int64_t hi) {
    RESERVE(o, 1);
    put1(o, '[');
    for (int64_t k = lo; k < hi; k++) {
        if (k > lo) {
            RESERVE(o, 1);
            put1(o, ',');
        }
        if (write_value(o, child, k) < 0) return -1;
    }
    RESERVE(o, 1);
    put1(o, ']');
    return 0;
}

/* An object, or with param 1 a bare concatenation: each key, then its child's text. */
static int write_object(Out *o, const Node *nd, int64_t i, int64_t row) {
    int bare = nd->param == 1;
    if (nd->nchild == 0) return bare ? 0 : put_checked(o, "{}", 2);
    for (Py_ssize_t c = 0; c < nd->nchild; c++) {
        Node *ch = nd->child[c];
        RESERVE(o, nd->key_len[c] + 1);
        if (!bare) put1(o, c == 0 ? '{' : ',');
        put(o, nd->keys[c], nd->key_len[c]);
        if (write_value(o, ch, ch->taken ? row : i) < 0) return -1;
    }
    if (bare) return 0;
    RESERVE(o, 1);
    put1(o, '}');
    return 0;
}

static int write_value(Out *o, const Node *nd, int64_t i) {
    int64_t j = i + nd->offset;
    int64_t lo, hi;
    if (!is_valid(nd, j)) return put_checked(o, "null", 4);
    switch (nd->kind) {
        case K_NULL:
            return put_checked(o, "null", 4);
        case K_BOOL:
            if ((nd->b1[j >> 3] >> (j & 7)) & 1) return put_checked(o, "true", 4);
            return put_checked(o, "false", 5);
        case K_INT:
            RESERVE(o, 21);
            put_i64(o, int_at(nd->b1, nd->param, j));
            return 0;
        case K_UINT:
            RESERVE(o, 21);
            put_u64(o, uint_at(nd->b1, nd->param, j));
            return 0;
        case K_DECIMAL:
            return put_decimal(o, nd->b1 + 16 * j, (int)nd->param);
        case K_STRING:
        case K_LARGE_STRING:
            bounds(nd, j, nd->kind == K_LARGE_STRING, &lo, &hi);
            return put_string(o, nd->b2 + lo, hi - lo);
        case K_RAW:
            bounds(nd, j, 0, &lo, &hi);
            return put_checked(o, (const char *)nd->b2 + lo, hi - lo);
        case K_BINARY:
        case K_LARGE_BINARY:
            bounds(nd, j, nd->kind == K_LARGE_BINARY, &lo, &hi);
            return put_hex(o, nd->b2 + lo, hi - lo);
        case K_FIXED_BINARY:
            return put_hex(o, nd->b1 + nd->param * j, nd->param);
        case K_TIMESTAMP:
            return put_timestamp(o, nd, ((const int64_t *)nd->b1)[j]);
        case K_DATE32: {
            int64_t days = ((const int32_t *)nd->b1)[j];
            if (days < MIN_SECONDS / 86400 || days >= MAX_SECONDS / 86400) {
                o->unsupported = 1;
                return -1;
            }
            RESERVE(o, 12);
            put1(o, '"');
            put_date(o, days);
            put1(o, '"');
            return 0;
        }
        case K_DATE64: {
            int64_t ms = ((const int64_t *)nd->b1)[j];
            if (ms % 86400000 != 0 || ms < MIN_SECONDS * 1000 || ms >= MAX_SECONDS * 1000) {
                o->unsupported = 1; /* the column-wise path says what such a value is */
                return -1;
            }
            RESERVE(o, 12);
            put1(o, '"');
            put_date(o, ms / 86400000);
            put1(o, '"');
            return 0;
        }
        case K_DICT: {
            /* param: the index width in bytes, plus 10 for unsigned indices */
            int64_t k;
            if (nd->param < 10) {
                k = int_at(nd->b1, nd->param, j);
            } else {
                uint64_t u = uint_at(nd->b1, nd->param - 10, j);
                k = u > (uint64_t)INT64_MAX ? -1 : (int64_t)u;
            }
            if (k < 0 || k >= nd->param2) {
                o->unsupported = 1;
                return -1;
            }
            return write_value(o, nd->child[0], k);
        }
        case K_LIST:
        case K_LARGE_LIST:
            bounds(nd, j, nd->kind == K_LARGE_LIST, &lo, &hi);
            return write_seq(o, nd->child[0], lo, hi);
        case K_FIXED_LIST:
            return write_seq(o, nd->child[0], j * nd->param, (j + 1) * nd->param);
        case K_STRUCT:
            return write_object(o, nd, i, i);
        case K_MAP: {
            bounds(nd, j, 0, &lo, &hi);
            RESERVE(o, 1);
            put1(o, '[');
            for (int64_t k = lo; k < hi; k++) {
                RESERVE(o, 2);
                if (k > lo) put1(o, ',');
                put1(o, '[');
                if (write_value(o, nd->child[0], k) < 0) return -1;
                RESERVE(o, 1);
                put1(o, ',');
                if (write_value(o, nd->child[1], k) < 0) return -1;
                RESERVE(o, 1);
                put1(o, ']');
            }
            RESERVE(o, 1);
            put1(o, ']');
            return 0;
        }
        default: /* parse() admits no other kind; runs without the GIL: no exception here */
            o->unsupported = 1;
            return -1;
    }
}

/* --- plans --------------------------------------------------------------------------- */

typedef struct {
    Node **nodes;
    Py_ssize_t len;
    Py_ssize_t cap;
} Arena;

static void arena_free(Arena *a) {
    for (Py_ssize_t k = 0; k < a->len; k++) {
        PyMem_Free(a->nodes[k]->child);
        PyMem_Free((void *)a->nodes[k]->keys);
        PyMem_Free(a->nodes[k]->key_len);
        PyMem_Free(a->nodes[k]);
    }
    PyMem_Free(a->nodes);
}

static Node *arena_new(Arena *a) {
    if (a->len == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 16;
        Node **nodes = PyMem_Realloc(a->nodes, (size_t)cap * sizeof(Node *));
        if (!nodes) {
            PyErr_NoMemory();
            return NULL;
        }
        a->nodes = nodes;
        a->cap = cap;
    }
    Node *nd = PyMem_Calloc(1, sizeof(Node));
    if (!nd) {
        PyErr_NoMemory();
        return NULL;
    }
    a->nodes[a->len++] = nd;
    return nd;
}

/* A node: (kind, taken, offset, validity, b1, b2, param, param2, children, keys);
   addresses are ints (0: none), children a tuple of nodes, keys a tuple of bytes
   (each key's JSON text with its colon) for structs, else (). The bytes objects stay
   referenced by the plan the caller holds for the whole call. */
static Node *parse(Arena *a, PyObject *t) {
    PyObject *children, *keys;
    unsigned long long validity, b1, b2;
    long long offset, param, param2;
    int kind, taken;
    if (!PyTuple_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "row JSON plan: a node is a tuple");
        return NULL;
    }
    if (!PyArg_ParseTuple(t, "iiLKKKLLO!O!", &kind, &taken, &offset, &validity, &b1, &b2,
                          &param, &param2, &PyTuple_Type, &children, &PyTuple_Type, &keys))
        return NULL;
    if (kind < 0 || kind > K_LAST) {
        PyErr_Format(PyExc_ValueError, "row JSON plan: unknown node kind %d", kind);
        return NULL;
    }
    Node *nd = arena_new(a);
    if (!nd) return NULL;
    nd->kind = kind;
    nd->taken = taken;
    nd->offset = offset;
    nd->validity = (const uint8_t *)(uintptr_t)validity;
    nd->b1 = (const uint8_t *)(uintptr_t)b1;
    nd->b2 = (const uint8_t *)(uintptr_t)b2;
    nd->param = param;
    nd->param2 = param2;
    nd->nchild = PyTuple_GET_SIZE(children);
    Py_ssize_t need = kind == K_STRUCT ? nd->nchild
                      : kind == K_MAP  ? 2
                      : ((kind >= K_LIST && kind <= K_FIXED_LIST) || kind == K_DICT) ? 1
                                                                                      : 0;
    if (nd->nchild != need || (kind == K_STRUCT && PyTuple_GET_SIZE(keys) != need)) {
        PyErr_Format(PyExc_ValueError, "row JSON plan: node kind %d with %zd children", kind,
                     nd->nchild);
        return NULL;
    }
    if ((kind == K_TIMESTAMP && param != 1 && param != 1000 && param != 1000000) ||
        (kind == K_DECIMAL && (param < 0 || param > 6)) ||
        (kind == K_DICT && param != 1 && param != 2 && param != 4 && param != 8 && param != 11 &&
         param != 12 && param != 14 && param != 18) ||
        ((kind == K_INT || kind == K_UINT) && param != 1 && param != 2 && param != 4 &&
         param != 8)) {
        PyErr_Format(PyExc_ValueError, "row JSON plan: node kind %d with parameter %lld", kind,
                     param);
        return NULL;
    }
    if (nd->nchild) {
        nd->child = PyMem_Calloc((size_t)nd->nchild, sizeof(Node *));
        if (!nd->child) {
            PyErr_NoMemory();
            return NULL;
        }
        for (Py_ssize_t c = 0; c < nd->nchild; c++) {
            nd->child[c] = parse(a, PyTuple_GET_ITEM(children, c));
            if (!nd->child[c]) return NULL;
        }
    }
    if (kind == K_STRUCT && need) {
        nd->keys = PyMem_Calloc((size_t)need, sizeof(char *));
        nd->key_len = PyMem_Calloc((size_t)need, sizeof(Py_ssize_t));
        if (!nd->keys || !nd->key_len) {
            PyErr_NoMemory();
            return NULL;
        }
        for (Py_ssize_t c = 0; c < need; c++) {
            PyObject *k = PyTuple_GET_ITEM(keys, c);
            if (!PyBytes_Check(k)) {
                PyErr_SetString(PyExc_TypeError, "row JSON plan: struct keys are bytes");
                return NULL;
            }
            nd->keys[c] = PyBytes_AS_STRING(k);
            nd->key_len[c] = PyBytes_GET_SIZE(k);
        }
    }
    return nd;
}

static PyObject *rows(PyObject *self, PyObject *args) {
    PyObject *plan;
    unsigned long long indices_addr, offsets_addr, data_addr;
    Py_ssize_t n, start, cap;
    (void)self;
    if (!PyArg_ParseTuple(args, "OKnnKKn", &plan, &indices_addr, &n, &start, &offsets_addr,
                          &data_addr, &cap))
        return NULL;
    if (n < 0 || start < 0 || start > n || cap < 0 || cap > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "row JSON: row range or capacity out of bounds");
        return NULL;
    }
    Arena arena = {0};
    Node *root = parse(&arena, plan);
    PyObject *result = NULL;
    if (!root) goto done;
    if (root->kind != K_STRUCT) {
        PyErr_SetString(PyExc_ValueError, "row JSON plan: the root is a struct node");
        goto done;
    }
    int32_t *off = (int32_t *)(uintptr_t)offsets_addr;
    const int64_t *idx = (const int64_t *)(uintptr_t)indices_addr;
    if (start == 0) off[0] = 0;
    Out o = {(char *)(uintptr_t)data_addr, off[start], cap, 0, 0, INT64_MIN, {0}};
    Py_ssize_t r = start;
    /* The loop touches no Python object (the plan is parsed, the caller holds every
       buffer and the keys' bytes): other threads (Bytewax workers) run meanwhile. */
    Py_BEGIN_ALLOW_THREADS;
    for (; r < n; r++) {
        if (write_object(&o, root, idx ? idx[r] : r, r) < 0) break;
        off[r + 1] = (int32_t)o.len;
    }
    Py_END_ALLOW_THREADS;
    if (r == n || o.full) {
        result = Py_BuildValue("n", r); /* rows written so far: off[r] is their end */
    } else if (o.unsupported) {
        result = Py_NewRef(Py_None);
    }
done:
    arena_free(&arena);
    return result;
}

/* --- duplicates: rows whose key occurred earlier in the column --------------------- */

static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t hash_bytes(const uint8_t *s, int64_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t v;
        memcpy(&v, s + k, 8);
        h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    if (k < n) {
        uint64_t v = 0;
        memcpy(&v, s + k, (size_t)(n - k));
        h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
    }
    return mix(h);
}

/* The key of row j and its length in bytes (*len), for a key kind of duplicates(). */
static inline const uint8_t *key_at(int kind, const uint8_t *b1, const uint8_t *b2,
                                    Py_ssize_t width, int64_t j, int64_t *len) {
    if (kind == 0) {
        *len = width;
        return b1 + j * width;
    }
    if (kind == 1) {
        const int32_t *off = (const int32_t *)b1;
        *len = off[j + 1] - off[j];
        return b2 + off[j];
    }
    const int64_t *off = (const int64_t *)b1;
    *len = off[j + 1] - off[j];
    return b2 + off[j];
}

/* duplicates(kind, n, offset, validity, b1, b2, width, out) -> None
   kind 0: fixed width keys (width bytes each at b1); 1: 32-bit offsets at b1 into b2;
   2: 64-bit offsets. Sets out[i] (n bytes) to 1 where row i's key is not null and
   equals an earlier row's (byte for byte), else 0. */
static PyObject *duplicates(PyObject *self, PyObject *args) {
    int kind;
    Py_ssize_t n, width;
    long long offset;
    unsigned long long validity_addr, b1_addr, b2_addr, out_addr;
    (void)self;
    if (!PyArg_ParseTuple(args, "inLKKKnK", &kind, &n, &offset, &validity_addr, &b1_addr,
                          &b2_addr, &width, &out_addr))
        return NULL;
    if (kind < 0 || kind > 2 || n < 0 || n >= INT32_MAX || (kind == 0 && width <= 0)) {
        PyErr_SetString(PyExc_ValueError, "duplicates: bad key kind, width or row count");
        return NULL;
    }
    const uint8_t *validity = (const uint8_t *)(uintptr_t)validity_addr;
    const uint8_t *b1 = (const uint8_t *)(uintptr_t)b1_addr;
    const uint8_t *b2 = (const uint8_t *)(uintptr_t)b2_addr;
    uint8_t *out = (uint8_t *)(uintptr_t)out_addr;
    Py_ssize_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint32_t *slots = PyMem_Calloc((size_t)cap, sizeof(uint32_t)); /* row + 1; 0: empty */
    uint64_t *hashes = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(uint64_t));
    if (!slots || !hashes) {
        PyMem_Free(slots);
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS; /* no Python object below: the caller holds the buffers */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t j = i + offset;
        out[i] = 0;
        if (validity && !((validity[j >> 3] >> (j & 7)) & 1)) continue;
        int64_t len;
        const uint8_t *key = key_at(kind, b1, b2, width, j, &len);
        uint64_t h = hash_bytes(key, len);
        hashes[i] = h;
        for (Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)(cap - 1));; at = (at + 1) & (cap - 1)) {
            uint32_t seen = slots[at];
            if (!seen) {
                slots[at] = (uint32_t)i + 1;
                break;
            }
            Py_ssize_t r = (Py_ssize_t)seen - 1;
            if (hashes[r] != h) continue;
            int64_t other_len;
            const uint8_t *other = key_at(kind, b1, b2, width, r + offset, &other_len);
            if (other_len == len && (len == 0 || memcmp(other, key, (size_t)len) == 0)) {
                out[i] = 1;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS;
    PyMem_Free(slots);
    PyMem_Free(hashes);
    Py_RETURN_NONE;
}

/* --- Block: text memory from the C allocator, handed to Arrow without a copy ---------- */

/* The text of a batch of rows is tens of MB, allocated per batch and freed when the DLQ
   batch is released downstream. Arrow's allocator (mimalloc) returns blocks that large
   to the OS on free, so every batch would fault fresh, zeroed pages in again (measured:
   ~0.6 us of system time per row at 400 bytes a row); malloc keeps them for reuse. */
typedef struct {
    PyObject_HEAD char *data;
    Py_ssize_t size;
    Py_ssize_t exports;
} Block;

static void Block_dealloc(Block *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Block_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Py_ssize_t size;
    static char *kwlist[] = {"size", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n", kwlist, &size)) return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "Block: negative size");
        return NULL;
    }
    Block *self = (Block *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->data = malloc(size ? (size_t)size : 1);
    if (!self->data) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->size = size;
    return (PyObject *)self;
}

static PyObject *Block_resize(Block *self, PyObject *arg) {
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred()) return NULL;
    if (size < 0 || self->exports) {
        PyErr_SetString(PyExc_ValueError, "Block: negative size, or resized while exported");
        return NULL;
    }
    char *data = realloc(self->data, size ? (size_t)size : 1);
    if (!data) return PyErr_NoMemory();
    self->data = data;
    self->size = size;
    Py_RETURN_NONE;
}

static PyObject *Block_address(Block *self, void *closure) {
    (void)closure;
    return PyLong_FromVoidPtr(self->data);
}

static int Block_getbuffer(Block *self, Py_buffer *view, int flags) {
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 0, flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void Block_releasebuffer(Block *self, Py_buffer *view) {
    (void)view;
    self->exports--;
}

static PyBufferProcs Block_as_buffer = {(getbufferproc)Block_getbuffer,
                                        (releasebufferproc)Block_releasebuffer};

static PyMethodDef Block_methods[] = {
    {"resize", (PyCFunction)Block_resize, METH_O, "resize(size): realloc; not while exported."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Block_getset[] = {
    {"address", (getter)Block_address, NULL, "The address of the first byte.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "thalweg_bytewax.contracts._native.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = (destructor)Block_dealloc,
    .tp_as_buffer = &Block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Block(size): uninitialised memory from malloc, writable buffer protocol.",
    .tp_methods = Block_methods,
    .tp_getset = Block_getset,
    .tp_new = Block_new,
};

static PyMethodDef methods[] = {
    {"duplicates", duplicates, METH_VARARGS,
     "duplicates(kind, n, offset, validity, b1, b2, width, out): rows seen before."},
    {"rows", rows, METH_VARARGS,
     "rows(plan, indices, n, start, offsets, data, capacity) -> rows done | None."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Row JSON over Arrow buffers (see row_json).",
    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    init_escapes();
    if (PyType_Ready(&BlockType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Block", (PyObject *)&BlockType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
