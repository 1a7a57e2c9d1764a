"""``python -m thalweg_bytewax.cli``: the ``thalweg`` command."""

from __future__ import annotations

from thalweg_bytewax.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
