"""Runnable flows: ``python -m bytewax.run flows.orders``."""
