"""The ``openmsmq`` click group: global options, command registration, error handling."""

from __future__ import annotations

import importlib
import json
from typing import Any

import click

from openmsmq import __version__
from openmsmq.cli.context import CliContext
from openmsmq.errors import ConfigError, MQError, OpenMSMQError

__all__ = ["COMMAND_MODULES", "cli", "main"]

#: Modules whose ``register(group)`` adds their commands (see :mod:`openmsmq.cli`).
COMMAND_MODULES: list[str] = [
    "openmsmq.cli.init_cmds",
    "openmsmq.cli.queue_cmds",
    "openmsmq.cli.message_cmds",
    "openmsmq.cli.config_cmds",
    "openmsmq.cli.dlq_cmds",
    "openmsmq.cli.serve",
    "openmsmq.cli.status_cmds",
]


def error_document(exc: OpenMSMQError) -> dict[str, Any]:
    """An error as JSON: HRESULT name and code for MQError, the key for ConfigError."""
    doc: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, MQError):
        code = exc.hresult
        doc["hresult"] = int(code)
        doc["hresult_hex"] = f"0x{int(code):08X}"
        doc["name"] = getattr(code, "name", "HRESULT")
        doc["message"] = exc.message
    if isinstance(exc, ConfigError):
        doc["key"] = exc.key
    return {"error": doc}


class _Group(click.Group):
    """Turns library errors into one clean line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OpenMSMQError as exc:
            obj = ctx.find_object(CliContext)
            if obj is not None and obj.json:
                click.echo(json.dumps(error_document(exc), indent=2))
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--qm",
    "target",
    envvar="OPENMSMQ_QM",
    default="./data",
    show_default=True,
    help="Queue manager: a data directory, file:///path, or grpc://host:port (env OPENMSMQ_QM).",
)
@click.option("--json", "json_output", is_flag=True, help="Print one JSON document instead of tables.")
@click.version_option(__version__, prog_name="openmsmq")
@click.pass_context
def cli(ctx: click.Context, target: str, json_output: bool) -> None:
    """openmsmq: transactional MSMQ-style queue manager."""
    source = ctx.get_parameter_source("target")
    if source == click.core.ParameterSource.COMMANDLINE:
        given = "flag:--qm"
    elif source == click.core.ParameterSource.ENVIRONMENT:
        given = "env:OPENMSMQ_QM"
    else:
        given = "default"
    obj = CliContext(target, json_output, given)
    ctx.obj = obj
    ctx.call_on_close(obj.close)


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def main() -> None:
    """Console entry point (``openmsmq``)."""
    cli(prog_name="openmsmq")
