"""The host's resources the library shares: durable files and process-wide thread pools.

* :mod:`~thalweg_bytewax.system.durable` — a file or directory made durable on disk
  (``fsync`` of the file and of its directory), for writes that must survive a crash.
* :mod:`~thalweg_bytewax.system.threads` — process-wide thread pools started on first use
  and shared by every worker of the process.
* :mod:`~thalweg_bytewax.system.huge_pages` — transparent huge pages off in a process
  that runs a flow (less resident memory for the same work; ``THALWEG_HUGE_PAGES=keep``).
* :mod:`~thalweg_bytewax.system.heap_trim` — the C heap's freed pages given back to the
  kernel while a Kafka source reads (librdkafka's fetch buffers; ``THALWEG_HEAP_TRIM=off``).
* :mod:`~thalweg_bytewax.system.thread_slots` — values kept per OS thread, where
  ``threading.local`` would be emptied at every batch of a Bytewax cluster's worker.
"""
