/*
 * A batch Kafka consume straight into Arrow buffers: no Python object per message.
 *
 * The data plane of a KafkaSource partition when this extension is built. It drives the
 * librdkafka that confluent-kafka's wheel bundles (loaded at run time by path, so no
 * header or system package is needed at install: the few prototypes used are declared
 * here, from librdkafka's stable C API), with its own consumer handles created from the
 * same settings. A Client is one handle; each Consumer reads one topic-partition of it,
 * assigned without a consumer group, from that partition's own queue.
 *
 * Consumer.consume(max_records, max_bytes) takes up to max_records messages (and stops
 * after the first message that reaches max_bytes of keys and values; the rest wait for
 * the next call) and returns the columns of a RawBatch as bytes objects holding Arrow
 * buffers: offsets, timestamps and their types, leader epochs, keys and values (validity
 * bitmap, int32 offsets, data), and headers (list offsets, names, values with validity).
 * Null and empty keys, values and header values stay distinct exactly as confluent-kafka
 * tells them apart (a NULL pointer is null). Control records and transaction markers
 * never reach the application in librdkafka, on either path.
 *
 * Message-level errors are returned beside the columns as (code, text); client-level
 * errors (brokers down, authentication, fatal errors) are recorded by an error callback
 * served within consume() and read with take_client_error().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ librdkafka ABI */

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_headers_s rd_kafka_headers_t;
typedef int rd_kafka_resp_err_t;
typedef struct rd_kafka_error_s rd_kafka_error_t;

typedef struct {
    rd_kafka_resp_err_t err;
    void *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

typedef struct {
    char *topic;
    int32_t partition;
    int64_t offset;
    void *metadata;
    size_t metadata_size;
    void *opaque;
    rd_kafka_resp_err_t err;
    void *_private;
} rd_kafka_topic_partition_t;

typedef struct {
    int cnt;
    int size;
    rd_kafka_topic_partition_t *elems;
} rd_kafka_topic_partition_list_t;

#define RD_KAFKA_CONSUMER 1
#define RD_KAFKA_CONF_OK 0
#define RD_KAFKA_RESP_ERR__FATAL (-150)
#define RD_KAFKA_RESP_ERR__NOENT (-156)

static struct {
    int loaded;
    rd_kafka_conf_t *(*conf_new)(void);
    int (*conf_set)(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
    void (*conf_destroy)(rd_kafka_conf_t *);
    void (*conf_set_error_cb)(rd_kafka_conf_t *, void (*)(rd_kafka_t *, int, const char *, void *));
    void (*conf_set_opaque)(rd_kafka_conf_t *, void *);
    rd_kafka_t *(*new_)(int, rd_kafka_conf_t *, char *, size_t);
    void (*destroy)(rd_kafka_t *);
    void (*queue_destroy)(rd_kafka_queue_t *);
    ssize_t (*consume_batch_queue)(rd_kafka_queue_t *, int, rd_kafka_message_t **, size_t);
    void (*message_destroy)(rd_kafka_message_t *);
    const char *(*message_errstr)(const rd_kafka_message_t *);
    int64_t (*message_timestamp)(const rd_kafka_message_t *, int *);
    int32_t (*message_leader_epoch)(const rd_kafka_message_t *);
    rd_kafka_resp_err_t (*message_headers)(const rd_kafka_message_t *, rd_kafka_headers_t **);
    rd_kafka_resp_err_t (*header_get_all)(const rd_kafka_headers_t *, size_t, const char **,
                                          const void **, size_t *);
    rd_kafka_topic_partition_list_t *(*tpl_new)(int);
    rd_kafka_topic_partition_t *(*tpl_add)(rd_kafka_topic_partition_list_t *, const char *, int32_t);
    void (*tpl_destroy)(rd_kafka_topic_partition_list_t *);
    void (*tp_set_leader_epoch)(rd_kafka_topic_partition_t *, int32_t);
    rd_kafka_resp_err_t (*position)(rd_kafka_t *, rd_kafka_topic_partition_list_t *);
    rd_kafka_resp_err_t (*get_watermark_offsets)(rd_kafka_t *, const char *, int32_t, int64_t *,
                                                 int64_t *);
    rd_kafka_resp_err_t (*consumer_close)(rd_kafka_t *);
    rd_kafka_queue_t *(*queue_get_consumer)(rd_kafka_t *);
    rd_kafka_queue_t *(*queue_get_partition)(rd_kafka_t *, const char *, int32_t);
    void (*queue_forward)(rd_kafka_queue_t *, rd_kafka_queue_t *);
    const char *(*topic_name)(const void *);
    rd_kafka_error_t *(*incremental_assign)(rd_kafka_t *, const rd_kafka_topic_partition_list_t *);
    rd_kafka_error_t *(*incremental_unassign)(rd_kafka_t *,
                                              const rd_kafka_topic_partition_list_t *);
    const char *(*error_string)(const rd_kafka_error_t *);
    void (*error_destroy)(rd_kafka_error_t *);
    int (*tpl_del)(rd_kafka_topic_partition_list_t *, const char *, int32_t);
    int (*poll)(rd_kafka_t *, int);
    rd_kafka_resp_err_t (*fatal_error)(rd_kafka_t *, char *, size_t);
    const char *(*err2str)(rd_kafka_resp_err_t);
} rk;

static void *sym(void *lib, const char *name, int *missing) {
    void *p = dlsym(lib, name);
    if (p == NULL) *missing = 1;
    return p;
}

static PyObject *load(PyObject *self, PyObject *arg) {
    const char *path = PyUnicode_AsUTF8(arg);
    if (path == NULL) return NULL;
    if (rk.loaded) Py_RETURN_NONE;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_OSError, "cannot load librdkafka: %s", dlerror());
        return NULL;
    }
    int missing = 0;
#define SYM(field, name) *(void **)(&rk.field) = sym(lib, name, &missing)
    SYM(conf_new, "rd_kafka_conf_new");
    SYM(conf_set, "rd_kafka_conf_set");
    SYM(conf_destroy, "rd_kafka_conf_destroy");
    SYM(conf_set_error_cb, "rd_kafka_conf_set_error_cb");
    SYM(conf_set_opaque, "rd_kafka_conf_set_opaque");
    SYM(new_, "rd_kafka_new");
    SYM(destroy, "rd_kafka_destroy");
    SYM(queue_destroy, "rd_kafka_queue_destroy");
    SYM(consume_batch_queue, "rd_kafka_consume_batch_queue");
    SYM(message_destroy, "rd_kafka_message_destroy");
    SYM(message_errstr, "rd_kafka_message_errstr");
    SYM(message_timestamp, "rd_kafka_message_timestamp");
    SYM(message_leader_epoch, "rd_kafka_message_leader_epoch");
    SYM(message_headers, "rd_kafka_message_headers");
    SYM(header_get_all, "rd_kafka_header_get_all");
    SYM(tpl_new, "rd_kafka_topic_partition_list_new");
    SYM(tpl_add, "rd_kafka_topic_partition_list_add");
    SYM(tpl_destroy, "rd_kafka_topic_partition_list_destroy");
    SYM(tp_set_leader_epoch, "rd_kafka_topic_partition_set_leader_epoch");
    SYM(position, "rd_kafka_position");
    SYM(get_watermark_offsets, "rd_kafka_get_watermark_offsets");
    SYM(consumer_close, "rd_kafka_consumer_close");
    SYM(queue_get_consumer, "rd_kafka_queue_get_consumer");
    SYM(queue_get_partition, "rd_kafka_queue_get_partition");
    SYM(queue_forward, "rd_kafka_queue_forward");
    SYM(topic_name, "rd_kafka_topic_name");
    SYM(incremental_assign, "rd_kafka_incremental_assign");
    SYM(incremental_unassign, "rd_kafka_incremental_unassign");
    SYM(error_string, "rd_kafka_error_string");
    SYM(error_destroy, "rd_kafka_error_destroy");
    SYM(tpl_del, "rd_kafka_topic_partition_list_del");
    SYM(poll, "rd_kafka_poll");
    SYM(fatal_error, "rd_kafka_fatal_error");
    SYM(err2str, "rd_kafka_err2str");
#undef SYM
    if (missing) {
        dlclose(lib);
        PyErr_SetString(PyExc_OSError, "librdkafka lacks a symbol this extension needs (>= 2.1)");
        return NULL;
    }
    rk.loaded = 1;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- Client */

#define ERR_TEXT 512

typedef struct Consumer Consumer;

/* One librdkafka handle shared by the consumers of several partitions: each consumer
   reads its partition's own queue (forwarding to the consumer queue removed), so one
   fetch request serves every partition led by a broker and one set of threads runs.
   Assignments wait in `pending` until a consumer of the client first consumes, so the
   partitions built together are assigned in one call, before the handle learns the
   topic's metadata: librdkafka validates a resumed position's leader epoch against the
   broker's log (KIP-320) only when it learns the leader after the assignment, and
   taking a partition's queue creates the partition and asks for that metadata, so the
   queues are taken right after the assignment. A fetch answered in between lands on
   the consumer queue: every consume drains it into the owners' `stray` lists right
   after reading its own partition queue and puts its strays before what that read
   returned (they are older), so no record is lost or reordered. */
typedef struct {
    PyObject_HEAD
    rd_kafka_t *rk;
    rd_kafka_queue_t *cq; /* the consumer queue: normally empty, see above */
    pthread_mutex_t lock;
    rd_kafka_topic_partition_list_t *pending;
    int started;   /* an assignment was made: the handle may hold the metadata */
    int queue_delay_ms; /* tests: widen the window between assigning and taking queues */
    long long strays;   /* messages that came through the consumer queue */
    Py_ssize_t nconsumers, cap;
    Consumer **consumers; /* open consumers, told of client errors */
    int fatal_err;
    char fatal_text[ERR_TEXT];
    int fatal;
} Client;

struct Consumer {
    PyObject_HEAD
    Client *client;
    rd_kafka_queue_t *queue;
    char *topic;
    int32_t partition;
    int assigned; /* 1: pending in the client, 2: assigned */
    rd_kafka_message_t **stray;    /* read from the consumer queue, not yet taken */
    Py_ssize_t nstray, capstray;   /* (guarded by the client's lock) */
    rd_kafka_message_t **msgs;     /* taken from librdkafka, not yet returned */
    Py_ssize_t cap, npending, pos; /* msgs[pos:npending] wait for the next call */
    /* each returned message's headers, looked up once a call: librdkafka parses a
       record's header section on every lookup that finds none (a buffer allocated and
       freed each time), and every record without headers has a one-byte section */
    rd_kafka_headers_t **hdrs;
    Py_ssize_t caphdrs;
    /* client errors recorded by the error callback (guarded by the client's lock) */
    long client_errors;
    int client_err;
    char client_text[ERR_TEXT];
};

/* Client-level errors (brokers down, authentication, fatal errors) concern every
   partition of the handle: each open consumer records them. Served by rd_kafka_poll
   from whichever consumer polls, with the GIL released. */
static void on_error(rd_kafka_t *h, int err, const char *reason, void *opaque) {
    Client *cl = (Client *)opaque;
    char buf[ERR_TEXT];
    int fatal = err == RD_KAFKA_RESP_ERR__FATAL;
    if (fatal) err = rk.fatal_error(h, buf, sizeof buf);
    else snprintf(buf, ERR_TEXT, "%s", reason ? reason : "");
    pthread_mutex_lock(&cl->lock);
    if (!cl->fatal) { /* the first fatal error is the one to report */
        if (fatal) {
            cl->fatal = 1;
            cl->fatal_err = err;
            snprintf(cl->fatal_text, ERR_TEXT, "%s", buf);
        }
        for (Py_ssize_t i = 0; i < cl->nconsumers; i++) {
            Consumer *c = cl->consumers[i];
            c->client_errors++;
            c->client_err = err;
            snprintf(c->client_text, ERR_TEXT, "%s", buf);
        }
    }
    pthread_mutex_unlock(&cl->lock);
}

static void client_release(Client *cl) {
    if (cl->cq) {
        rk.queue_destroy(cl->cq);
        cl->cq = NULL;
    }
    if (cl->pending) {
        rk.tpl_destroy(cl->pending);
        cl->pending = NULL;
    }
    if (cl->rk) {
        rd_kafka_t *h = cl->rk;
        cl->rk = NULL;
        Py_BEGIN_ALLOW_THREADS
        rk.consumer_close(h);
        rk.destroy(h);
        Py_END_ALLOW_THREADS
    }
}

static void client_dealloc(Client *cl) {
    client_release(cl);
    free(cl->consumers);
    pthread_mutex_destroy(&cl->lock);
    Py_TYPE(cl)->tp_free((PyObject *)cl);
}

static PyObject *client_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Client *cl = (Client *)PyType_GenericNew(type, args, kwds);
    if (cl != NULL) pthread_mutex_init(&cl->lock, NULL);
    return (PyObject *)cl;
}

static int client_init(Client *cl, PyObject *args, PyObject *kwds) {
    PyObject *settings;
    int delay = 0;
    static char *kwlist[] = {"settings", "queue_delay_ms", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!|$i", kwlist, &PyDict_Type, &settings,
                                     &delay))
        return -1;
    if (!rk.loaded) {
        PyErr_SetString(PyExc_RuntimeError, "librdkafka is not loaded; call load() first");
        return -1;
    }
    cl->queue_delay_ms = delay;
    if (cl->rk != NULL || cl->started) {
        PyErr_SetString(PyExc_RuntimeError, "client already initialised");
        return -1;
    }
    char errstr[ERR_TEXT];
    rd_kafka_conf_t *conf = rk.conf_new();
    PyObject *key, *value;
    Py_ssize_t i = 0;
    while (PyDict_Next(settings, &i, &key, &value)) {
        const char *k = PyUnicode_AsUTF8(key);
        const char *v = k ? PyUnicode_AsUTF8(value) : NULL;
        if (v == NULL) {
            rk.conf_destroy(conf);
            return -1;
        }
        if (rk.conf_set(conf, k, v, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            rk.conf_destroy(conf);
            /* errstr may quote the value (a secret): name the property only */
            PyErr_Format(PyExc_ValueError, "`%s`", k);
            return -1;
        }
    }
    rk.conf_set_opaque(conf, cl);
    rk.conf_set_error_cb(conf, on_error);
    cl->pending = rk.tpl_new(8);
    cl->rk = rk.new_(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr); /* owns conf on success */
    if (cl->rk == NULL) {
        rk.conf_destroy(conf);
        PyErr_SetString(PyExc_ValueError, "the client could not be created from them");
        return -1;
    }
    cl->cq = rk.queue_get_consumer(cl->rk);
    return 0;
}

/* Assign what waits in `pending` (one call for the partitions built together). */
static int client_flush(Client *cl) {
    pthread_mutex_lock(&cl->lock);
    rd_kafka_topic_partition_list_t *l = NULL;
    if (cl->pending && cl->pending->cnt > 0) {
        l = cl->pending;
        cl->pending = rk.tpl_new(8);
        cl->started = 1;
        for (Py_ssize_t i = 0; i < cl->nconsumers; i++)
            if (cl->consumers[i]->assigned == 1) cl->consumers[i]->assigned = 2;
    }
    pthread_mutex_unlock(&cl->lock);
    if (l == NULL) return 0;
    rd_kafka_error_t *error;
    Py_BEGIN_ALLOW_THREADS
    error = rk.incremental_assign(cl->rk, l);
    Py_END_ALLOW_THREADS
    rk.tpl_destroy(l);
    if (error != NULL) {
        PyErr_Format(PyExc_RuntimeError, "assign failed: %s", rk.error_string(error));
        rk.error_destroy(error);
        return -1;
    }
    if (cl->queue_delay_ms > 0) {
        Py_BEGIN_ALLOW_THREADS
        usleep((useconds_t)cl->queue_delay_ms * 1000);
        Py_END_ALLOW_THREADS
    }
    int missing = 0;
    pthread_mutex_lock(&cl->lock);
    for (Py_ssize_t i = 0; i < cl->nconsumers; i++) {
        Consumer *c = cl->consumers[i];
        if (c->assigned != 2 || c->queue != NULL) continue;
        c->queue = rk.queue_get_partition(cl->rk, c->topic, c->partition);
        if (c->queue == NULL) missing = 1;
        else rk.queue_forward(c->queue, NULL);
    }
    pthread_mutex_unlock(&cl->lock);
    if (missing) {
        PyErr_SetString(PyExc_RuntimeError, "librdkafka gave no queue for an assigned partition");
        return -1;
    }
    return 0;
}

static int stray_push(Consumer *c, rd_kafka_message_t *m) {
    if (c->nstray == c->capstray) {
        Py_ssize_t cap = c->capstray ? c->capstray * 2 : 64;
        rd_kafka_message_t **grown = realloc(c->stray, sizeof(*grown) * (size_t)cap);
        if (grown == NULL) return -1;
        c->stray = grown;
        c->capstray = cap;
    }
    c->stray[c->nstray++] = m;
    return 0;
}

/* Route what a fetch answered before a partition's queue was taken to its consumer. */
static int client_drain(Client *cl) {
    rd_kafka_message_t *buf[256];
    for (;;) {
        /* non-blocking, and normally empty: not worth a GIL hand-off */
        ssize_t got = rk.consume_batch_queue(cl->cq, 0, buf, 256);
        if (got <= 0) return 0;
        int failed = 0;
        pthread_mutex_lock(&cl->lock);
        for (ssize_t i = 0; i < got; i++) {
            rd_kafka_message_t *m = buf[i];
            Consumer *owner = NULL;
            const char *name = m->rkt ? rk.topic_name(m->rkt) : NULL;
            for (Py_ssize_t j = 0; name && j < cl->nconsumers; j++) {
                Consumer *c = cl->consumers[j];
                if (c->partition == m->partition && c->topic && !strcmp(c->topic, name)) {
                    owner = c;
                    break;
                }
            }
            if (owner == NULL && m->err) { /* not a partition's: a client error */
                const char *text = rk.message_errstr(m);
                for (Py_ssize_t j = 0; j < cl->nconsumers; j++) {
                    Consumer *c = cl->consumers[j];
                    c->client_errors++;
                    c->client_err = m->err;
                    snprintf(c->client_text, ERR_TEXT, "%s", text ? text : "");
                }
            }
            cl->strays++;
            if (owner == NULL || stray_push(owner, m)) {
                failed |= owner != NULL;
                rk.message_destroy(m); /* a closed partition's, or out of memory */
            }
        }
        pthread_mutex_unlock(&cl->lock);
        if (failed) {
            PyErr_NoMemory();
            return -1;
        }
    }
}

static PyObject *client_get_started(Client *cl, void *closure) {
    (void)closure;
    return PyBool_FromLong(cl->started);
}

static PyObject *client_get_closed(Client *cl, void *closure) {
    (void)closure;
    return PyBool_FromLong(cl->rk == NULL);
}

static PyObject *client_get_consumers(Client *cl, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(cl->nconsumers);
}

static PyObject *client_get_strays(Client *cl, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(cl->strays);
}

static PyGetSetDef client_getset[] = {
    {"strays", (getter)client_get_strays, NULL,
     "Messages read from the consumer queue (fetched before a partition's queue was taken).",
     NULL},
    {"started", (getter)client_get_started, NULL,
     "Whether partitions were assigned (a resumed position joins only before).", NULL},
    {"closed", (getter)client_get_closed, NULL, "Whether the handle was closed.", NULL},
    {"consumers", (getter)client_get_consumers, NULL, "The open consumers of the handle.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ClientType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "thalweg_bytewax._kafka_native.Client",
    .tp_basicsize = sizeof(Client),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One librdkafka consumer handle shared by the Consumers of several partitions;\n"
              "closed when its last Consumer closes.",
    .tp_new = client_new,
    .tp_init = (initproc)client_init,
    .tp_dealloc = (destructor)client_dealloc,
    .tp_getset = client_getset,
};

/* -------------------------------------------------------------- Consumer */

static void consumer_detach(Consumer *c) {
    Client *cl = c->client;
    pthread_mutex_lock(&cl->lock);
    for (Py_ssize_t i = 0; i < cl->nconsumers; i++) {
        if (cl->consumers[i] == c) {
            cl->consumers[i] = cl->consumers[--cl->nconsumers];
            break;
        }
    }
    if (c->assigned == 1 && cl->pending) rk.tpl_del(cl->pending, c->topic, c->partition);
    Py_ssize_t left = cl->nconsumers;
    pthread_mutex_unlock(&cl->lock);
    if (c->assigned == 2 && cl->rk) {
        rd_kafka_topic_partition_list_t *l = rk.tpl_new(1);
        rk.tpl_add(l, c->topic, c->partition);
        rd_kafka_error_t *error;
        Py_BEGIN_ALLOW_THREADS
        error = rk.incremental_unassign(cl->rk, l);
        Py_END_ALLOW_THREADS
        if (error) rk.error_destroy(error); /* closing: nothing left to tell */
        rk.tpl_destroy(l);
    }
    c->assigned = 0;
    if (left == 0) client_release(cl); /* the last consumer closes the handle */
}

static void consumer_release(Consumer *c) {
    for (Py_ssize_t i = c->pos; i < c->npending; i++) rk.message_destroy(c->msgs[i]);
    c->pos = c->npending = 0;
    if (c->client) pthread_mutex_lock(&c->client->lock);
    for (Py_ssize_t i = 0; i < c->nstray; i++) rk.message_destroy(c->stray[i]);
    c->nstray = 0;
    if (c->client) pthread_mutex_unlock(&c->client->lock);
    if (c->queue) {
        rk.queue_destroy(c->queue);
        c->queue = NULL;
    }
    if (c->client) {
        consumer_detach(c);
        Py_CLEAR(c->client);
    }
    free(c->topic);
    c->topic = NULL;
}

static void consumer_dealloc(Consumer *c) {
    consumer_release(c);
    free(c->msgs);
    free(c->hdrs);
    free(c->stray);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int consumer_init(Consumer *c, PyObject *args, PyObject *kwds) {
    Client *cl;
    static char *kwlist[] = {"client", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!", kwlist, &ClientType, &cl)) return -1;
    if (c->client != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "consumer already initialised");
        return -1;
    }
    if (cl->rk == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the client is closed");
        return -1;
    }
    pthread_mutex_lock(&cl->lock);
    if (cl->nconsumers == cl->cap) {
        Py_ssize_t cap = cl->cap ? cl->cap * 2 : 8;
        Consumer **grown = realloc(cl->consumers, sizeof(*grown) * (size_t)cap);
        if (grown == NULL) {
            pthread_mutex_unlock(&cl->lock);
            PyErr_NoMemory();
            return -1;
        }
        cl->consumers = grown;
        cl->cap = cap;
    }
    cl->consumers[cl->nconsumers++] = c;
    pthread_mutex_unlock(&cl->lock);
    Py_INCREF(cl);
    c->client = cl;
    return 0;
}

static int check_open(Consumer *c) {
    if (c->client == NULL || c->client->rk == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "consumer is closed");
        return -1;
    }
    return 0;
}

/* Read one partition from offset: its queue is taken off the consumer queue now; the
   assignment itself waits for the client's next consume (client_flush). */
static PyObject *consumer_assign(Consumer *c, PyObject *args) {
    const char *topic;
    int partition, leader_epoch;
    long long offset;
    if (!PyArg_ParseTuple(args, "siLi", &topic, &partition, &offset, &leader_epoch)) return NULL;
    if (check_open(c)) return NULL;
    if (c->assigned || c->queue) {
        PyErr_SetString(PyExc_RuntimeError, "a consumer reads one partition, assigned once");
        return NULL;
    }
    Client *cl = c->client;
    c->topic = strdup(topic);
    if (c->topic == NULL) return PyErr_NoMemory();
    c->partition = partition;
    pthread_mutex_lock(&cl->lock);
    rd_kafka_topic_partition_t *tp = rk.tpl_add(cl->pending, topic, partition);
    tp->offset = offset;
    rk.tp_set_leader_epoch(tp, leader_epoch);
    c->assigned = 1;
    pthread_mutex_unlock(&cl->lock);
    Py_RETURN_NONE;
}

static PyObject *consumer_position(Consumer *c, PyObject *args) {
    const char *topic;
    int partition;
    if (!PyArg_ParseTuple(args, "si", &topic, &partition)) return NULL;
    if (check_open(c)) return NULL;
    rd_kafka_topic_partition_list_t *l = rk.tpl_new(1);
    rd_kafka_topic_partition_t *tp = rk.tpl_add(l, topic, partition);
    rk.position(c->client->rk, l);
    long long off = tp->offset;
    rk.tpl_destroy(l);
    return PyLong_FromLongLong(off);
}

static PyObject *consumer_watermarks(Consumer *c, PyObject *args) {
    const char *topic;
    int partition;
    if (!PyArg_ParseTuple(args, "si", &topic, &partition)) return NULL;
    if (check_open(c)) return NULL;
    int64_t low = -1001, high = -1001; /* RD_KAFKA_OFFSET_INVALID */
    rk.get_watermark_offsets(c->client->rk, topic, partition, &low, &high);
    return Py_BuildValue("(LL)", (long long)low, (long long)high);
}

static PyObject *consumer_take_client_error(Consumer *c, PyObject *noargs) {
    (void)noargs;
    Client *cl = c->client;
    if (cl == NULL) Py_RETURN_NONE;
    PyObject *out = NULL;
    pthread_mutex_lock(&cl->lock);
    if (cl->fatal) {
        out = Py_BuildValue("(iisl)", cl->fatal_err, 1, cl->fatal_text, c->client_errors);
    } else if (c->client_errors) {
        out = Py_BuildValue("(iisl)", c->client_err, 0, c->client_text, c->client_errors);
    }
    c->client_errors = 0;
    pthread_mutex_unlock(&cl->lock);
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

static PyObject *consumer_close(Consumer *c, PyObject *noargs) {
    (void)noargs;
    consumer_release(c);
    Py_RETURN_NONE;
}

static PyObject *new_bytes(Py_ssize_t n, char **data) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, n);
    if (b != NULL) *data = PyBytes_AS_STRING(b);
    return b;
}

/* Put the consumer's strays at msgs[at], before the messages read from its own queue
   (pos must be 0). Every stray came through the consumer queue before the partition's
   queue was taken, so it is older than anything read from that queue: a stray drained
   just after a read goes before what that read returned. */
static int take_strays(Consumer *c, Py_ssize_t at) {
    pthread_mutex_lock(&c->client->lock);
    Py_ssize_t k = c->nstray, need = c->npending + k;
    if (need > c->cap) {
        rd_kafka_message_t **grown = realloc(c->msgs, sizeof(*grown) * (size_t)need);
        if (grown == NULL) {
            pthread_mutex_unlock(&c->client->lock);
            PyErr_NoMemory();
            return -1;
        }
        c->msgs = grown;
        c->cap = need;
    }
    memmove(c->msgs + at + k, c->msgs + at, sizeof(*c->msgs) * (size_t)(c->npending - at));
    memcpy(c->msgs + at, c->stray, sizeof(*c->msgs) * (size_t)k);
    c->npending = need;
    c->nstray = 0;
    pthread_mutex_unlock(&c->client->lock);
    return 0;
}

#define BIT_SET(buf, i) ((buf)[(i) >> 3] |= (uint8_t)(1u << ((i) & 7)))

/* How many records ahead the header lookup asks for a record's bytes. The fetcher
   thread decompressed them long before, often on the other core: without the hint the
   lookup of each record's headers stalls on its first read of them. */
#define PREFETCH_AHEAD 8

/* Hint the cache to load a record's value (whose last line the header lookup reads
   next; the headers follow the value in a v2 record). Only a hint: prefetching never
   faults, so a layout librdkafka does not promise costs nothing if it changes. */
static inline void prefetch_record(const rd_kafka_message_t *msg) {
    if (msg->payload == NULL) return;
    const char *p = (const char *)msg->payload, *end = p + msg->len;
    for (; p < end; p += 64) __builtin_prefetch(p, 0, 3);
    __builtin_prefetch(end, 0, 3);
}

/* Fill one binary column (validity, offsets, data) from key or value pointers. */
static void fill_binary(rd_kafka_message_t **m, Py_ssize_t n, int keys, uint8_t *valid,
                        int32_t *offs, char *data) {
    int32_t pos = 0;
    offs[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const void *p = keys ? m[i]->key : m[i]->payload;
        size_t len = keys ? m[i]->key_len : m[i]->len;
        if (p != NULL) {
            if (valid) BIT_SET(valid, i);
            memcpy(data + pos, p, len);
            pos += (int32_t)len;
        }
        offs[i + 1] = pos;
    }
}

static PyObject *consumer_consume(Consumer *c, PyObject *args) {
    Py_ssize_t max_records, max_bytes;
    if (!PyArg_ParseTuple(args, "nn", &max_records, &max_bytes)) return NULL;
    if (check_open(c)) return NULL;
    if (max_records < 1) max_records = 1;
    if (c->cap < max_records) {
        Py_ssize_t keep = c->npending - c->pos;
        rd_kafka_message_t **grown = malloc(sizeof(*grown) * (size_t)max_records);
        if (grown == NULL) return PyErr_NoMemory();
        if (keep) memcpy(grown, c->msgs + c->pos, sizeof(*grown) * (size_t)keep);
        free(c->msgs);
        c->msgs = grown;
        c->cap = max_records;
        c->pos = 0;
        c->npending = keep;
    } else if (c->pos > 0) {
        Py_ssize_t keep = c->npending - c->pos;
        memmove(c->msgs, c->msgs + c->pos, sizeof(*c->msgs) * (size_t)keep);
        c->pos = 0;
        c->npending = keep;
    }
    Client *cl = c->client;
    if (cl->pending->cnt > 0 && client_flush(cl)) return NULL;
    if (c->queue == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "consume before assign");
        return NULL;
    }
    /* (pos is 0 here) Read the partition's queue, then drain the consumer queue: every
       stray landed before anything on this queue could be read (one still being added
       while the queue was taken included), so the drain after the read finds it, and
       it goes before what the read returned. */
    Py_ssize_t before = c->npending;
    if (c->npending < max_records) {
        ssize_t got;
        rd_kafka_t *h = c->client->rk;
        Py_BEGIN_ALLOW_THREADS
        rk.poll(h, 0); /* serve the client's callbacks (errors) */
        got = rk.consume_batch_queue(c->queue, 0, c->msgs + c->npending,
                                     (size_t)(max_records - c->npending));
        Py_END_ALLOW_THREADS
        if (got > 0) c->npending += got;
    }
    if (client_drain(cl)) return NULL;
    if (c->nstray > 0 && take_strays(c, before)) return NULL;
    /* Take messages up to the byte budget; error messages among them are returned
       beside the columns, as the pure path sees them in the same poll. */
    rd_kafka_message_t **m = c->msgs;
    Py_ssize_t n = 0, total = 0, kbytes = 0, vbytes = 0, nhdr = 0, hname = 0,
               hval = 0;
    int key_nulls = 0, val_nulls = 0, hval_nulls = 0, epoch_nulls = 0;
    if (c->caphdrs < max_records) {
        rd_kafka_headers_t **grown = realloc(c->hdrs, sizeof(*grown) * (size_t)max_records);
        if (grown == NULL) return PyErr_NoMemory();
        c->hdrs = grown;
        c->caphdrs = max_records;
    }
    PyObject *errors = PyList_New(0);
    if (errors == NULL) return NULL;
    Py_ssize_t take = 0;
    while (take < c->npending && n < max_records) {
        rd_kafka_message_t *msg = m[take];
        if (take + PREFETCH_AHEAD < c->npending) prefetch_record(m[take + PREFETCH_AHEAD]);
        if (msg->err) {
            const char *text = rk.message_errstr(msg);
            PyObject *e = Py_BuildValue("(isL)", msg->err, text ? text : "",
                                        (long long)msg->offset);
            if (e == NULL || PyList_Append(errors, e) < 0) {
                Py_XDECREF(e);
                Py_DECREF(errors);
                return NULL;
            }
            Py_DECREF(e);
            take++;
            continue;
        }
        size_t klen = msg->key ? msg->key_len : 0, vlen = msg->payload ? msg->len : 0;
        if (n > 0 && (total + (Py_ssize_t)(klen + vlen) > max_bytes ||
                      kbytes + (Py_ssize_t)klen > INT32_MAX ||
                      vbytes + (Py_ssize_t)vlen > INT32_MAX))
            break;
        if (n == 0 && (klen > INT32_MAX || vlen > INT32_MAX)) break; /* cannot happen: Kafka caps */
        total += (Py_ssize_t)(klen + vlen);
        kbytes += (Py_ssize_t)klen;
        vbytes += (Py_ssize_t)vlen;
        key_nulls |= msg->key == NULL;
        val_nulls |= msg->payload == NULL;
        rd_kafka_headers_t *hdrs = NULL;
        if (rk.message_headers(msg, &hdrs) != 0) hdrs = NULL;
        c->hdrs[n] = hdrs;
        if (hdrs != NULL) {
            const char *name;
            const void *val;
            size_t size;
            for (size_t j = 0; !rk.header_get_all(hdrs, j, &name, &val, &size); j++) {
                hname += (Py_ssize_t)strlen(name);
                if (val == NULL) hval_nulls = 1;
                else hval += (Py_ssize_t)size;
                nhdr++;
            }
        }
        n++;
        take++;
    }
    /* error messages are freed now; the good ones after their bytes are copied */
    {
        Py_ssize_t w = 0;
        for (Py_ssize_t i = 0; i < take; i++) {
            if (c->msgs[i]->err) rk.message_destroy(c->msgs[i]);
            else c->msgs[w++] = c->msgs[i];
        }
        /* c->msgs[0:n] good, c->msgs[take:npending] still pending; keep pending after */
        if (take > n) {
            Py_ssize_t rest = c->npending - take;
            memmove(c->msgs + n, c->msgs + take, sizeof(*c->msgs) * (size_t)rest);
            c->npending = n + rest;
        }
    }
    m = c->msgs;
    char *b_off = NULL, *b_ts = NULL, *b_tt = NULL, *b_ep = NULL, *b_epv = NULL, *b_kv = NULL,
         *b_ko = NULL, *b_kd = NULL, *b_vv = NULL, *b_vo = NULL, *b_vd = NULL, *b_hl = NULL,
         *b_hno = NULL, *b_hnd = NULL, *b_hvv = NULL, *b_hvo = NULL, *b_hvd = NULL;
    Py_ssize_t vbits = (n + 7) / 8, hbits = (nhdr + 7) / 8;
    PyObject *o_off = new_bytes(n * 8, &b_off), *o_ts = new_bytes(n * 8, &b_ts),
             *o_tt = new_bytes(n, &b_tt), *o_ep = new_bytes(n * 4, &b_ep),
             *o_ko = new_bytes((n + 1) * 4, &b_ko), *o_kd = new_bytes(kbytes, &b_kd),
             *o_vo = new_bytes((n + 1) * 4, &b_vo), *o_vd = new_bytes(vbytes, &b_vd),
             *o_hl = new_bytes((n + 1) * 4, &b_hl), *o_hno = new_bytes((nhdr + 1) * 4, &b_hno),
             *o_hnd = new_bytes(hname, &b_hnd), *o_hvo = new_bytes((nhdr + 1) * 4, &b_hvo),
             *o_hvd = new_bytes(hval, &b_hvd);
    PyObject *o_kv = Py_None, *o_vv = Py_None, *o_hvv = Py_None, *o_epv = NULL;
    Py_INCREF(Py_None);
    Py_INCREF(Py_None);
    Py_INCREF(Py_None);
    o_epv = new_bytes(vbits, &b_epv);
    if (key_nulls) {
        Py_DECREF(Py_None);
        o_kv = new_bytes(vbits, &b_kv);
    }
    if (val_nulls) {
        Py_DECREF(Py_None);
        o_vv = new_bytes(vbits, &b_vv);
    }
    if (hval_nulls) {
        Py_DECREF(Py_None);
        o_hvv = new_bytes(hbits, &b_hvv);
    }
    PyObject *all[] = {o_off, o_ts, o_tt, o_ep, o_epv, o_kv, o_ko, o_kd, o_vv, o_vo, o_vd,
                       o_hl, o_hno, o_hnd, o_hvv, o_hvo, o_hvd};
    int failed = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) failed |= all[i] == NULL;
    if (failed) {
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) Py_XDECREF(all[i]);
        Py_DECREF(errors);
        return NULL; /* the messages stay pending */
    }
    Py_BEGIN_ALLOW_THREADS
    if (b_kv) memset(b_kv, 0, (size_t)vbits);
    if (b_vv) memset(b_vv, 0, (size_t)vbits);
    if (b_hvv) memset(b_hvv, 0, (size_t)hbits);
    memset(b_epv, 0, (size_t)vbits);
    fill_binary(m, n, 1, (uint8_t *)b_kv, (int32_t *)b_ko, b_kd);
    fill_binary(m, n, 0, (uint8_t *)b_vv, (int32_t *)b_vo, b_vd);
    int64_t *off = (int64_t *)b_off, *ts = (int64_t *)b_ts;
    int32_t *ep = (int32_t *)b_ep, *hl = (int32_t *)b_hl, *hno = (int32_t *)b_hno,
            *hvo = (int32_t *)b_hvo;
    int32_t h = 0, np = 0, vp = 0;
    hl[0] = hno[0] = hvo[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        rd_kafka_message_t *msg = m[i];
        int tstype = 0;
        off[i] = msg->offset;
        ts[i] = rk.message_timestamp(msg, &tstype);
        b_tt[i] = (char)tstype;
        int32_t e = rk.message_leader_epoch(msg);
        if (e >= 0) BIT_SET((uint8_t *)b_epv, i);
        else epoch_nulls = 1;
        ep[i] = e >= 0 ? e : 0;
        rd_kafka_headers_t *hdrs = c->hdrs[i];
        if (hdrs != NULL) {
            const char *name;
            const void *val;
            size_t size;
            for (size_t j = 0; !rk.header_get_all(hdrs, j, &name, &val, &size); j++) {
                size_t nl = strlen(name);
                memcpy(b_hnd + np, name, nl);
                np += (int32_t)nl;
                hno[h + 1] = np;
                if (val != NULL) {
                    if (b_hvv) BIT_SET((uint8_t *)b_hvv, h);
                    memcpy(b_hvd + vp, val, size);
                    vp += (int32_t)size;
                }
                hvo[h + 1] = vp;
                h++;
            }
        }
        hl[i + 1] = h;
        rk.message_destroy(msg);
    }
    Py_END_ALLOW_THREADS
    /* the good messages are consumed; what is left waits for the next call */
    c->pos = n;
    if (!epoch_nulls) {
        Py_DECREF(o_epv);
        o_epv = Py_None;
        Py_INCREF(Py_None);
    }
    PyObject *out = Py_BuildValue("(nNNNNNNNNNNNNNNNNNnN)", n, o_off, o_ts, o_tt, o_ep, o_epv, o_kv,
                                  o_ko, o_kd, o_vv, o_vo, o_vd, o_hl, o_hno, o_hnd, o_hvv, o_hvo,
                                  o_hvd, nhdr, errors);
    return out;
}

static PyObject *consumer_pending(Consumer *c, PyObject *noargs) {
    (void)noargs;
    return PyLong_FromSsize_t(c->npending - c->pos);
}

static PyMethodDef consumer_methods[] = {
    {"assign", (PyCFunction)consumer_assign, METH_VARARGS,
     "assign(topic, partition, offset, leader_epoch): read one partition from offset\n"
     "(assigned at the client's next consume, with the partitions assigned beside it)."},
    {"consume", (PyCFunction)consumer_consume, METH_VARARGS,
     "consume(max_records, max_bytes): the Arrow buffers of up to max_records messages."},
    {"position", (PyCFunction)consumer_position, METH_VARARGS,
     "position(topic, partition): the next offset to fetch (negative when unknown)."},
    {"watermarks", (PyCFunction)consumer_watermarks, METH_VARARGS,
     "watermarks(topic, partition): the cached (low, high) watermarks."},
    {"take_client_error", (PyCFunction)consumer_take_client_error, METH_NOARGS,
     "take_client_error(): (code, fatal, text, count) of client errors since the last call."},
    {"pending", (PyCFunction)consumer_pending, METH_NOARGS,
     "pending(): messages taken from librdkafka and not yet returned."},
    {"close", (PyCFunction)consumer_close, METH_NOARGS,
     "close(): unassign the partition; the last consumer of a client closes its handle."},
    {NULL, NULL, 0, NULL},
};

static PyObject *consumer_get_client(Consumer *c, void *closure) {
    (void)closure;
    if (c->client == NULL) Py_RETURN_NONE;
    Py_INCREF(c->client);
    return (PyObject *)c->client;
}

static PyGetSetDef consumer_getset[] = {
    {"client", (getter)consumer_get_client, NULL, "The shared handle (None once closed).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ConsumerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "thalweg_bytewax._kafka_native.Consumer",
    .tp_basicsize = sizeof(Consumer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The reader of one partition of a Client; its batches come out as Arrow buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)consumer_init,
    .tp_dealloc = (destructor)consumer_dealloc,
    .tp_methods = consumer_methods,
    .tp_getset = consumer_getset,
};

static PyMethodDef module_methods[] = {
    {"load", load, METH_O, "load(path): load librdkafka from path (once per process)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kafka_native",
    "Batch Kafka consume into Arrow buffers over the bundled librdkafka.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__kafka_native(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    /* each type is readied and added under its short name (Client, Consumer) */
    if (PyModule_AddType(m, &ClientType) < 0 || PyModule_AddType(m, &ConsumerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
