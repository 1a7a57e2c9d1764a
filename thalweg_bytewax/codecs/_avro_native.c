/*
 * Avro bodies walked against a schema program, one pass, no Python object per value.
 *
 * The exactness check of thalweg_bytewax.codecs._avro_fast. polars decodes the bodies
 * of a batch as one container block, one byte stream; a body that is cut short or
 * holds extra bytes would shift every later record of the block without an error.
 * This walk proves, before polars runs, that each body holds exactly one record of
 * the writer schema in its one canonical encoding: every read stays inside the body,
 * the record ends where the body does, varints are minimal, an array or map is one
 * block of items and its 0 terminator, a boolean byte is 0 or 1, a union branch and an
 * enum index are in range, an int fits 32 bits, a decimal's bytes are its minimal
 * two's complement, a uuid is the canonical lower-case 8-4-4-4-12 text. Records
 * decoded sequentially from such bodies each start and end at their own body's
 * bounds, so polars' rows are the bodies' records, one for one.
 *
 * With canonical=0 the walk accepts every layout the Avro specification allows
 * (padded varints, several blocks, a negative block count followed by the block's
 * byte size, which must then be exactly what its items take) and any uuid text (the
 * reader parses it); the other value checks stay.
 *
 * The program is a sequence of int32 words in pre-order (see _avro_walk.py):
 *   NULL BOOL INT LONG FLOAT DOUBLE BYTES STRING UUID      no argument
 *   FIXED size | ENUM symbols | DECIMAL max_bytes (0: any) precision
 *   FDECIMAL size precision                 a decimal held in a fixed
 *   RECORD n, then n fields | UNION n, then n branches
 *   ARRAY, then the item | MAP, then the value (keys are strings)
 *   RANGE lo_high lo_low hi_high hi_low     a long (or int) in [lo, hi]: a date, time
 *                                           or timestamp every reader converts
 * It is checked before any body is read: known opcodes, arguments in range, every
 * subtree inside the program, at most MAX_DEPTH levels deep. Block counts are bounded
 * before any item is read: by the bytes left in the body over the fewest bytes an item
 * takes, and items that may take no byte (records of nulls) by MAX_EMPTY_ITEMS a row,
 * so no count from a body drives a long loop. Nothing is allocated from a body's
 * content. The walk runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "_body_offsets.h"

enum Op {
    OP_NULL = 0, OP_BOOL, OP_INT, OP_LONG, OP_FLOAT, OP_DOUBLE, OP_BYTES, OP_STRING, OP_UUID,
    OP_FIXED, OP_ENUM, OP_DECIMAL, OP_RECORD, OP_UNION, OP_ARRAY, OP_MAP, OP_RANGE,
    OP_FDECIMAL
};

/* Row statuses; the first failure of a row is reported, with its byte offset. */
enum Status {
    S_OK = 0,
    S_TRUNCATED,        /* a read runs past the end of the body */
    S_CUT_VARINT,       /* the body ends inside a varint */
    S_LEFTOVER,         /* the record ends before the body does */
    S_LONG_VARINT,      /* a varint of more than 64 bits */
    S_PADDED_VARINT,    /* a varint longer than its value needs */
    S_INT_RANGE,        /* an int outside 32 bits */
    S_BAD_BOOLEAN,      /* a boolean byte other than 0 or 1 */
    S_BAD_BRANCH,       /* a union branch index outside the union */
    S_BAD_ENUM,         /* an enum index outside the symbols */
    S_NEGATIVE_LENGTH,  /* a bytes or string length below zero */
    S_BLOCKS,           /* canonical: a negative block count or a second block */
    S_BLOCK_SIZE,       /* a block's byte size differs from what its items take */
    S_COUNT,            /* a block count more than the bytes left can hold */
    S_BAD_UUID,         /* a uuid that is not the canonical lower-case text */
    S_BAD_DECIMAL,      /* canonical: decimal bytes not minimal, empty or too long */
    S_RANGE,            /* a date, time or timestamp outside the range it converts in */
    S_PRECISION,        /* a decimal with more digits than its precision */
};

#define MAX_DEPTH 64
#define MAX_PROGRAM (1 << 20)
#define MAX_EMPTY_ITEMS (1 << 16)

typedef struct {
    const int32_t *code;
    Py_ssize_t len;
    Py_ssize_t *next;   /* per word: the index after the subtree starting there */
    int64_t *min_size;  /* per word: the fewest bytes a value of the subtree takes */
} Program;

typedef struct {
    const unsigned char *start, *end;
    int canonical;
    int status;
    int64_t where;       /* the failing read's offset from the body's start */
    int64_t empty_left;  /* items that may take no byte still allowed in this row */
    int32_t op;          /* S_RANGE, S_PRECISION: the program word of the value, else -1 */
} Walk;

/* ---------------------------------------------------------------- program */

/* Check the subtree at `at`; fill next/min_size. Returns 0, or -1 with an exception. */
static int prog_check(Program *pg, Py_ssize_t at, int depth) {
    if (depth > MAX_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "avro program nests too deep");
        return -1;
    }
    if (at >= pg->len) {
        PyErr_SetString(PyExc_ValueError, "avro program ends inside a type");
        return -1;
    }
    int32_t op = pg->code[at];
    Py_ssize_t i = at + 1;
    int64_t min = 0;
    switch (op) {
    case OP_NULL: min = 0; break;
    case OP_BOOL: case OP_INT: case OP_LONG: case OP_BYTES: case OP_STRING: min = 1; break;
    case OP_FLOAT: min = 4; break;
    case OP_DOUBLE: min = 8; break;
    case OP_UUID: min = 37; break;
    case OP_FIXED: case OP_ENUM: case OP_DECIMAL:
        if (i >= pg->len || pg->code[i] < 0 || (op == OP_ENUM && pg->code[i] < 1)) {
            PyErr_SetString(PyExc_ValueError, "avro program: bad argument");
            return -1;
        }
        min = op == OP_FIXED ? pg->code[i] : 1;
        i++;
        if (op == OP_DECIMAL) {
            if (i >= pg->len || pg->code[i] < 0) {
                PyErr_SetString(PyExc_ValueError, "avro program: bad argument");
                return -1;
            }
            i++;
        }
        break;
    case OP_FDECIMAL:
        if (i + 1 >= pg->len || pg->code[i] < 0 || pg->code[i + 1] < 0) {
            PyErr_SetString(PyExc_ValueError, "avro program: bad argument");
            return -1;
        }
        min = pg->code[i];
        i += 2;
        break;
    case OP_RECORD: case OP_UNION: {
        if (i >= pg->len || pg->code[i] < 0 || (op == OP_UNION && pg->code[i] < 1)) {
            PyErr_SetString(PyExc_ValueError, "avro program: bad argument");
            return -1;
        }
        int32_t n = pg->code[i++];
        int64_t branch_min = INT64_MAX;
        for (int32_t k = 0; k < n; k++) {
            if (prog_check(pg, i, depth + 1) < 0) return -1;
            int64_t m = pg->min_size[i];
            if (op == OP_RECORD) {
                min = min + m > ((int64_t)1 << 40) ? ((int64_t)1 << 40) : min + m;
            } else if (m < branch_min) {
                branch_min = m;
            }
            i = pg->next[i];
        }
        if (op == OP_UNION) min = 1 + branch_min;
        break;
    }
    case OP_RANGE:
        if (i + 4 > pg->len) {
            PyErr_SetString(PyExc_ValueError, "avro program: bad argument");
            return -1;
        }
        min = 1;
        i += 4;
        break;
    case OP_ARRAY: case OP_MAP:
        if (prog_check(pg, i, depth + 1) < 0) return -1;
        i = pg->next[i];
        min = 1;
        break;
    default:
        PyErr_Format(PyExc_ValueError, "avro program: unknown opcode %d", (int)op);
        return -1;
    }
    pg->next[at] = i;
    pg->min_size[at] = min;
    return 0;
}

/* ---------------------------------------------------------------- reads */

/* Each read takes the position and returns the one after it, or NULL once the row
 * failed (its status and the failing read's position are then in the Walk). */
typedef const unsigned char *Pos;

static Pos fail(Walk *w, int status, Pos at) {
    w->status = status;
    w->where = (int64_t)(at - w->start);
    return NULL;
}

/* One zigzag varint of up to 64 bits, past its first byte. */
static Pos read_long_slow(Walk *w, Pos p, int64_t *out) {
    Pos at = p;
    uint64_t v = 0;
    for (int k = 0;; k++) {
        if (p >= w->end) return fail(w, k == 0 ? S_TRUNCATED : S_CUT_VARINT, at);
        unsigned char b = *p++;
        if (k == 9 && b > 1) return fail(w, S_LONG_VARINT, at);
        v |= (uint64_t)(b & 0x7F) << (7 * k);
        if (!(b & 0x80)) {
            if (k > 0 && b == 0 && w->canonical) return fail(w, S_PADDED_VARINT, at);
            break;
        }
    }
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return p;
}

/* One zigzag varint; a one-byte one (lengths, counts, small values) without a call. */
static inline Pos read_long(Walk *w, Pos p, int64_t *out) {
    if (p < w->end && *p < 0x80) {
        *out = (int64_t)(*p >> 1) ^ -(int64_t)(*p & 1);
        return p + 1;
    }
    return read_long_slow(w, p, out);
}

/* A length-prefixed run: the position after it; its length in *len. */
static inline Pos read_run(Walk *w, Pos p, int64_t *len) {
    Pos q = read_long(w, p, len);
    if (q == NULL) return NULL;
    if (*len < 0) return fail(w, S_NEGATIVE_LENGTH, p);
    if (*len > w->end - q) return fail(w, S_TRUNCATED, p);
    return q + *len;
}

/* 1 for '0'-'9' and 'a'-'f': a uuid's digits, checked without a branch per byte. */
static unsigned char LOWER_HEX[256];

static void lower_hex_init(void) {
    for (int c = '0'; c <= '9'; c++) LOWER_HEX[c] = 1;
    for (int c = 'a'; c <= 'f'; c++) LOWER_HEX[c] = 1;
}

/* Whether 36 bytes are the canonical 8-4-4-4-12 lower-case text of a uuid. */
static int uuid_canonical(const unsigned char *s) {
    unsigned ok = (s[8] == '-') & (s[13] == '-') & (s[18] == '-') & (s[23] == '-');
    for (int k = 0; k < 8; k++) ok &= LOWER_HEX[s[k]];
    for (int k = 9; k < 13; k++) ok &= LOWER_HEX[s[k]];
    for (int k = 14; k < 18; k++) ok &= LOWER_HEX[s[k]];
    for (int k = 19; k < 23; k++) ok &= LOWER_HEX[s[k]];
    for (int k = 24; k < 36; k++) ok &= LOWER_HEX[s[k]];
    return (int)ok;
}

/* 10**k for k in 0..18. */
static const int64_t POW10[19] = {
    1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL, 100000000LL,
    1000000000LL, 10000000000LL, 100000000000LL, 1000000000000LL, 10000000000000LL,
    100000000000000LL, 1000000000000000LL, 10000000000000000LL, 100000000000000000LL,
    1000000000000000000LL,
};

#if defined(__SIZEOF_INT128__)
__extension__ typedef __int128 Wide;   /* every decimal128 value: up to 38 digits */
__extension__ typedef unsigned __int128 UWide;
#define WIDE_DIGITS 38
#else
typedef int64_t Wide;
typedef uint64_t UWide;
#define WIDE_DIGITS 18
#endif

/* Whether the big-endian two's complement of n bytes at d has at most `precision`
 * digits. Precisions above WIDE_DIGITS (decimal256) are not checked here: the column
 * build refuses such a value. An empty run is zero. */
static int decimal_fits(const unsigned char *d, int64_t n, int32_t precision) {
    if (precision > WIDE_DIGITS) return 1;
    /* drop bytes that only extend the sign */
    while (n >= 2 && ((d[0] == 0x00 && !(d[1] & 0x80)) || (d[0] == 0xFF && (d[1] & 0x80)))) {
        d++;
        n--;
    }
    if (n > (int64_t)sizeof(Wide)) return 0;
    if (n == 0) return 1;
    if (n <= 8 && precision <= 18) { /* the usual case, in 64 bits */
        uint64_t u = (d[0] & 0x80) ? ~(uint64_t)0 : 0;
        for (int64_t k = 0; k < n; k++) u = (u << 8) | d[k];
        int64_t v = (int64_t)u, most = POW10[precision] - 1;
        return v >= -most && v <= most; /* without negating INT64_MIN */
    }
    unsigned char buf[sizeof(Wide)];
    memset(buf, (d[0] & 0x80) ? 0xFF : 0x00, sizeof(Wide));
    memcpy(buf + sizeof(Wide) - n, d, (size_t)n);
    UWide u = 0;
    for (size_t k = 0; k < sizeof(Wide); k++) u = (u << 8) | buf[k];
    Wide v = (Wide)u;
    Wide most = 1;
    for (int32_t k = 0; k < precision; k++) most *= 10;
    most -= 1;
    return v >= -most && v <= most;
}

/* ---------------------------------------------------------------- flat code */

/* The walk runs a flat form of the program: records dissolve into their fields, runs of
 * fixed-size values merge into one skip, runs of longs or of strings into one op, and
 * arrays, maps and unions become jumps, so a value costs one dispatch and no call.
 *   F_SKIP n | F_LONGS n | F_RUNS n        n bytes; n longs; n bytes/strings
 *   F_INT | F_BOOL | F_UUID | F_ENUM n
 *   F_RANGE (four words, as RANGE) at | F_DECIMAL most precision at
 *   F_FDECIMAL size precision at            at: the value's program word (reported)
 *   F_UNION n t0 .. t(n-1)                  branch k continues at word tk
 *   F_JUMP t                                the end of a union branch
 *   F_BLOCKS item_min after, item, F_NEXT b  an array (a map's item starts with its
 *                                           key); b is the F_BLOCKS word, after the
 *                                           word past F_NEXT
 *   F_END                                   the record is read
 */
enum Flat {
    F_END = 0, F_SKIP, F_LONGS, F_RUNS, F_INT, F_BOOL, F_UUID, F_ENUM, F_DECIMAL,
    F_UNION, F_JUMP, F_BLOCKS, F_NEXT, F_RANGE, F_FDECIMAL
};

#define ITEM_MIN_CAP ((int64_t)1 << 30)

typedef struct {
    int32_t *out;
    Py_ssize_t len, cap;
    Py_ssize_t last; /* the last op of the straight run being built (merge target), or -1 */
} Emit;

static int put(Emit *e, int32_t word) {
    if (e->len >= e->cap) {
        PyErr_SetString(PyExc_ValueError, "avro program too large to flatten");
        return -1;
    }
    e->out[e->len++] = word;
    return 0;
}

/* An op with a count that merges into the same op just before it. */
static int put_merged(Emit *e, int32_t op, int64_t n) {
    if (e->last >= 0 && e->out[e->last] == op && e->out[e->last + 1] + n <= INT32_MAX) {
        e->out[e->last + 1] += (int32_t)n;
        return 0;
    }
    e->last = e->len;
    if (put(e, op) < 0 || put(e, (int32_t)n) < 0) return -1;
    return 0;
}

static int put_op(Emit *e, int32_t op) {
    e->last = -1;
    return put(e, op);
}

/* Flatten the (checked) subtree at `at`. */
static int flatten(const Program *pg, Py_ssize_t at, Emit *e) {
    const int32_t *code = pg->code;
    Py_ssize_t i;
    switch (code[at]) {
    case OP_NULL: return 0;
    case OP_FLOAT: return put_merged(e, F_SKIP, 4);
    case OP_DOUBLE: return put_merged(e, F_SKIP, 8);
    case OP_FIXED: return code[at + 1] ? put_merged(e, F_SKIP, code[at + 1]) : 0;
    case OP_LONG: return put_merged(e, F_LONGS, 1);
    case OP_BYTES: case OP_STRING: return put_merged(e, F_RUNS, 1);
    case OP_INT: return put_op(e, F_INT);
    case OP_BOOL: return put_op(e, F_BOOL);
    case OP_UUID: return put_op(e, F_UUID);
    case OP_ENUM:
        if (put_op(e, F_ENUM) < 0) return -1;
        return put(e, code[at + 1]);
    case OP_DECIMAL: case OP_FDECIMAL:
        if (put_op(e, code[at] == OP_DECIMAL ? F_DECIMAL : F_FDECIMAL) < 0) return -1;
        if (put(e, code[at + 1]) < 0 || put(e, code[at + 2]) < 0) return -1;
        return put(e, (int32_t)at);
    case OP_RANGE:
        if (put_op(e, F_RANGE) < 0) return -1;
        for (int k = 1; k <= 4; k++)
            if (put(e, code[at + k]) < 0) return -1;
        return put(e, (int32_t)at);
    case OP_RECORD:
        i = at + 2;
        for (int32_t k = 0; k < code[at + 1]; k++) {
            if (flatten(pg, i, e) < 0) return -1;
            i = pg->next[i];
        }
        return 0;
    case OP_UNION: {
        int32_t n = code[at + 1];
        Py_ssize_t table = e->len + 2;
        if (put_op(e, F_UNION) < 0 || put(e, n) < 0) return -1;
        for (int32_t k = 0; k < n; k++)
            if (put(e, 0) < 0) return -1;
        /* each branch, then a jump to the end; the jumps' targets are patched after */
        Py_ssize_t prev_jump = -1;
        i = at + 2;
        for (int32_t k = 0; k < n; k++) {
            e->out[table + k] = (int32_t)e->len;
            e->last = -1; /* a jump target: nothing merges into it */
            if (flatten(pg, i, e) < 0) return -1;
            i = pg->next[i];
            if (put_op(e, F_JUMP) < 0 || put(e, -1) < 0) return -1;
            /* chain the jumps through their operands, patched below */
            e->out[e->len - 1] = (int32_t)prev_jump;
            prev_jump = e->len - 1;
        }
        Py_ssize_t end = e->len;
        while (prev_jump >= 0) {
            Py_ssize_t before = e->out[prev_jump];
            e->out[prev_jump] = (int32_t)end;
            prev_jump = before;
        }
        e->last = -1;
        return 0;
    }
    case OP_ARRAY: case OP_MAP: {
        Py_ssize_t item = at + 1, blocks = e->len;
        int64_t item_min = pg->min_size[item] + (code[at] == OP_MAP ? 1 : 0);
        if (put_op(e, F_BLOCKS) < 0) return -1;
        if (put(e, (int32_t)(item_min > ITEM_MIN_CAP ? ITEM_MIN_CAP : item_min)) < 0) return -1;
        if (put(e, 0) < 0) return -1; /* after: patched below */
        e->last = -1;
        if (code[at] == OP_MAP && put_merged(e, F_RUNS, 1) < 0) return -1;
        if (flatten(pg, item, e) < 0) return -1;
        if (put_op(e, F_NEXT) < 0 || put(e, (int32_t)blocks) < 0) return -1;
        e->out[blocks + 2] = (int32_t)e->len;
        e->last = -1;
        return 0;
    }
    default:
        PyErr_SetString(PyExc_ValueError, "avro program: unknown opcode");
        return -1;
    }
}

/* ---------------------------------------------------------------- walk */

typedef struct {
    int64_t left;   /* items left in the block */
    Pos sized_end;  /* a sized block's end, or NULL */
} Frame;

/* A block count (and a negative count's byte size): 0 when the array ends, 1 when a
 * block of items follows (f filled), -1 when the row failed. */
static int block_head(Walk *w, Pos *pp, Frame *f, int64_t item_min, int later) {
    Pos count_at = *pp, p;
    int64_t count;
    p = read_long(w, count_at, &count);
    if (p == NULL) return -1;
    *pp = p;
    if (count == 0) return 0;
    if (w->canonical && (count < 0 || later)) {
        fail(w, S_BLOCKS, count_at);
        return -1;
    }
    f->sized_end = NULL;
    if (count < 0) {
        if (count == INT64_MIN) {
            fail(w, S_COUNT, count_at);
            return -1;
        }
        count = -count;
        Pos size_at = p;
        int64_t size;
        p = read_long(w, p, &size);
        if (p == NULL) return -1;
        if (size < 0 || size > w->end - p) {
            fail(w, size < 0 ? S_BLOCK_SIZE : S_TRUNCATED, size_at);
            return -1;
        }
        f->sized_end = p + size;
        *pp = p;
    }
    if (item_min > 0 ? count > (w->end - p) / item_min : count > w->empty_left) {
        fail(w, S_COUNT, count_at);
        return -1;
    }
    if (item_min == 0) w->empty_left -= count;
    f->left = count;
    return 1;
}

/* An int64 held in two int32 words, the high one first. */
static inline int64_t word64(const int32_t *at) {
    return (int64_t)(((uint64_t)(uint32_t)at[0] << 32) | (uint32_t)at[1]);
}

/* Walk one body: NULL when it failed, else the position where its record ended. */
static Pos walk_row(Walk *w, const int32_t *code, Pos p) {
    Frame stack[MAX_DEPTH + 1];
    int depth = 0;
    Py_ssize_t pc = 0;
    int64_t v, n;
    Pos q;
/* The value at p, read by `read` (read_long or read_run) into v, q past it; a failed
 * read has failed the row. */
#define READ(read)                   \
    q = read(w, p, &v);              \
    if (q == NULL) return NULL
/* The value read is good: p moves past it, pc past the op's `words` words. */
#define ACCEPT(words)                \
    p = q;                           \
    pc += (words);                   \
    NEXT
/* The op's count of values of one kind (code[pc + 1]), each read by `read`, dropped. */
#define DROP_EACH(read)                   \
    n = code[pc + 1];                     \
    for (int64_t k = 0; k < n; k++) {     \
        p = read(w, p, &v);               \
        if (p == NULL) return NULL;       \
    }                                     \
    pc += 2;                              \
    NEXT
#if defined(__GNUC__) && !defined(AVRO_WALK_SWITCH)
    /* threaded dispatch: each op jumps to the next one's handler itself, so the branch
     * predictor learns each op's successor */
    static const void *const ops[] = {
        &&L_F_END, &&L_F_SKIP, &&L_F_LONGS, &&L_F_RUNS, &&L_F_INT, &&L_F_BOOL, &&L_F_UUID,
        &&L_F_ENUM, &&L_F_DECIMAL, &&L_F_UNION, &&L_F_JUMP, &&L_F_BLOCKS, &&L_F_NEXT,
        &&L_F_RANGE, &&L_F_FDECIMAL,
    };
#define CASE(op) L_##op:
#define NEXT goto *ops[code[pc]]
    NEXT;
    {
        {
#else
#define CASE(op) case op:
#define NEXT break
    for (;;) {
        switch (code[pc]) {
#endif
        CASE(F_END) return p;
        CASE(F_SKIP)
            if (w->end - p < code[pc + 1]) return fail(w, S_TRUNCATED, p);
            p += code[pc + 1];
            pc += 2;
            NEXT;
        CASE(F_LONGS) DROP_EACH(read_long);
        CASE(F_RUNS) DROP_EACH(read_run);
        CASE(F_INT)
            READ(read_long);
            if (v < INT32_MIN || v > INT32_MAX) return fail(w, S_INT_RANGE, p);
            ACCEPT(1);
        CASE(F_RANGE)
            READ(read_long);
            if (v < word64(code + pc + 1) || v > word64(code + pc + 3)) {
                w->op = code[pc + 5];
                return fail(w, S_RANGE, p);
            }
            ACCEPT(6);
        CASE(F_BOOL)
            if (p >= w->end) return fail(w, S_TRUNCATED, p);
            if (*p > 1) return fail(w, S_BAD_BOOLEAN, p);
            p += 1;
            pc += 1;
            NEXT;
        CASE(F_UUID)
            READ(read_run);
            /* outside canonical mode the reader parses the text (and refuses it) */
            if (w->canonical && (v != 36 || !uuid_canonical(q - 36))) return fail(w, S_BAD_UUID, p);
            ACCEPT(1);
        CASE(F_ENUM)
            READ(read_long);
            if (v < 0 || v >= code[pc + 1]) return fail(w, S_BAD_ENUM, p);
            ACCEPT(2);
        CASE(F_DECIMAL)
            READ(read_run);
            if (w->canonical) {
                const unsigned char *d = q - v;
                int32_t most = code[pc + 1];
                if (v == 0 || (most > 0 && v > most)) return fail(w, S_BAD_DECIMAL, p);
                /* minimal two's complement: the first byte is not just sign extension */
                if (v >= 2 && ((d[0] == 0x00 && !(d[1] & 0x80)) || (d[0] == 0xFF && (d[1] & 0x80))))
                    return fail(w, S_BAD_DECIMAL, p);
            }
            if (!decimal_fits(q - v, v, code[pc + 2])) {
                w->op = code[pc + 3];
                return fail(w, S_PRECISION, p);
            }
            ACCEPT(4);
        CASE(F_FDECIMAL)
            if (w->end - p < code[pc + 1]) return fail(w, S_TRUNCATED, p);
            if (!decimal_fits(p, code[pc + 1], code[pc + 2])) {
                w->op = code[pc + 3];
                return fail(w, S_PRECISION, p);
            }
            p += code[pc + 1];
            pc += 4;
            NEXT;
        CASE(F_UNION)
            READ(read_long);
            if (v < 0 || v >= code[pc + 1]) return fail(w, S_BAD_BRANCH, p);
            p = q;
            pc = code[pc + 2 + v];
            NEXT;
        CASE(F_JUMP) pc = code[pc + 1]; NEXT;
        CASE(F_BLOCKS) {
            int more = block_head(w, &p, &stack[depth], code[pc + 1], 0);
            if (more < 0) return NULL;
            if (more) {
                depth++;
                pc += 3;
            } else {
                pc = code[pc + 2];
            }
            NEXT;
        }
        CASE(F_NEXT) {
            Frame *f = &stack[depth - 1];
            if (--f->left > 0) {
                pc = code[pc + 1] + 3;
                NEXT;
            }
            Py_ssize_t blocks = code[pc + 1];
            if (f->sized_end != NULL && p != f->sized_end) return fail(w, S_BLOCK_SIZE, p);
            int more = block_head(w, &p, f, code[blocks + 1], 1);
            if (more < 0) return NULL;
            if (more) {
                pc = blocks + 3;
            } else {
                depth--;
                pc += 2;
            }
            NEXT;
        }
#if !defined(__GNUC__) || defined(AVRO_WALK_SWITCH)
        default: return fail(w, S_TRUNCATED, p); /* unreachable: the code is built here */
#endif
        }
    }
#undef DROP_EACH
#undef ACCEPT
#undef READ
#undef CASE
#undef NEXT
}

/* Walk the body from start to end with a fresh state; returns its status: S_OK when it
 * is one record that ends at end, S_LEFTOVER when bytes follow the record. */
static int walk_body(Walk *w, const int32_t *code, Pos start, Pos end) {
    w->start = start;
    w->end = end;
    w->status = S_OK;
    w->where = 0;
    w->empty_left = MAX_EMPTY_ITEMS;
    w->op = -1;
    Pos p = walk_row(w, code, start);
    if (p != NULL && p != end) fail(w, S_LEFTOVER, p);
    return w->status;
}

/* ---------------------------------------------------------------- module */

/* Check the program in `code`, flatten it into `flat` and check `offsets` against the
 * data's length. Returns the number of bodies, or -1 with an exception; release() frees
 * what it allocated. */
static Py_ssize_t prepare(const Py_buffer *code, const Py_buffer *offsets, Py_ssize_t data_len,
                          Program *pg, Emit *flat) {
    if (code->len % 4 != 0 || code->len < 4 || code->len / 4 > MAX_PROGRAM) {
        PyErr_SetString(PyExc_ValueError, "avro program must be 1 to 2**20 int32 words");
        return -1;
    }
    pg->code = (const int32_t *)code->buf;
    pg->len = code->len / 4;
    pg->next = PyMem_Calloc((size_t)pg->len, sizeof(Py_ssize_t));
    pg->min_size = PyMem_Calloc((size_t)pg->len, sizeof(int64_t));
    if (pg->next == NULL || pg->min_size == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (prog_check(pg, 0, 0) < 0) return -1;
    if (pg->next[0] != pg->len) {
        PyErr_SetString(PyExc_ValueError, "avro program has words after its type");
        return -1;
    }
    /* at most 7 flat words per program word (a union branch adds a target and a
     * jump, an array its head and F_NEXT), and F_END */
    flat->cap = 8 * pg->len + 8;
    flat->out = PyMem_Calloc((size_t)flat->cap, sizeof(int32_t));
    flat->last = -1;
    if (flat->out == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (flatten(pg, 0, flat) < 0 || put_op(flat, F_END) < 0) return -1;
    return body_count(offsets, data_len);
}

/* Free what prepare() allocated (all of it, also after it failed half way). */
static void release(Program *pg, Emit *flat) {
    PyMem_Free(pg->next);
    PyMem_Free(pg->min_size);
    PyMem_Free(flat->out);
}

static PyObject *walk(PyObject *module, PyObject *args, PyObject *kwds) {
    (void)module;
    static char *kwlist[] = {"program", "data", "offsets", "canonical", NULL};
    Py_buffer code, data, offsets;
    int canonical = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*y*y*|p", kwlist, &code, &data, &offsets,
                                     &canonical))
        return NULL;
    PyObject *result = NULL, *status = NULL, *where = NULL, *ops = NULL;
    Program pg = {0};
    Emit flat = {0};
    Py_ssize_t n = prepare(&code, &offsets, data.len, &pg, &flat);
    if (n < 0) goto done;
    const int32_t *off = (const int32_t *)offsets.buf;
    status = PyBytes_FromStringAndSize(NULL, n);
    where = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    ops = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (status == NULL || where == NULL || ops == NULL) goto done;
    unsigned char *st = (unsigned char *)PyBytes_AS_STRING(status);
    int32_t *wh = (int32_t *)PyBytes_AS_STRING(where);
    int32_t *op = (int32_t *)PyBytes_AS_STRING(ops);
    Py_ssize_t bad = 0, first = -1;
    Py_BEGIN_ALLOW_THREADS /* no Python object below: the buffers are held */
    const unsigned char *base = (const unsigned char *)data.buf;
    Walk w;
    w.canonical = canonical;
    for (Py_ssize_t i = 0; i < n; i++) {
        walk_body(&w, flat.out, base + off[i], base + off[i + 1]);
        st[i] = (unsigned char)w.status;
        wh[i] = (int32_t)w.where; /* a body is under 2 GiB: int32 offsets */
        op[i] = w.op;
        if (w.status != S_OK) {
            if (first < 0) first = i;
            bad++;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(OOnnO)", status, where, bad, first, ops);
done:
    Py_XDECREF(status);
    Py_XDECREF(where);
    Py_XDECREF(ops);
    release(&pg, &flat);
    PyBuffer_Release(&code);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return result;
}

/* A zigzag varint of v at out; the bytes written (at most 10). */
static Py_ssize_t put_long(unsigned char *out, int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t k = 0;
    while (u >= 0x80) {
        out[k++] = (unsigned char)(u | 0x80);
        u >>= 7;
    }
    out[k++] = (unsigned char)u;
    return k;
}

#define FRAME_BYTES 5 /* the Confluent frame: magic byte 0, big-endian int32 schema id */

static PyObject *framed_block(PyObject *module, PyObject *args, PyObject *kwds) {
    (void)module;
    static char *kwlist[] = {"program", "data", "offsets", "schema_id", "head", "tail", NULL};
    Py_buffer code, data, offsets, head, tail;
    long long schema_id;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*y*y*Ly*y*", kwlist, &code, &data, &offsets,
                                     &schema_id, &head, &tail))
        return NULL;
    PyObject *result = NULL, *block = NULL;
    Program pg = {0};
    Emit flat = {0};
    Py_ssize_t n = prepare(&code, &offsets, data.len, &pg, &flat);
    if (n < 0) goto done;
    const int32_t *off = (const int32_t *)offsets.buf;
    if (schema_id < 0 || schema_id > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "schema_id must fit 32 unsigned bits");
        goto done;
    }
    /* the block: head, the count, the bodies' byte size, the bodies, tail */
    Py_ssize_t span = n ? (Py_ssize_t)off[n] - off[0] : 0;
    block = PyBytes_FromStringAndSize(NULL, head.len + 20 + span + tail.len);
    if (block == NULL) goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(block);
    memcpy(out, head.buf, (size_t)head.len);
    unsigned char *count_at = out + head.len;
    unsigned char *bodies = count_at + 20; /* moved down once the two varints are known */
    unsigned char frame[FRAME_BYTES] = {0, (unsigned char)(schema_id >> 24),
                                        (unsigned char)(schema_id >> 16),
                                        (unsigned char)(schema_id >> 8), (unsigned char)schema_id};
    int ok = 1;
    Py_ssize_t size = 0;
    Py_BEGIN_ALLOW_THREADS /* no Python object below: the buffers are held */
    const unsigned char *base = (const unsigned char *)data.buf;
    Walk w;
    w.canonical = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        const unsigned char *row = base + off[i];
        Py_ssize_t len = (Py_ssize_t)off[i + 1] - off[i];
        if (len < FRAME_BYTES || memcmp(row, frame, FRAME_BYTES) != 0) {
            ok = 0; /* not framed, or framed for another writer schema */
            break;
        }
        if (walk_body(&w, flat.out, row + FRAME_BYTES, row + len) != S_OK) {
            ok = 0;
            break;
        }
        memcpy(bodies + size, w.start, (size_t)(len - FRAME_BYTES));
        size += len - FRAME_BYTES;
    }
    if (ok) {
        unsigned char varints[20];
        Py_ssize_t k = put_long(varints, (int64_t)n);
        k += put_long(varints + k, (int64_t)size);
        memmove(count_at + k, bodies, (size_t)size);
        memcpy(count_at, varints, (size_t)k);
        memcpy(count_at + k + size, tail.buf, (size_t)tail.len);
        size = head.len + k + size + tail.len;
    }
    Py_END_ALLOW_THREADS
    if (!ok) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (_PyBytes_Resize(&block, size) < 0) goto done; /* frees block on failure */
    result = block;
    block = NULL;
done:
    Py_XDECREF(block);
    release(&pg, &flat);
    PyBuffer_Release(&code);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&head);
    PyBuffer_Release(&tail);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_VARARGS | METH_KEYWORDS,
     "walk(program, data, offsets, canonical=True) -> (status, where, bad, first, op)\n\n"
     "Walk each body data[offsets[i]:offsets[i+1]] (int32 offsets) as one record of the\n"
     "schema program. status[i] is 0 for a body that holds exactly one record (in its\n"
     "canonical encoding unless canonical=False), else the reason of its first failure;\n"
     "where holds that read's byte offset in the body (int32 per row); bad counts the\n"
     "failed rows and first is the first of them (-1: none). op holds, for a date, time\n"
     "or timestamp out of range or a decimal beyond its precision, the program word of\n"
     "that value (int32 per row; -1 for any other row)."},
    {"framed_block", (PyCFunction)(void (*)(void))framed_block, METH_VARARGS | METH_KEYWORDS,
     "framed_block(program, data, offsets, schema_id, head, tail) -> bytes | None\n\n"
     "The Confluent peel, the walk and the container block in one pass: each row\n"
     "data[offsets[i]:offsets[i+1]] (int32 offsets) must start with the frame of\n"
     "`schema_id` (magic byte 0, the id big-endian) and its body hold exactly one record\n"
     "of the schema program in its canonical encoding, as walk() proves it. Returns\n"
     "head + the row count + the bodies' byte size (zigzag varints) + the bodies, frames\n"
     "stripped, + tail; None as soon as a row is not framed so or not proven (the\n"
     "caller then peels and walks row by row to say why)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "thalweg_bytewax.codecs._avro_native",
    .m_doc = "Avro bodies walked against a schema program (the fast path's exactness check).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__avro_native(void) {
    lower_hex_init();
    return PyModule_Create(&module);
}
