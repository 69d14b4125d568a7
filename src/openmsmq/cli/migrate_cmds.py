"""``openmsmq migrate``: move a stopped queue manager from SQLite to PostgreSQL
(:mod:`openmsmq.qm.migration`; docs/ha.md, "Moving a queue manager from SQLite to
PostgreSQL")."""

from __future__ import annotations

import os
from pathlib import Path

import click

from openmsmq.cli.context import ctx_of, json_option
from openmsmq.errors import ConfigError
from openmsmq.redact import redact

__all__ = ["migrate", "register"]


def _dsn(given: str | None, config_path: Path | None) -> str:
    """--dsn, else store.dsn of --config / OPENMSMQ_STORE_DSN."""
    if given:
        return given
    from openmsmq.config import load_config

    dsn = load_config(config_path, os.environ).config.store.dsn.strip()
    if not dsn:
        raise ConfigError(
            "store.dsn",
            "give the PostgreSQL database to move to: --dsn, or store.dsn in --config / the environment",
        )
    return dsn


@click.command("migrate")
@click.option(
    "--dsn",
    default=None,
    help="The PostgreSQL database to move to (libpq URI or key=value); default: store.dsn of --config"
    " or OPENMSMQ_STORE_DSN. Keep the password out of it (PGPASSWORD, passfile=).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="TOML configuration file whose store.dsn to use (as given to 'openmsmq serve --config').",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Replace an earlier copy of THIS queue manager in the database (an earlier migration);"
    " another queue manager's database is never touched.",
)
@json_option
@click.pass_context
def migrate(ctx: click.Context, dsn: str | None, config_path: Path | None, replace: bool) -> None:
    """Move the queue manager of --qm (a data directory; stop it first) from its SQLite
    store to a PostgreSQL database: its identity, queues, messages, outgoing and incoming
    sequence state, dead letters, journals and idempotent-send identities, in one
    transaction, verified (rows per table, messages per queue) before it commits. The data
    directory then names the database and the SQLite file is kept as openmsmq.db.migrated.
    Refused, with nothing written, when the queue manager runs or the database is not
    empty."""
    from openmsmq.qm.migration import migrate_to_postgresql

    c = ctx_of(ctx)
    directory = c.store_directory("migrate")
    target = _dsn(dsn, config_path)
    result = migrate_to_postgresql(Path(directory), target, replace=replace)
    report = result.report
    shown = redact(target)
    settings = f'[store]\nbackend = "postgresql"\ndsn = "{shown}"'

    def human() -> None:
        click.echo(f"migrated queue manager {report.qm_guid} from {directory} to {report.target}")
        if report.replaced:
            click.echo("  (replaced an earlier copy of this queue manager in the database)")
        click.echo("rows per table (verified against the SQLite store before COMMIT):")
        for table, n in report.tables.items():
            click.echo(f"  {table:<20} {n:>10,}")
        click.echo("messages per queue:")
        for name, n, size in report.queues:
            click.echo(f"  {name:<40} {n:>10,} messages {size:>14,} bytes")
        click.echo(f"the SQLite store is kept as {result.sqlite_kept_as} (delete it once satisfied)")
        click.echo(
            f"{directory} now names the database: serve and every command on it use PostgreSQL."
            " Set in the configuration of serve (for high availability, on every node):"
        )
        click.echo(settings)

    c.emit(
        {
            "migrated": directory,
            "qm_guid": str(report.qm_guid),
            "target": report.target,
            "replaced": report.replaced,
            "tables": report.tables,
            "queues": [{"name": n, "messages": m, "bytes": b} for n, m, b in report.queues],
            "sqlite_kept_as": str(result.sqlite_kept_as),
            "configuration": {"store.backend": "postgresql", "store.dsn": shown},
        },
        human,
    )


def register(group: click.Group) -> None:
    """Add ``migrate`` to the ``openmsmq`` group."""
    group.add_command(migrate)
