"""Redact credentials from URLs, and from any text that may quote them.

A URL may carry a secret in three places: the userinfo (``https://user:pass@host``),
the query (presigned URLs: ``?X-Amz-Credential=…&X-Amz-Signature=…``, ``?token=…``) and
the fragment. Every one of them is replaced by ``***``; the scheme, host, port and path
stay, so a message still says *where*. Query parameter names stay too (they say *what*
kind of URL it was); every query value goes, because which parameters are secret is
the server's business, not ours.

Use :func:`redact_url` on a URL you are about to put in a message, a ``repr`` or a log
line, :func:`redact_text` on free text that may contain URLs, and
:func:`redact_origins_in` on text you did not write (a client library's exception
message) that may quote a URL you passed it, whole, in parts or percent-decoded.
"""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["REDACTED", "redact_origins_in", "redact_text", "redact_url"]

REDACTED = "***"
"""What a secret is replaced with."""

# A scheme, ``://`` and everything up to whitespace or a quoting character. Messages put
# URLs in backticks or quotes, so those end one; commas and semicolons may be in a
# password or a query, so they do not (an over-long match redacts more, never less).
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"`<>]+")
# Secrets shorter than this are not searched for in free text: replacing every "ab" of
# a message would destroy it while protecting nothing an attacker could not guess.
_MIN_SECRET_CHARS = 4


def _split_userinfo(url: str) -> tuple[str, str, str]:
    """``(scheme://, userinfo, rest)``; ``userinfo`` is empty when there is none.

    The userinfo runs up to the *last* ``@`` before the path: a password may hold ``/``,
    ``?``, ``#`` or ``@`` itself, which :func:`urllib.parse.urlsplit` would take for the
    start of the path, query or host. An ``@`` in the path or query makes this take more
    than the userinfo, which redacts more, never less.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "", "", url
    at = rest.rfind("@")
    if at < 0:
        return f"{scheme}://", "", rest
    return f"{scheme}://", rest[:at], rest[at + 1 :]


def _redact_query(query: str) -> str:
    parts = []
    for part in query.split("&"):
        name, eq, _value = part.partition("=")
        parts.append(f"{name}={REDACTED}" if eq else part)
    return "&".join(parts)


def redact_url(url: str) -> str:
    """``url`` with its userinfo, query values and fragment replaced by ``***``.

    ``https://user:pw@host:8443/a/b?X-Amz-Signature=abc#t`` becomes
    ``https://***@host:8443/a/b?X-Amz-Signature=***#***``. Text without ``://`` is
    returned unchanged (a local path carries no credentials).

    Args:
        url: One URL.

    Returns:
        The URL, safe for messages, reprs and logs.
    """
    prefix, userinfo, rest = _split_userinfo(url)
    if not prefix:
        return url
    head, hsep, fragment = rest.partition("#")
    head, qsep, query = head.partition("?")
    out = prefix + (f"{REDACTED}@" if userinfo else "") + head
    if qsep:
        out += "?" + _redact_query(query)
    if hsep:
        out += "#" + (REDACTED if fragment else "")
    return out


def redact_text(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url`.

    Args:
        text: Free text (a message, an exception's text).

    Returns:
        The text with each ``scheme://…`` run redacted.
    """
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


def _secrets(url: str) -> list[str]:
    """The secret parts of ``url``, as written and percent-decoded, longest first."""
    prefix, userinfo, rest = _split_userinfo(url)
    if not prefix:
        return []
    found: set[str] = set()
    if userinfo:
        user, _, password = userinfo.partition(":")
        found.update((userinfo, user, password))
    head, _, fragment = rest.partition("#")
    _, _, query = head.partition("?")
    found.add(fragment)
    for part in query.split("&") if query else ():
        _, eq, value = part.partition("=")
        if eq:
            found.add(value)
    for item in list(found):
        found.add(urllib.parse.unquote(item))
        found.add(urllib.parse.unquote_plus(item))
    return sorted((s for s in found if len(s) >= _MIN_SECRET_CHARS), key=len, reverse=True)


def redact_origins_in(text: str, *urls: str) -> str:
    """``text`` with every URL redacted, and every secret part of ``urls`` removed.

    For text you did not write: a client library's exception may quote the URL you gave
    it whole, without its scheme, or only its decoded password or signature. Each URL
    in ``text`` is redacted (:func:`redact_text`), then every occurrence of a secret part
    of each of ``urls`` (its userinfo, user, password, query values and fragment, as
    written and percent-decoded) is replaced by ``***``.

    Args:
        text: The text to clean.
        *urls: The URLs whose secrets must not appear (e.g. the one the client fetched).

    Returns:
        The cleaned text.
    """
    out = redact_text(text)
    for url in urls:
        for secret in _secrets(url):
            out = out.replace(secret, REDACTED)
    return out
