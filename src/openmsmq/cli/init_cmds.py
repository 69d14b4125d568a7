"""``openmsmq init DIR``: create a queue manager in a data directory.

Creating a queue manager is explicit: ``init``, or ``openmsmq serve`` on a new directory.
Every other command refuses a directory that holds none (:mod:`openmsmq.runtime`), so a
mistyped ``--qm`` is an error rather than a new queue manager with a new identity.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from openmsmq.cli.context import CliContext, CommandError, ctx_of, json_option
from openmsmq.errors import ConfigError, quoted
from openmsmq.runtime import holds_queue_manager

__all__ = ["init", "register"]


def _directory(c: CliContext, given: str | None) -> str:
    """DIR as typed, else the global ``--qm`` / ``OPENMSMQ_QM`` when one was given."""
    if given is not None:
        return given
    if c.target_source == "default":
        raise click.UsageError("give the data directory: openmsmq init DIR")
    path = c.data_directory()
    if path is None:
        raise click.BadParameter(
            f"{quoted(c.target)} names a queue manager served elsewhere; init creates one in a"
            " data directory of this machine",
            param_hint="--qm",
        )
    return path


@click.command("init")
@click.argument("directory", metavar="[DIR]", required=False)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="TOML configuration file whose [store] to use (as given to 'openmsmq serve --config').",
)
@json_option
@click.pass_context
def init(ctx: click.Context, directory: str | None, config_path: Path | None) -> None:
    """Create a queue manager (a new identity, its system queues) in the data directory
    DIR (default: --qm), creating DIR if needed. A DIR that already holds one is an error.

    Its store is the one [store] names (--config FILE, then OPENMSMQ_STORE_* in the
    environment): SQLite in DIR by default; with store.backend = "postgresql" the schema
    is created in the database store.dsn names, and DIR records it."""
    from openmsmq.config import load_config
    from openmsmq.qm import QueueManager  # the store only when creating
    from openmsmq.server.options import store_options

    c = ctx_of(ctx)
    path = _directory(c, directory)
    if holds_queue_manager(path):
        raise CommandError(f"{quoted(path)} already holds a queue manager; nothing was changed")
    try:
        options = store_options(load_config(config_path, os.environ).config)
        with QueueManager(path, store_options=options) as qm:
            guid = str(qm.guid)
    except ConfigError as exc:
        raise CommandError(f"cannot create a queue manager in {quoted(path)}: {exc}") from exc
    except OSError as exc:
        raise CommandError(f"cannot create a queue manager in {quoted(path)}: {exc.strerror or exc}") from exc
    c.emit(
        {"created": path, "qm_guid": guid},
        lambda: click.echo(f"created queue manager {guid} in {path}"),
    )


def register(group: click.Group) -> None:
    """Add ``init`` to the ``openmsmq`` group."""
    group.add_command(init)
