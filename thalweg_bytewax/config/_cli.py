"""``thalweg config validate|show|secrets`` and ``thalweg init``: the config commands.

They never print a secret: ``show`` prints secret settings as their references (or
``***``), ``secrets`` says whether each reference resolves without reading it, and
errors name keys, never values.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from thalweg_bytewax._redact import redact_value
from thalweg_bytewax.cli._subcommand import add_command_group, add_subcommand
from thalweg_bytewax.config._layers import CONFIG_ENV
from thalweg_bytewax.config._load import load_config, secret_uses
from thalweg_bytewax.config._model import ConfigModel
from thalweg_bytewax.config._render import render_starter
from thalweg_bytewax.config._toml import to_toml
from thalweg_bytewax.config._user_module import import_user_module
from thalweg_bytewax.errors import ConfigError

__all__ = ["DEFAULT_MODEL", "PIPELINE_MODEL", "add_commands"]

DEFAULT_MODEL = "thalweg_bytewax.flows.orders:OrdersSettings"
"""The model ``config`` loads without ``--model`` for a file that is not a pipeline's."""
PIPELINE_MODEL = "thalweg_bytewax.pipeline:PipelineConfig"
"""The model of a pipeline file (``flows.pipeline``, ``thalweg batch``), and ``init``'s."""
STARTER_FILE = "pipeline.toml"
"""Where ``thalweg init`` writes when no path is given."""
# `thalweg config secrets` exits with this when a reference cannot be resolved now
# (2 stays "the config itself is bad", as for every command).
UNRESOLVED_EXIT = 1


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _model(spec: str) -> type[BaseModel]:
    module_name, _, attr = spec.partition(":")
    module = import_user_module(
        module_name, where="config", role="the model's module", hint="; check `--model`"
    )
    model = getattr(module, attr, None) if attr else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        msg = (
            f"config: expected a pydantic model class at `{spec}` (`--model MODULE:CLASS`); "
            f"got {type(model).__name__}"
        )
        raise ConfigError(msg)
    return model


def _name(model: type[BaseModel]) -> str:
    return str(getattr(model, "component", model.__name__))


def _is_pipeline(file: str | None) -> bool:
    """Whether a TOML file is a pipeline configuration (it has a pipeline-only section)."""
    if not file or not Path(file).is_file():
        return False
    try:
        data = tomllib.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False  # the load that follows names the problem
    pipeline_only = {"source", "codec", "dedup", "sql", "windows", "sinks", "dlq", "audit"}
    return bool(pipeline_only & set(data)) or isinstance(data.get("contract"), dict)


def _load(args: argparse.Namespace) -> tuple[type[BaseModel], BaseModel]:
    spec = args.model or (PIPELINE_MODEL if _is_pipeline(args.file) else DEFAULT_MODEL)
    model = _model(spec)
    return model, load_config(model, file=args.file, overrides=args.set)


def _validate(args: argparse.Namespace) -> int:
    """Exit 0 when the config loads, 2 when not."""
    model, config = _load(args)
    uses = secret_uses(config)
    refs = [u for u in uses if u.reference is not None]
    unresolved = sum(u.problem is not None for u in refs)
    where = f"`{args.file}`" if args.file else "the environment"
    _out(
        f"{where}: valid `{_name(model)}` settings ({len(type(config).model_fields)} "
        f"top-level keys, {len(refs)} secret references, {unresolved} not resolvable now)"
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    """Print the merged config, secrets redacted."""
    model, config = _load(args)
    values = config.model_dump(mode="json")
    if not isinstance(config, ConfigModel):  # a config model's JSON dump is redacted already
        values = redact_value(values)
    if args.json:
        _out(json.dumps(values, indent=2, sort_keys=True))
        return 0
    source = f"`{args.file}`" if args.file else f"`{CONFIG_ENV}` / defaults"
    _out(
        f"# `{_name(model)}` settings: {source} < THALWEG_* variables < --set; "
        "secrets as their references (or ***)\n" + to_toml(values)
    )
    return 0


def _secrets(args: argparse.Namespace) -> int:
    _, config = _load(args)
    uses = secret_uses(config)
    refs = [u for u in uses if u.reference is not None]
    unresolved = any(u.problem is not None for u in refs)
    if args.format == "names":
        for name in dict.fromkeys(str(u.reference) for u in refs):
            _out(name)
    elif args.format == "json":
        rows: list[dict[str, Any]] = [
            {
                "key": u.key,
                "reference": None if u.reference is None else str(u.reference),
                "kind": "value" if u.reference is None else u.reference.kind,
                "target": None if u.reference is None else u.reference.target,
                "resolvable": u.problem is None,
                "problem": u.problem,
            }
            for u in uses
        ]
        _out(json.dumps(rows, indent=2))
    elif not uses:
        _out("no secret settings hold a reference")
    else:
        width = max(len(u.key) for u in uses)
        for u in uses:
            if u.reference is None:
                _out(f"{u.key:<{width}}  (a value, not a reference: prefer ${{env:…}})")
                continue
            state = "ok" if u.problem is None else f"MISSING: {u.problem}"
            _out(f"{u.key:<{width}}  {u.reference}  {state}")
    return UNRESOLVED_EXIT if unresolved else 0


def _init(args: argparse.Namespace) -> int:
    """Write a commented starter config.

    Write a commented starter TOML: every setting of the model with its description, type,
    environment variable and default; by default a pipeline configuration (source, codec, contract,
    SQL nodes, windows, sinks) for `python -m bytewax.run flows.pipeline` and `thalweg batch`.
    """
    spec = args.model or PIPELINE_MODEL
    model = _model(spec)
    path = Path(args.path)
    if path.exists() and not args.force:
        msg = f"init: `{path}` already exists; pass `--force` to overwrite it, or name another"
        raise ConfigError(msg)
    path.write_text(render_starter(model, title=f"`{_name(model)}` ({spec})"))
    flag = "" if spec in (PIPELINE_MODEL, DEFAULT_MODEL) else f" --model {spec}"
    run = (
        f"; run it with `THALWEG_CONFIG={path} thalweg run pipeline` or "
        f"`thalweg batch {path} --files ...`"
        if spec == PIPELINE_MODEL
        else ""
    )
    _out(
        f"wrote `{path}`: every `{_name(model)}` setting, commented, with its default; "
        f"check it with `thalweg config validate {path}{flag}`{run}"
    )
    return 0


def _common(p: argparse.ArgumentParser, *, with_file: bool = True) -> None:
    if with_file:
        p.add_argument(
            "file", nargs="?", help=f"the TOML file (default: `${CONFIG_ENV}`, else none)"
        )
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a key, e.g. --set sinks.postgres.port=5433 (repeatable; wins "
            "over the file and the environment)",
        )
    default = (
        PIPELINE_MODEL
        if not with_file
        else f"{PIPELINE_MODEL} for a pipeline file (one with a [source], [sinks], ... "
        f"table), else {DEFAULT_MODEL}"
    )
    p.add_argument(
        "--model", default=None, help=f"the config model as MODULE:CLASS (default: {default})"
    )


def add_commands(sub: Any) -> None:
    """Add ``config validate|show|secrets`` and ``init`` to the CLI's subparsers.

    Args:
        sub: The ``argparse`` subparsers action of the ``thalweg`` parser.
    """
    config = add_command_group(
        sub,
        "config",
        summary="validate, show or list the secrets of a configuration",
        description="Load a configuration (TOML file < THALWEG_* variables < --set) and "
        "validate it, show it (secrets as references), or list the secret references "
        "it needs.",
    )
    validate = add_subcommand(config, "validate", _validate)
    _common(validate)
    show = add_subcommand(config, "show", _show)
    _common(show)
    show.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    secrets = config.add_parser(
        "secrets",
        help="list the secret references a config needs and whether each resolves",
        description="List the secret references a config needs and whether each resolves "
        f"now; never prints a value. Exits {UNRESOLVED_EXIT} when one does not resolve.",
    )
    _common(secrets)
    secrets.add_argument(
        "--format",
        choices=["text", "json", "names"],
        default="text",
        help="text (a table), json, or names (one reference a line)",
    )
    secrets.set_defaults(func=_secrets)

    init = add_subcommand(sub, "init", _init)
    init.add_argument("path", nargs="?", default=STARTER_FILE, help=f"default: {STARTER_FILE}")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    _common(init, with_file=False)
