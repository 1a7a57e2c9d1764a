"""The only core code that touches Bytewax: partition keys, epoch-durable sinks, harness helpers."""
