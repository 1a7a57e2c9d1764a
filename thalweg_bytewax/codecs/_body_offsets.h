/*
 * The bodies of a binary column as the native codecs take them: one data buffer and
 * n + 1 int32 offsets into it, body i being data[off[i], off[i + 1]).
 *
 * Included by _avro_native.c and _json_native.c, which check the offsets they are
 * given the same way before reading any body.
 */
#ifndef THALWEG_BODY_OFFSETS_H
#define THALWEG_BODY_OFFSETS_H

#include <Python.h>

#include <stdint.h>

/* The number of bodies `offsets` delimits in `data_len` bytes of data, once it is
 * checked to hold n + 1 int32 values, none negative, none before the one ahead of it
 * and none past the data; -1 with a ValueError set when it does not. */
static Py_ssize_t body_count(const Py_buffer *offsets, Py_ssize_t data_len) {
    if (offsets->len % 4 != 0 || offsets->len < 4) {
        PyErr_SetString(PyExc_ValueError, "offsets must be n + 1 int32 values");
        return -1;
    }
    Py_ssize_t n = offsets->len / 4 - 1;
    const int32_t *off = (const int32_t *)offsets->buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (off[i] < 0 || off[i] > off[i + 1] || off[i + 1] > data_len) {
            PyErr_Format(PyExc_ValueError, "offsets out of bounds at row %zd", i);
            return -1;
        }
    }
    return n;
}

#endif
