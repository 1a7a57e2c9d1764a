"""Observability tests: each starts from the hooks off and leaves them off."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from thalweg_bytewax.observability import reset


@pytest.fixture(autouse=True)
def observability_off() -> Iterator[None]:
    reset()
    yield
    reset()


def get(url: str) -> tuple[int, bytes]:
    """A real HTTP GET: the status code and the body (also for 4xx / 5xx)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get_json(url: str) -> tuple[int, Any]:
    code, body = get(url)
    return code, json.loads(body)
