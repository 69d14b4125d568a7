"""Shared state of one ``openmsmq`` invocation: target, output mode, lazy connection."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit

import click
from rich.console import Console

from openmsmq.errors import ConfigError, MQError, OpenMSMQError, quoted
from openmsmq.redact import redact

if TYPE_CHECKING:  # the client (and the store under it) loads when a command connects
    from openmsmq.client import Connection, Message, QueueInfo

__all__ = [
    "PIPE_WIDTH",
    "CliContext",
    "CommandError",
    "confirm",
    "console",
    "ctx_of",
    "error_document",
    "json_option",
    "message_row",
    "queue_row",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Columns of a table written to a file or a pipe: wide enough that no cell is cut (a
#: terminal's own width is used on a terminal; ``COLUMNS`` overrides both).
PIPE_WIDTH = 1000


def console(*, stderr: bool = False) -> Console:
    """A rich console for the command's tables: a terminal's width on a terminal; on a
    file or a pipe, :data:`PIPE_WIDTH` columns (rich would cut cells at 80: ``desti…``),
    no colours and no terminal controls, so that ``status | grep`` sees every value."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty or os.environ.get("COLUMNS"):
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH, no_color=True, highlight=False)


class CommandError(OpenMSMQError):
    """A command cannot do what it was asked (exit status 1); the message names the thing
    at fault as the user typed it."""


class CliContext:
    """What a command needs: the target (``--qm``), ``--json`` and the connection.

    ``target_source`` is where ``--qm`` came from: ``"flag:--qm"``, ``"env:OPENMSMQ_QM"``
    or ``"default"`` (``./data``)."""

    def __init__(self, target: str, json_output: bool, target_source: str = "default") -> None:
        self.target = target
        self.json = json_output
        self.target_source = target_source
        self._conn: Connection | None = None

    def data_directory(self) -> str | None:
        """The data directory ``--qm`` names (a path, or the path of ``file:///path``) as
        typed; None for a queue manager reached over the network (``grpc://``)."""
        if "://" not in self.target:
            return self.target
        url = urlsplit(self.target)
        return unquote(url.path) if url.scheme.lower() == "file" else None

    def store_directory(self, command: str) -> str:
        """The data directory of a command that reads the store file itself (backup,
        migrate); a :class:`CommandError` naming ``command`` for a network ``--qm``."""
        directory = self.data_directory()
        if directory is None:
            raise CommandError(
                f"{command} reads the store file: give --qm the data directory, not {quoted(self.target)}"
                " (run it on the queue manager's host)"
            )
        return directory

    def connection(self) -> Connection:
        """The connection to ``--qm``, opened on first use and closed when the command ends.
        A client command never creates a queue manager: a data directory without one is
        an error naming it (``openmsmq init`` and ``openmsmq serve`` create them)."""
        if self._conn is None:
            from openmsmq.client import connect

            self._conn = connect(self.target, create=False)
        return self._conn

    def close(self) -> None:
        """Close the connection if one was opened."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def emit(self, doc: Any, human: Callable[[], None]) -> None:
        """Print ``doc`` as one JSON document with ``--json``, else call ``human()``."""
        if self.json:
            click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        else:
            human()


def error_document(exc: OpenMSMQError) -> dict[str, Any]:
    """An error as JSON: HRESULT name and code for MQError, the key for ConfigError."""
    doc: dict[str, Any] = {"type": type(exc).__name__, "message": redact(str(exc))}
    if isinstance(exc, MQError):
        code = exc.hresult
        doc["hresult"] = int(code)
        doc["hresult_hex"] = f"0x{int(code):08X}"
        doc["name"] = getattr(code, "name", "HRESULT")
        doc["message"] = redact(exc.message)
    if isinstance(exc, ConfigError):
        doc["key"] = exc.key
    return {"error": doc}


def confirm(action: str, yes: bool) -> None:
    """Ask before ``action`` (a deletion) unless ``--yes`` was given. Asked only of a person
    at a terminal: with stdin not a terminal (a script, a pipe, a closed stdin) and no
    ``--yes`` it is a usage error (exit status 2), so that nothing is deleted by an answer
    no one gave. A "no" is exit status 1 with nothing deleted."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(f"{action}: stdin is not a terminal to ask for confirmation; pass --yes")
    try:
        answer = click.confirm(f"{action}?", default=False, err=True)
    except click.Abort as exc:  # click's for Ctrl-C and for end of input at the prompt
        if isinstance(exc.__context__, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        answer = False
    if not answer:
        raise CommandError(f"not confirmed: {action} was not done")


def ctx_of(ctx: click.Context) -> CliContext:
    """The :class:`CliContext` of the running invocation."""
    obj = ctx.find_object(CliContext)
    if obj is None:  # pragma: no cover - the group always creates it
        raise click.UsageError("openmsmq context missing")
    return obj


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx_of(ctx).json = True
    return value


def json_option(fn: F) -> F:
    """``--json`` accepted after a subcommand too (same as the global flag)."""
    return click.option(
        "--json",
        "json_flag",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print one JSON document (stable keys) instead of tables.",
    )(fn)


def queue_row(info: QueueInfo) -> dict[str, Any]:
    """A queue as a JSON object (stable keys)."""
    return asdict(info)


def message_row(m: Message) -> dict[str, Any]:
    """A message as a JSON object (stable keys, see :meth:`Message.to_dict`)."""
    return m.to_dict()
