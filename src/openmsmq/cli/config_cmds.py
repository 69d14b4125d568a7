"""``openmsmq config show``: the effective configuration and where each value came from.

The configuration is built exactly as ``openmsmq serve`` builds it (defaults, the
``--config`` TOML file, ``OPENMSMQ_<SECTION>_<KEY>`` environment variables) by
:func:`openmsmq.config.load_config`; the text output is
:func:`openmsmq.config.render_config` (valid TOML, each value followed by
``# <source>``). A bad value raises :class:`~openmsmq.errors.ConfigError`, which the
``openmsmq`` group prints as one line naming the key, with exit status 1.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from openmsmq.cli.context import ctx_of, json_option
from openmsmq.config import LoadedConfig, Route, config_keys, load_config, render_config

__all__ = ["config", "config_document", "register"]


def _json_value(kind: str, value: Any) -> Any:
    """A configuration value as JSON, spelled as the TOML file would spell it."""
    if value is None:
        return "unlimited" if kind == "quota" else None
    if isinstance(value, Path):
        return str(value)
    if kind == "routes":
        return {r.destination: r.next_hop for r in value if isinstance(r, Route)}
    if isinstance(value, tuple):
        return list(value)
    return value


def config_document(loaded: LoadedConfig) -> dict[str, Any]:
    """``{"file": ..., "config": {section: {key: value}}, "sources": {"section.key": source}}``."""
    sections: dict[str, dict[str, Any]] = {}
    for key in config_keys():
        value = getattr(getattr(loaded.config, key.section), key.name)
        sections.setdefault(key.section, {})[key.name] = _json_value(key.kind, value)
    return {
        "file": str(loaded.path) if loaded.path is not None else None,
        "config": sections,
        "sources": {k.dotted: loaded.sources.get(k.dotted, "default") for k in config_keys()},
    }


@click.group()
def config() -> None:
    """Inspect the queue manager configuration."""


@config.command("show")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="TOML configuration file (as given to 'openmsmq serve --config').",
)
@json_option
@click.pass_context
def show(ctx: click.Context, config_path: Path | None) -> None:
    """Print the effective configuration (defaults < file < OPENMSMQ_* environment),
    each value with where it came from."""
    c = ctx_of(ctx)
    loaded = load_config(config_path, os.environ)
    c.emit(config_document(loaded), lambda: click.echo(render_config(loaded), nl=False))


def register(group: click.Group) -> None:
    """Add ``config`` to the ``openmsmq`` group."""
    group.add_command(config)
