"""Registry URLs: parse, strip credentials before the client sees them, redact, scrub.

Private to :mod:`thalweg_bytewax.registry`.

``confluent_kafka``'s ``SchemaRegistryClient`` splits ``url`` on *every* comma, accepts
only lower-case ``http``/``mock`` prefixes, and quotes the URL (or the fragment after a
comma in a password) in its exceptions; ``httpx`` may quote a request URL too. So a
registry URL is parsed here first: credentials leave the URL and travel as
``basic.auth.user.info`` (decoded, exactly as the client would have decoded them), the
scheme is lower-cased, and the client never holds a URL with a secret in it. Anything
the client or the server says is still scrubbed of every known secret before it reaches
a message, and a client exception whose text (or chain) held one is not chained.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from thalweg_bytewax._redact import REDACTED, redact_origins_in
from thalweg_bytewax._redact import redact_url as _redact_one
from thalweg_bytewax.errors import ConfigError

__all__ = [
    "RegistryUrls",
    "clean_cause",
    "client_urls",
    "parse_registry_urls",
    "redact_registry_url",
    "redact_url",
]

# A comma starts a new URL only when a scheme follows it, so a comma in a password does
# not split the userinfo into a part that escapes redaction.
_URL_SPLIT = re.compile(r",(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)")
_SCHEMES = ("http", "https")
_AUTH_KEY = "basic.auth.user.info"
# Below this length a secret is not replaced in free text (it would shred the message);
# text that still contains one is withheld instead.
_MIN_SECRET_CHARS = 4
_WITHHELD = "(text withheld: it may quote a credential)"


def _redact_part(part: str) -> str:
    """One URL (or scheme-less ``user:pass@host:port``) without credentials."""
    if "://" not in part:
        if "@" not in part:
            return part
        # No scheme: everything up to the last ``@`` is userinfo.
        return _redact_one(f"x://{part}")[len("x://") :]
    out = _redact_one(part)
    # ``http://user:pa`` (a password cut at a comma) looks like host ``user``, port
    # ``pa``: a port that is not a number may be half a password.
    scheme, _, rest = out.partition("://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    host, colon, port = authority.rpartition(":")
    if colon and port and not port.isdigit() and not authority.startswith(f"{REDACTED}@"):
        out = f"{scheme}://{host}:{REDACTED}{rest[len(authority) :]}"
    return out


def redact_registry_url(url: str) -> str:
    """``url`` (or a comma-separated list) with credentials replaced by ``***``.

    The whole userinfo (everything up to the last ``@`` before the host) becomes
    ``***@``, also without a scheme (``user:pass@host:8081``); every query value and the
    fragment become ``***``; a non-numeric port (half a password cut at a comma) too.

    Args:
        url: One registry URL or several, comma-separated.

    Returns:
        The URL(s), safe for messages, reprs and logs.
    """
    return ",".join(_redact_part(part) for part in _URL_SPLIT.split(url))


def redact_url(url: str) -> str:
    """``url`` (or a comma-separated list) with credentials replaced by ``***``.

    The whole userinfo (everything up to the last ``@`` before the host, also in a
    scheme-less ``user:pass@host:port``) becomes ``***@``; every query value and the
    fragment become ``***``.

    Args:
        url: One registry URL or several, comma-separated.

    Returns:
        The URL(s), safe for messages, reprs and logs.
    """
    return redact_registry_url(url)


@dataclass(frozen=True)
class RegistryUrls:
    """A registry URL list made safe to hand to ``confluent_kafka``.

    Attributes:
        url: The comma-separated base URLs with lower-case schemes and no credentials.
        shown: The URL list as given, redacted, for messages and reprs.
        conf: The client settings, with the URL's credentials as ``basic.auth.user.info``.
        secrets: Every known secret string (credentials as written, decoded and in basic
            auth encoding, secret-looking settings), longest first, for :meth:`scrub`.
    """

    url: str = field(repr=False)
    shown: str
    conf: Mapping[str, Any] = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False)

    def scrub(self, text: str) -> str:
        """``text`` (from a client or a server) with every known secret removed.

        URLs in it are redacted and each secret replaced by ``***``; if a secret too
        short to replace is still in it, the whole text is withheld.
        """
        out = redact_origins_in(text)
        for secret in self.secrets:
            if len(secret) >= _MIN_SECRET_CHARS:
                out = out.replace(secret, REDACTED)
            elif secret in out:
                return _WITHHELD
        return out


def _secrets(userinfos: Iterable[str], conf: Mapping[str, Any]) -> tuple[str, ...]:
    found: set[str] = set()
    for userinfo in userinfos:
        user, _, password = userinfo.partition(":")
        plain_user, plain_password = urllib.parse.unquote(user), urllib.parse.unquote(password)
        plain = f"{plain_user}:{plain_password}"
        found.update((userinfo, password, plain_password, plain))
        found.update(userinfo.split(","))  # what a client splitting on commas would quote
        found.add(base64.b64encode(plain.encode()).decode())
    for key, value in conf.items():
        if isinstance(value, str) and key != "url":
            found.add(value)
            if key == _AUTH_KEY:
                found.update(value.split(":", 1))
                found.add(base64.b64encode(value.encode()).decode())
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def _refuse(shown: str, expected: str, remedy: str) -> ConfigError:
    return ConfigError(f"schema registry `{shown}`: expected {expected}; {remedy}")


def _parse_part(part: str) -> tuple[str, str]:
    """``(clean url, userinfo)`` of one URL; raises ``ConfigError`` on a bad one."""
    shown = _redact_part(part)
    scheme, sep, rest = part.partition("://")
    if not sep:
        raise _refuse(
            shown, "a URL with a scheme (`http://` or `https://`); got none", "add the scheme"
        )
    if scheme.lower() not in _SCHEMES:
        raise _refuse(
            shown,
            f"scheme `http` or `https`; got `{scheme}`",
            "use an http(s):// URL or `mock://<scope>`",
        )
    at = rest.rfind("@")
    userinfo, hostpart = (rest[:at], rest[at + 1 :]) if at >= 0 else ("", rest)
    if any(c in hostpart for c in "?#"):
        raise _refuse(
            shown,
            "a URL without a query or fragment; got one",
            f"pass credentials in `conf` (`{_AUTH_KEY}` or `bearer.auth.*`)",
        )
    if "," in hostpart:
        raise _refuse(
            shown, "URLs separated by commas, each with a scheme", "add `http(s)://` to each"
        )
    try:
        host = urllib.parse.urlsplit(f"http://{hostpart}").hostname
        _ = urllib.parse.urlsplit(f"http://{hostpart}").port
    except ValueError:
        host = None
    if not host:
        raise _refuse(shown, "`host[:port]` with a numeric port", "fix the host and port")
    if ":" in urllib.parse.unquote(userinfo.partition(":")[0]):
        raise _refuse(shown, "a user name without `:`", "percent-encoding cannot help here")
    return f"{scheme.lower()}://{hostpart}", userinfo


def parse_registry_urls(url: str, conf: Mapping[str, Any] | None = None) -> RegistryUrls:
    """Parse and check ``url`` (comma-separated for several) before a client sees it.

    ``mock://`` URLs are passed as they are. For http(s) URLs the scheme may be any
    case; credentials in the URL (percent-encoded or not, commas included) move to
    ``basic.auth.user.info``, decoded; every URL with credentials must carry the same.

    Args:
        url: The registry URL or URLs.
        conf: Extra client settings.

    Returns:
        The clean URL, its redacted form, the settings and the secrets to scrub.

    Raises:
        ConfigError: On a URL without a scheme or host, another scheme, a query or
            fragment, or credentials both in the URL and in ``basic.auth.user.info``.
            The message shows the URL redacted.
    """
    settings = dict(conf or {})
    shown = redact_registry_url(url)
    if url.strip().lower().startswith("mock://"):
        return RegistryUrls(url, shown, settings, _secrets([], settings))
    parsed = [_parse_part(part.strip()) for part in _URL_SPLIT.split(url)]
    userinfos = {info for _, info in parsed if info}
    secrets = _secrets(userinfos, settings)
    if len(userinfos) > 1:
        msg = (
            f"schema registry `{shown}`: expected the same credentials on every URL; got "
            f"{len(userinfos)} different ones; put them in `{_AUTH_KEY}` instead"
        )
        raise ConfigError(msg)
    if userinfos:
        if _AUTH_KEY in settings:
            msg = (
                f"schema registry `{shown}`: expected credentials in the URL or in "
                f"`{_AUTH_KEY}`; got both; keep one"
            )
            raise ConfigError(msg)
        user, _, password = next(iter(userinfos)).partition(":")
        settings[_AUTH_KEY] = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    clean = ",".join(u for u, _ in parsed)
    return RegistryUrls(clean, shown, settings, secrets)


def client_urls(base_urls: Iterable[str], auth: Any = None) -> RegistryUrls:
    """The :class:`RegistryUrls` of a client built elsewhere (for redaction only).

    Args:
        base_urls: The client's base URLs, which may hold credentials.
        auth: The client's ``(user, password)`` basic auth, if any.
    """
    urls = list(base_urls) or ["<client>"]
    userinfos = [_split(u)[1] for u in urls]
    conf = {_AUTH_KEY: f"{auth[0]}:{auth[1]}"} if isinstance(auth, tuple) and auth else {}
    joined = ",".join(urls)
    secrets = _secrets([u for u in userinfos if u], conf)
    return RegistryUrls(joined, redact_registry_url(joined), {}, secrets)


def _split(url: str) -> tuple[str, str]:
    """``(url without userinfo, userinfo)``."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0:
        return url, ""
    return f"{scheme}://{rest[at + 1 :]}", rest[:at]


def clean_cause(exc: BaseException, urls: RegistryUrls) -> BaseException | None:
    """``exc`` if no text in it or its chain holds a secret, else ``None``.

    Raise from the result *outside* the ``except`` block, so a withheld exception is
    not kept as ``__context__`` either.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        texts = [str(e), repr(e), *(a for a in e.args if isinstance(a, str))]
        if any(urls.scrub(t) != t for t in texts):
            return None
        todo += [e.__cause__, e.__context__]
    return exc
