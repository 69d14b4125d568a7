"""``openmsmq backup DEST``: a consistent copy of a queue manager's store, running or not
(:mod:`openmsmq.store.backup`; restore: docs/operations.md, "Backup")."""

from __future__ import annotations

from pathlib import Path

import click

from openmsmq.cli.context import CommandError, ctx_of, json_option
from openmsmq.errors import quoted
from openmsmq.runtime import STORE_FILE, STORE_POINTER, holds_queue_manager

__all__ = ["backup", "register"]


@click.command("backup")
@click.argument("destination", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@click.pass_context
def backup(ctx: click.Context, destination: Path) -> None:
    """Copy the store of --qm (a data directory; its queue manager may be running) to
    DESTINATION, a new file: a consistent snapshot of every transaction committed when the
    copy began. Restore: stop the queue manager, put the copy in as openmsmq.db."""
    from openmsmq.store.backup import backup_database

    c = ctx_of(ctx)
    directory = c.store_directory("backup")
    if not holds_queue_manager(Path(directory)):
        raise CommandError(f"no queue manager at {quoted(directory)}: nothing to back up")
    if (Path(directory) / STORE_POINTER).is_file():
        raise CommandError(
            f"the queue manager at {quoted(directory)} keeps its store in PostgreSQL: back up its"
            ' database with pg_dump or the server\'s base backups (docs/store.md, "PostgreSQL")'
        )
    size = backup_database(Path(directory) / STORE_FILE, destination)
    c.emit(
        {"backup": str(destination), "bytes": size},
        lambda: click.echo(f"backed up {directory} to {destination} ({size:,} bytes)"),
    )


def register(group: click.Group) -> None:
    """Add ``backup`` to the ``openmsmq`` group."""
    group.add_command(backup)
