"""``openmsmq config show``: the effective configuration and where each value came from.

The configuration is built exactly as ``openmsmq serve`` builds it (defaults, the
``--config`` TOML file, ``OPENMSMQ_<SECTION>_<KEY>`` environment variables) by
:func:`openmsmq.config.load_config`. Given ``--qm DIR``, it is that queue manager's: a
running ``serve`` publishes the configuration it loaded in its runtime.json
(:mod:`openmsmq.runtime`); a stopped one gets what ``serve`` over DIR would load. The
text output is
:func:`openmsmq.config.render_config` (valid TOML, each value followed by
``# <source>``). A bad value raises :class:`~openmsmq.errors.ConfigError`, which the
``openmsmq`` group prints as one line naming the key, with exit status 1.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from openmsmq.cli.context import CliContext, CommandError, ctx_of, json_option
from openmsmq.config import LoadedConfig, config_document, load_config, loaded_from_document, render_config
from openmsmq.errors import quoted
from openmsmq.runtime import holds_queue_manager, live_runtime

__all__ = ["config", "register"]


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
    """Print the effective configuration, each value with where it came from.

    With --qm DIR (or OPENMSMQ_QM): the configuration of that queue manager: the one its
    running `openmsmq serve` loaded (its file, environment and flags), or, when it is not
    running, the one `openmsmq --qm DIR serve [--config FILE]` would start it with.
    Without: defaults < --config file < OPENMSMQ_* environment."""
    c = ctx_of(ctx)
    if c.target_source == "default":
        loaded, about = load_config(config_path, os.environ), None
    else:
        loaded, about = _of_queue_manager(c, config_path)
    doc = config_document(loaded)
    if about is not None:
        doc["queue_manager"] = about

    def human() -> None:
        if about is not None:
            click.echo(_header(about))
        click.echo(render_config(loaded), nl=False)

    c.emit(doc, human)


def _of_queue_manager(c: CliContext, config_path: Path | None) -> tuple[LoadedConfig, dict[str, Any]]:
    """The configuration of the queue manager ``--qm`` names, and what it is."""
    path = c.data_directory()
    if path is None:
        raise click.BadParameter(
            f"{quoted(c.target)} is reached over the network; config show reads a queue manager"
            " of this machine: give --qm its data directory",
            param_hint="--qm",
        )
    running = live_runtime(path)
    if running is not None:
        if config_path is not None:
            raise click.UsageError(
                f"the queue manager at {quoted(path)} is running with its own configuration:"
                " --config applies to a stopped one"
            )
        published = running.get("config")
        if not isinstance(published, dict):
            raise CommandError(
                f"the queue manager running at {quoted(path)} (pid {running.get('pid')}) does not"
                " publish its configuration in its runtime.json: restart it with this version"
            )
        about = {"data_dir": path, "running": True, "pid": running.get("pid")}
        return loaded_from_document(published), about
    if not holds_queue_manager(path):
        c.connection()  # the error every client command gives for a directory without a QM
    loaded = load_config(config_path, os.environ, {"qm.data_dir": path})
    loaded = replace(loaded, sources={**loaded.sources, "qm.data_dir": c.target_source})
    return loaded, {"data_dir": path, "running": False, "pid": None}


def _header(about: dict[str, Any]) -> str:
    if about["running"]:
        return f"# the queue manager at {about['data_dir']}, running (pid {about['pid']})"
    return (
        f"# the queue manager at {about['data_dir']} is not running: the configuration"
        " 'openmsmq serve' would start it with here"
    )


def register(group: click.Group) -> None:
    """Add ``config`` to the ``openmsmq`` group."""
    group.add_command(config)
