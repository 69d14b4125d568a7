"""The ``openmsmq`` click group: global options, command registration, error handling."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from typing import Any

import click

from openmsmq import __version__
from openmsmq.cli.context import CliContext, error_document
from openmsmq.errors import OpenMSMQError, quoted
from openmsmq.redact import redact

__all__ = [
    "COMMANDS",
    "COMMAND_MODULES",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "cli",
    "main",
]

#: Each top-level command -> the modules whose ``register(group)`` adds it, in order (see
#: :mod:`openmsmq.cli`). A command's modules are imported only when it runs or help lists
#: it: ``openmsmq send`` does not load the code of ``serve``, ``backup`` or ``dlq``.
COMMANDS: dict[str, tuple[str, ...]] = {
    "init": ("openmsmq.cli.init_cmds",),
    "queue": ("openmsmq.cli.queue_cmds", "openmsmq.cli.export_cmds"),
    "send": ("openmsmq.cli.message_cmds",),
    "receive": ("openmsmq.cli.message_cmds",),
    "peek": ("openmsmq.cli.message_cmds",),
    "config": ("openmsmq.cli.config_cmds",),
    "dlq": ("openmsmq.cli.dlq_cmds",),
    "serve": ("openmsmq.cli.serve",),
    "status": ("openmsmq.cli.status_cmds",),
    "sequence": ("openmsmq.cli.sequence_cmds",),
    "outgoing": ("openmsmq.cli.outgoing_cmds",),
    "completion": ("openmsmq.cli.completion_cmds",),
    "backup": ("openmsmq.cli.backup_cmds",),
    "migrate": ("openmsmq.cli.migrate_cmds",),
    "move": ("openmsmq.cli.poison_cmds",),
    "poison": ("openmsmq.cli.poison_cmds",),
}
#: Every command module, each once.
COMMAND_MODULES: list[str] = list(dict.fromkeys(m for mods in COMMANDS.values() for m in mods))


#: Exit status of every command: success.
EXIT_OK = 0
#: The command failed (a library error, an OS error, a declined confirmation).
EXIT_ERROR = 1
#: The command line is wrong (click's usage errors).
EXIT_USAGE = 2
#: Ctrl-C (SIGINT), 128 + 2 as shells report a process a SIGINT ended.
EXIT_INTERRUPTED = 130


#: Longest the clean-up after Ctrl-C (closing the connection) may take.
INTERRUPT_CLOSE_WAIT = 10.0


def _exit_if_close_hangs() -> None:
    """End the process with 130 if the clean-up after Ctrl-C has not within
    :data:`INTERRUPT_CLOSE_WAIT`. A KeyboardInterrupt that lands inside a library's locked
    section (a gRPC call's state, a condition variable) can leave a lock held that the
    clean-up then waits for. Ending the process is safe: the command's output is already
    written, the store keeps what was committed and drops what was not (as after a
    crash), and a remote server ends the session's transactions itself (MS-MQRR 3.1.6)."""
    import threading

    def force() -> None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)

    timer = threading.Timer(INTERRUPT_CLOSE_WAIT, force)
    timer.daemon = True
    timer.start()


class _Group(click.Group):
    """Every failure of every command as one clean line on stderr and its exit status:
    library errors and OS errors 1, Ctrl-C 130 (usage errors are click's: 2). Commands
    are loaded from :data:`COMMANDS` when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            for name in COMMANDS[cmd_name]:
                importlib.import_module(name).register(self)
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OpenMSMQError as exc:
            obj = ctx.find_object(CliContext)
            if obj is not None and obj.json:
                click.echo(json.dumps(error_document(exc), indent=2))
            click.echo(f"error: {redact(str(exc))}", err=True)
            ctx.exit(EXIT_ERROR)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            _exit_if_close_hangs()
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader of stdout went away (`| head`): nothing more can be shown there;
            # stdout is pointed at /dev/null so that the interpreter's final flush is quiet.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            click.echo("error: stdout was closed before the output was complete", err=True)
            ctx.exit(EXIT_ERROR)
        except OSError as exc:
            where = f"{quoted(exc.filename)}: " if exc.filename else ""
            click.echo(f"error: {where}{exc.strerror or exc}", err=True)
            ctx.exit(EXIT_ERROR)


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


def main() -> None:
    """Console entry point (``openmsmq``)."""
    cli(prog_name="openmsmq")
