"""``openmsmq serve``: run a queue manager with its MS-MQQB listener.

Registered in :mod:`openmsmq.cli.main` through :func:`register`; also runnable as
``python -m openmsmq.cli.serve``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import click

from openmsmq.config import load_config
from openmsmq.errors import OpenMSMQError, quoted
from openmsmq.observability.logging import configure_logging

__all__ = ["main", "register", "serve"]


@click.command("serve")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="TOML configuration file.")
@click.option("--data-dir", type=click.Path(path_type=Path), help="Data directory of the queue manager.")
@click.option("--listen", help="Address the MS-MQQB listener binds (default 127.0.0.1).")
@click.option("--port", type=int, help="MS-MQQB TCP port (default 1801).")
@click.option("--route", "routes", multiple=True, help="Static route DEST=NEXTHOP (repeatable).")
@click.option("--allow", "allow", multiple=True, help="Allowed peer network CIDR (repeatable).")
@click.option("--remote-port", type=int, help="Port of the remote-read gRPC service (default 2105; 0 = any).")
@click.option("--metrics-port", type=int, help="Port of the Prometheus endpoint (default 9181; 0 = any).")
@click.option(
    "--console-port", type=int, help="Port of the web console (default 9180; 0 = any); turns it on."
)
@click.option("--remote/--no-remote", "remote", default=None, help="Run the remote-read gRPC service.")
@click.option(
    "--console/--no-console", "console", default=None, help="Serve the web console (docs/console.md)."
)
@click.option("--metrics/--no-metrics", "metrics", default=None, help="Serve Prometheus metrics.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log level.")
@click.pass_context
def serve(
    ctx: click.Context,
    config_path: Path | None,
    data_dir: Path | None,
    listen: str | None,
    port: int | None,
    routes: tuple[str, ...],
    allow: tuple[str, ...],
    remote_port: int | None,
    metrics_port: int | None,
    console_port: int | None,
    remote: bool | None,
    console: bool | None,
    metrics: bool | None,
    log_level: str | None,
) -> None:
    """Run a queue manager until SIGTERM/SIGINT: durable queues, MS-MQQB transfer on TCP 1801,
    the remote-read gRPC service (2105), Prometheus metrics (9181) and, when turned on, the
    web console (9180).

    ``--listen ADDRESS`` also moves the remote-read and metrics endpoints to ADDRESS unless
    the configuration file or environment names their own address, so that several QMs on
    one host (127.0.0.1, 127.0.0.2, ...) each keep their services on their own address.
    """
    overrides: dict[str, object] = {}
    #: dotted key -> the option of this command that set it (its source in `config show`)
    flags: dict[str, str] = {}
    data_dir_flag = "flag:--data-dir"
    if data_dir is None:
        data_dir, data_dir_flag = _data_dir_of_global_qm(ctx)
    for key, value, flag in (
        ("qm.data_dir", str(data_dir) if data_dir is not None else None, data_dir_flag),
        ("mqqb.listen_address", listen, "flag:--listen"),
        ("mqqb.port", port, "flag:--port"),
        ("mqqb.routes", _route_table(routes) if routes else None, "flag:--route"),
        ("mqqb.allowed_peers", list(allow) if allow else None, "flag:--allow"),
        ("log.level", log_level, "flag:--log-level"),
        ("remote.port", remote_port, "flag:--remote-port"),
        ("metrics.port", metrics_port, "flag:--metrics-port"),
        ("remote.enabled", remote, "flag:--remote/--no-remote"),
        ("metrics.enabled", metrics, "flag:--metrics/--no-metrics"),
        ("console.port", console_port, "flag:--console-port"),
        (
            "console.enabled",
            True if console_port is not None and console is None else console,
            "flag:--console/--no-console" if console is not None else "flag:--console-port",
        ),
    ):
        if value is not None:
            overrides[key], flags[key] = value, flag
    try:
        loaded = load_config(config_path, os.environ, overrides)
        if listen is not None:
            follow = {
                key: listen
                for key in ("remote.listen_address", "metrics.listen_address", "console.listen_address")
                if loaded.sources.get(key) == "default"
            }
            if follow:
                loaded = load_config(config_path, os.environ, {**overrides, **follow})
                flags.update(dict.fromkeys(follow, "flag:--listen"))
        loaded = replace(loaded, sources={**loaded.sources, **flags})
        configure_logging(loaded.config.log.level, loaded.config.log.format, sys.stderr)
        from openmsmq.server.serve import run as run_server  # the asyncio stack only when serving

        run_server(loaded.config, loaded=loaded)
    except OpenMSMQError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def _route_table(routes: tuple[str, ...]) -> dict[str, str]:
    table: dict[str, str] = {}
    for r in routes:
        dest, eq, hop = r.partition("=")
        if not eq:
            raise click.BadParameter(f"expected DEST=NEXTHOP, got {quoted(r)}", param_hint="--route")
        table[dest.strip()] = hop.strip()
    return table


def _data_dir_of_global_qm(ctx: click.Context) -> tuple[Path | None, str]:
    """The data directory named by ``openmsmq --qm DIR serve`` (or ``OPENMSMQ_QM``), so that
    ``serve`` runs the queue manager the other commands talk to, with where it came from
    (``flag:--qm`` or ``env:OPENMSMQ_QM``); ``None`` when ``--qm`` was left at its default
    (then ``qm.data_dir`` of the configuration applies). A ``grpc://`` target names a QM
    served elsewhere and cannot be served here."""
    parent = ctx.parent
    if parent is None or "target" not in parent.params:
        return None, ""
    source = parent.get_parameter_source("target")
    if source not in (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT):
        return None, ""
    target = str(parent.params["target"])
    if target.startswith("grpc://"):
        raise click.BadParameter(
            f"{target} is a remote queue manager; serve runs a local one: give --qm a data "
            "directory (or use --data-dir)",
            param_hint="--qm",
        )
    how = "flag:--qm" if source == click.core.ParameterSource.COMMANDLINE else "env:OPENMSMQ_QM"
    return Path(target.removeprefix("file://")), how


def register(group: click.Group) -> None:
    """Add ``serve`` to the ``openmsmq`` command group."""
    group.add_command(serve)


def main() -> None:
    """Entry point of ``python -m openmsmq.cli.serve``."""
    serve()


if __name__ == "__main__":
    main()
