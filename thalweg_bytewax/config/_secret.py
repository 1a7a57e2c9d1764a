"""Secret references: ``${env:NAME}`` and ``${file:/path}``, resolved only at the point of use."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from thalweg_bytewax._redact import REDACTED, redact_text
from thalweg_bytewax.errors import ConfigError

__all__ = ["SecretRef", "SecretReference"]

# A reference, an escaped `$${` (a literal `${`), or a `${` that starts neither: the
# last is refused, so a typo (`${evn:X}`) never becomes a literal password.
_TOKEN = re.compile(r"\$\$\{|\$\{(?P<kind>[a-z]+):(?P<target>[^}]*)\}|\$\{")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `scheme://user:password@`: a password written as a value, not as one reference.
_URL_PASSWORD = re.compile(r"(://[^:@/\s]*:)([^@/\s]*)(@)")


@dataclass(frozen=True, slots=True)
class SecretReference:
    """One reference inside a secret setting: ``${env:NAME}`` or ``${file:/path}``.

    Attributes:
        kind: ``"env"`` or ``"file"``.
        target: The variable name or the absolute file path.
    """

    kind: str
    target: str

    def __str__(self) -> str:
        """The reference as written: ``${env:NAME}``."""
        return f"${{{self.kind}:{self.target}}}"

    def problem(self, env: Mapping[str, str] | None = None) -> str | None:
        """Why this reference cannot be resolved now, or ``None`` when it can.

        Args:
            env: The environment to look in (default: ``os.environ``).

        Returns:
            A short reason (``"variable not set"``), never the secret.
        """
        env = os.environ if env is None else env
        if self.kind == "env":
            return None if env.get(self.target) else "variable not set or empty"
        path = Path(self.target)
        if not path.is_file():
            return "file not found"
        return None if os.access(path, os.R_OK) else "file not readable"

    def value(self, env: Mapping[str, str] | None = None) -> str:
        """The secret itself: the variable's value, or the file's text without its final newline.

        Raises:
            ConfigError: Naming the reference when it cannot be resolved (never the value).
        """
        env = os.environ if env is None else env
        if self.kind == "env":
            found = env.get(self.target)
            if not found:
                msg = (
                    f"secret reference `{self}`: the variable `{self.target}` is not set or "
                    "empty; set it in the flow's environment"
                )
                raise ConfigError(msg)
            return found
        try:
            text = Path(self.target).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            msg = f"secret reference `{self}`: cannot read `{self.target}` ({reason}); fix the path"
            raise ConfigError(msg) from None
        return text.rstrip("\r\n")


def _parse(template: str) -> tuple[SecretReference, ...]:
    """The references in ``template``; ``ValueError`` (never quoting it) when malformed."""
    refs = []
    for match in _TOKEN.finditer(template):
        if match.group(0) == "$${":
            continue
        kind, target = match.group("kind"), match.group("target")
        if kind is None:
            msg = (
                "expected `${env:NAME}` or `${file:/path}` after `${`; got neither (write "
                "`$${` for a literal `${`)"
            )
            raise ValueError(msg)
        if kind == "env" and not _ENV_NAME.fullmatch(target):
            msg = f"expected a variable name in `${{env:…}}`; got {target!r}"
            raise ValueError(msg)
        if kind == "file" and not Path(target).is_absolute():
            msg = f"expected an absolute path in `${{file:…}}`; got {target!r}"
            raise ValueError(msg)
        if kind not in ("env", "file"):
            msg = f"expected a reference of kind `env` or `file`; got `{kind}`"
            raise ValueError(msg)
        refs.append(SecretReference(kind, target))
    return tuple(refs)


class SecretRef:
    """A secret setting: a value that holds ``${env:NAME}`` / ``${file:/path}`` references.

    The references stay references in the model: ``repr``, ``str``, ``model_dump`` and
    ``thalweg config show`` print the template (``postgresql://app:${env:PG_PASSWORD}@db``),
    never what it resolves to. A secret given as a plain value (from the environment, say)
    prints as ``***``, and so does a URL password written as a value. :meth:`resolve`
    substitutes the references, and is called where the secret is used (building a client),
    never at load.

    Write ``$${`` for a literal ``${``. A ``${file:…}`` path must be absolute; the file's
    text is used without its final newline.

    Example:
        >>> dsn = SecretRef("postgresql://app:${env:PG_PASSWORD}@db/orders")
        >>> dsn
        SecretRef('postgresql://app:${env:PG_PASSWORD}@db/orders')
        >>> dsn.resolve({"PG_PASSWORD": "hunter2"})
        'postgresql://app:hunter2@db/orders'
        >>> SecretRef("hunter2")
        SecretRef('***')
    """

    __slots__ = ("_references", "_template")
    __redacts_itself__ = True
    """Its ``repr`` and ``str`` are safe to show (``thalweg_bytewax._redact.redact_value``)."""

    def __init__(self, template: str) -> None:
        """Parse ``template``.

        Raises:
            ConfigError: When a ``${`` starts no valid reference (the text is not quoted).
        """
        try:
            self._references = _parse(template)
        except ValueError as exc:
            msg = f"secret setting: {exc}"
            raise ConfigError(msg) from None
        self._template = template

    @property
    def references(self) -> tuple[SecretReference, ...]:
        """The references, in order (empty for a secret given as a plain value)."""
        return self._references

    @property
    def display(self) -> str:
        """What may be shown: the template with its references, or ``***``.

        In a template, a URL's password and query values that are not one reference, its
        fragment, and a userinfo holding no reference, are ``***``.
        """
        if not self._references:
            return REDACTED

        def _password(m: re.Match[str]) -> str:
            refs = _parse(m.group(2)) if "${" in m.group(2) else ()
            whole = len(refs) == 1 and m.group(2) == str(refs[0])
            return m.group(0) if whole else f"{m.group(1)}{REDACTED}{m.group(3)}"

        return redact_text(_URL_PASSWORD.sub(_password, self._template))

    def resolve(self, env: Mapping[str, str] | None = None) -> str:
        """The secret: every reference replaced by its value. Call it at the point of use.

        Args:
            env: The environment for ``${env:…}`` (default: ``os.environ``).

        Returns:
            The resolved text.

        Raises:
            ConfigError: Naming the first reference that cannot be resolved.
        """

        def _sub(match: re.Match[str]) -> str:
            if match.group(0) == "$${":
                return "${"
            return SecretReference(match.group("kind"), match.group("target")).value(env)

        return _TOKEN.sub(_sub, self._template)

    def get_secret_value(self) -> str:
        """:meth:`resolve`, under the name pydantic's ``SecretStr`` uses."""
        return self.resolve()

    def __repr__(self) -> str:
        """``SecretRef('<display>')``: references shown, values never."""
        return f"SecretRef({self.display!r})"

    def __str__(self) -> str:
        """The displayable form (see :attr:`display`)."""
        return self.display

    def __eq__(self, other: object) -> bool:
        """Equal when the templates are equal."""
        return isinstance(other, SecretRef) and other._template == self._template

    def __hash__(self) -> int:
        """Hash of the template."""
        return hash(("SecretRef", self._template))

    def __reduce__(self) -> tuple[type[SecretRef], tuple[str]]:
        """Pickle by template (workers get references, and resolve them where they run)."""
        return SecretRef, (self._template,)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """Validate from a string (or a ``SecretRef``); serialize to :attr:`display`."""

        def _validate(value: Any) -> SecretRef:
            if isinstance(value, SecretRef):
                return value
            if not isinstance(value, str):
                msg = f"expected a string; got a value of type {type(value).__name__}"
                raise ValueError(msg)
            _parse(value)  # a ValueError pydantic reports by key, without the value
            return cls(value)

        return core_schema.no_info_plain_validator_function(
            _validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: v.display, when_used="always"
            ),
        )
