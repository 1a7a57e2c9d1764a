"""Redact credentials from URLs, and from any text that may quote them.

A URL may carry a secret in three places: the userinfo (``https://user:pass@host``),
the query (presigned URLs: ``?X-Amz-Credential=…&X-Amz-Signature=…``, ``?token=…``) and
the fragment. Every one of them is replaced by ``***``; the scheme, host, port and path
stay, so a message still says *where*. Query parameter names stay too (they say *what*
kind of URL it was); every query value goes, because which parameters are secret is
the server's business, not ours.

A setting may carry a secret by its name: a client library's free-form settings
(``sasl.password``, ``ssl.key.password``, ``sasl.oauthbearer.client.secret``) hold one
whenever their key says so (:func:`is_secret_key`).

Use :func:`redact_url` on a URL you are about to put in a message, a ``repr`` or a log
line, :func:`redact_text` on free text that may contain URLs,
:func:`redact_origins_in` on text you did not write (a client library's exception
message) that may quote a URL you passed it, whole, in parts or percent-decoded, and
:func:`redact_value` on a whole configuration value (nested dicts and lists) about to
be shown.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

__all__ = [
    "REDACTED",
    "is_secret_key",
    "redact_origins_in",
    "redact_text",
    "redact_url",
    "redact_value",
]

REDACTED = "***"
"""What a secret is replaced with."""

# A scheme, ``://`` and everything up to whitespace or a quoting character. Messages put
# URLs in backticks or quotes, so those end one; commas and semicolons may be in a
# password or a query, so they do not (an over-long match redacts more, never less).
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"`<>]+")
# Secrets shorter than this are not searched for in free text: replacing every "ab" of
# a message would destroy it while protecting nothing an attacker could not guess.
_MIN_SECRET_CHARS = 4
# A setting's key that names a credential: a word of it (split at `.`, `_`, `-`) is one of
# these, or a fragment names a password, a private / API / access key, a signature or a
# JAAS / OAuth configuration line. A bare `key` does not (`key_columns`, `message_key`).
_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "pass",
        "secret",
        "secrets",
        "token",
        "tokens",
        "credential",
        "credentials",
        "apikey",
        "private",
        "signature",
        "sig",
        "auth",
        "authorization",
        "jaas",
        "cookie",
    }
)
_SECRET_FRAGMENT = re.compile(
    r"passw|secret|token|credential|private|signature|oauthbearer\.config"
    r"|(?:api|access|ssl|client|signing)[._-]?key|key[._-]?pem",
    re.IGNORECASE,
)
_LONE_REFERENCE = re.compile(r"\$\{(?:env:[A-Za-z_][A-Za-z0-9_]*|file:/[^}]*)\}")
_KEY_WORDS = re.compile(r"[^a-z0-9]+")
# `s3:/user:pw@bucket`: a URL after `pathlib` folded its `//` into one `/`.
_FOLDED_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*:)/(?!/)")


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
        name, eq, value = part.partition("=")
        kept = eq and _LONE_REFERENCE.fullmatch(value)
        parts.append(part if kept or not eq else f"{name}={REDACTED}")
    return "&".join(parts)


def _shown_userinfo(userinfo: str) -> str:
    """``user:${env:NAME}`` as written (a reference holds no secret); any other ``***``."""
    _, sep, password = userinfo.partition(":")
    return userinfo if sep and _LONE_REFERENCE.fullmatch(password) else REDACTED


def redact_url(url: str) -> str:
    """``url`` with its userinfo, query values and fragment replaced by ``***``.

    ``https://user:pw@host:8443/a/b?X-Amz-Signature=abc#t`` becomes
    ``https://***@host:8443/a/b?X-Amz-Signature=***#***``. A password or query value
    that is one ``${env:NAME}`` / ``${file:/path}`` reference stays (it holds no secret,
    and says where the secret comes from). Text without ``://`` is returned unchanged (a
    local path carries no credentials).

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
    out = prefix + (f"{_shown_userinfo(userinfo)}@" if userinfo else "") + head
    if qsep:
        out += "?" + _redact_query(query)
    if hsep:
        out += "#" + (REDACTED if fragment else "")
    return out


def is_secret_key(key: str) -> bool:
    """Whether a setting named ``key`` holds a credential (its value must never be shown).

    ``sasl.password``, ``ssl.key.password``, ``ssl.keystore.password``,
    ``sasl.oauthbearer.client.secret``, ``sasl.oauthbearer.config``, ``api_token``,
    ``s3.secret-access-key`` and ``Authorization`` do; ``sasl.username`` and
    ``bootstrap.servers`` do not.

    Args:
        key: The setting's name.

    Returns:
        True when a word of it, or a fragment, names a credential.
    """
    words = set(_KEY_WORDS.split(key.lower()))
    return bool(words & _SECRET_WORDS) or _SECRET_FRAGMENT.search(key) is not None


def redact_value(value: Any) -> Any:
    """A configuration value safe to show: every URL redacted, every secret-named entry masked.

    Strings go through :func:`redact_text`; a path whose URL ``pathlib`` folded
    (``s3:/user:pw@bucket``) is redacted as that URL; in a mapping, the value of every
    key for which :func:`is_secret_key` holds becomes ``***`` (the keys stay, so a reader
    still sees *what* is set; a lone ``${env:NAME}`` / ``${file:/path}`` reference and a
    value that redacts itself stay too); lists and tuples are redacted item by item.

    Args:
        value: A JSON-shaped value (``model_dump(mode="json")``) or a path.

    Returns:
        The value with the same shape, redacted.
    """
    if isinstance(value, str | PurePath):
        text = str(value)
        folded = _FOLDED_URL.match(text)
        if folded is not None:
            return redact_url(f"{folded.group(1)}//{text[folded.end() :]}")
        return redact_text(text)
    if isinstance(value, Mapping):
        return {
            k: _secret_shown(v) if is_secret_key(str(k)) else redact_value(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value)
    return value


def _secret_shown(value: Any) -> Any:
    """A secret-named entry's value as shown: ``***``, unless it holds no secret.

    A lone ``${env:…}`` reference stays, and so does a value that redacts itself
    (``SecretRef``, pydantic's ``SecretStr``).
    """
    if value is None or getattr(type(value), "__redacts_itself__", False):
        return value
    if type(value).__name__ in ("SecretStr", "SecretBytes"):
        return value
    if isinstance(value, str) and _LONE_REFERENCE.fullmatch(value):
        return value
    return REDACTED


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
