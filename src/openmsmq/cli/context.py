"""Shared state of one ``openmsmq`` invocation: target, output mode, lazy connection."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

import click

from openmsmq.client import Connection, Message, QueueInfo, connect

__all__ = ["CliContext", "ctx_of", "json_option", "message_row", "queue_row"]

F = TypeVar("F", bound=Callable[..., Any])


class CliContext:
    """What a command needs: the target (``--qm``), ``--json`` and the connection."""

    def __init__(self, target: str, json_output: bool) -> None:
        self.target = target
        self.json = json_output
        self._conn: Connection | None = None

    def connection(self) -> Connection:
        """The connection to ``--qm``, opened on first use and closed when the command ends."""
        if self._conn is None:
            self._conn = connect(self.target)
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
