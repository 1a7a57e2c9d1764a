"""Read an ODCS contract's text from a local path, an ``http(s)://`` URL or a filesystem URL.

Every message names where the contract came from with its credentials redacted, and a
client exception whose text quotes the URL's secrets is never chained.
"""

from __future__ import annotations

import base64
import http.client
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax._redact import redact_origins_in, redact_url
from thalweg_bytewax.contracts.errors import ContractError

__all__ = ["read_contract_text"]

_HTTP_TIMEOUT_SECONDS = 30


def _cause(exc: BaseException, url: str) -> BaseException | None:
    """``exc`` if its text holds none of ``url``'s secrets, else ``None`` (no chaining).

    A traceback prints the cause's text; a client exception that quotes the URL (e.g.
    ``http.client.InvalidURL`` with the password as a "port") must not be chained.
    """
    text = f"{exc!s} {exc!r}"
    return exc if redact_origins_in(text, url) == text else None


def _http_request(url: str) -> urllib.request.Request:
    """A GET for ``url``; userinfo becomes an ``Authorization: Basic`` header."""
    split = urllib.parse.urlsplit(url)
    netloc = split.netloc
    headers = {}
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        url = urllib.parse.urlunsplit(split._replace(netloc=host))
    return urllib.request.Request(url, headers=headers)  # noqa: S310 - http(s) only


def read_contract_text(source: str | Path) -> tuple[str, str]:
    """``(text, origin)``: the contract text and where it came from, redacted."""
    if isinstance(source, Path):
        return _read_local(source), str(source)
    text = str(source)
    shown = redact_url(text)
    scheme = urlsplit(text).scheme
    if scheme in ("http", "https"):
        try:
            with urllib.request.urlopen(  # noqa: S310 - scheme checked above
                _http_request(text), timeout=_HTTP_TIMEOUT_SECONDS
            ) as resp:
                return resp.read().decode("utf-8"), shown
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the response (and its socket) open
            # Never the client's text: it may quote the URL. The status says enough.
            msg = f"contract `{shown}`: cannot fetch: expected HTTP 200; got HTTP {exc.code}"
            raise ContractError(msg) from _cause(exc, text)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None)
            detail = getattr(reason, "strerror", None) or getattr(exc, "strerror", None)
            msg = (
                f"contract `{shown}`: cannot fetch: {type(exc).__name__}"
                + (f" ({redact_origins_in(str(detail), text)})" if detail else "")
                + "; check the URL and that the server is reachable"
            )
            raise ContractError(msg) from _cause(exc, text)
    if scheme == "" or len(scheme) == 1:  # a plain path (or a Windows drive letter)
        return _read_local(Path(text)), text
    if scheme == "file":
        return _read_local(Path(urlsplit(text).path)), shown
    return _read_filesystem(text), shown


def _read_local(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"contract `{path}`: cannot read: {exc.strerror or exc}"
        raise ContractError(msg) from exc


def _read_filesystem(uri: str) -> str:
    from pyarrow import fs  # noqa: PLC0415

    shown = redact_url(uri)
    try:
        filesystem, path = fs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        fsspec = require("fsspec", extra="contracts")
        try:
            with fsspec.open(uri, "rt", encoding="utf-8") as fh:
                return str(fh.read())
        except (OSError, ValueError, ImportError) as exc:
            # The filesystem's own text may quote the URI: redact every origin in it.
            msg = (
                f"contract `{shown}`: cannot read through fsspec: {type(exc).__name__}: "
                f"{redact_origins_in(str(exc), uri)}"
            )
            raise ContractError(msg) from _cause(exc, uri)
    try:
        with filesystem.open_input_stream(path) as stream:
            return bytes(stream.read()).decode("utf-8")
    except OSError as exc:
        msg = (
            f"contract `{shown}`: cannot read: {type(exc).__name__}: "
            f"{redact_origins_in(str(exc), uri)}"
        )
        raise ContractError(msg) from _cause(exc, uri)
