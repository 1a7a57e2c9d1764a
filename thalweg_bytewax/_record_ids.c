/*
 * Record ids of a whole partition batch in one call: SHA-256/128 of a shared prefix,
 * then each record's big-endian offset, null flag and payload (see metadata.record_id).
 *
 * The payloads come as Arrow buffers (int32 offsets + data + a validity mask), the ids
 * go out as one buffer of 16-byte digests: no Python object per record, and the
 * hashing runs without the GIL. SHA-256 is OpenSSL's, which uses the CPU's SHA
 * instructions where there are any. Optional at build: without OpenSSL's headers the
 * package computes the same ids with hashlib.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED
#include <Python.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <string.h>

#define ID_BYTES 16

static PyObject *record_ids(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer prefix, offsets, voffs, data, valid;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*", &prefix, &offsets, &voffs, &data, &valid))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = offsets.len / 8;
    if (offsets.len % 8 || voffs.len != (n + 1) * 4 || (valid.len != 0 && valid.len != n)) {
        PyErr_SetString(PyExc_ValueError,
                        "record_ids: expected n int64 offsets, n + 1 int32 value offsets and "
                        "n validity bytes (or none)");
        goto done;
    }
    const int64_t *off = offsets.buf;
    const int32_t *vo = voffs.buf;
    const unsigned char *ok = valid.len ? valid.buf : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (vo[i] < 0 || vo[i] > vo[i + 1] || vo[i + 1] > data.len) {
            PyErr_Format(PyExc_ValueError, "record_ids: value offsets out of bounds at %zd", i);
            goto done;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, n * ID_BYTES);
    if (out == NULL) goto done;
    unsigned char *ids = (unsigned char *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    SHA256_CTX base, ctx;
    SHA256_Init(&base);
    SHA256_Update(&base, prefix.buf, (size_t)prefix.len);
    const unsigned char *bytes = data.buf;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char head[9];
        uint64_t o = (uint64_t)off[i];
        for (int b = 0; b < 8; b++) head[b] = (unsigned char)(o >> (56 - 8 * b));
        int present = ok == NULL || ok[i];
        head[8] = (unsigned char)(present ? 1 : 0);
        ctx = base;
        SHA256_Update(&ctx, head, sizeof head);
        if (present) SHA256_Update(&ctx, bytes + vo[i], (size_t)(vo[i + 1] - vo[i]));
        SHA256_Final(digest, &ctx);
        memcpy(ids + i * ID_BYTES, digest, ID_BYTES);
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&voffs);
    PyBuffer_Release(&data);
    PyBuffer_Release(&valid);
    return out;
}

static PyMethodDef methods[] = {
    {"record_ids", record_ids, METH_VARARGS,
     "record_ids(prefix, offsets, value_offsets, value_data, valid) -> bytes\n\n"
     "16-byte ids, one per record: SHA-256 over prefix, the big-endian int64 offset, a\n"
     "null flag and the payload, truncated. `valid` holds one byte per record (0 for a\n"
     "null payload) or is empty when every payload is present."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "thalweg_bytewax._record_ids",
    .m_doc = "Record ids of a batch in one call (see thalweg_bytewax.records.ids).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__record_ids(void) { return PyModule_Create(&module); }
