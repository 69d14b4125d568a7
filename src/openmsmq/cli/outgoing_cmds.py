"""``openmsmq outgoing suspend|resume``: MSMQ's Suspend-MsmqOutgoingQueue and
Resume-MsmqOutgoingQueue on a running queue manager.

A suspended outgoing queue keeps its messages and sends none (no session is dialled for
it) until it is resumed; messages already in flight finish their exchange, so the
receiver's TxSequenceNumbers stay contiguous (MS-MQQB 3.1.1.3.1). The suspension is held
by the running transfer: a restarted queue manager sends from every outgoing queue.
"""

from __future__ import annotations

import click

from openmsmq.cli.context import ctx_of, json_option, queue_row

__all__ = ["outgoing", "register"]


@click.group()
def outgoing() -> None:
    """Suspend and resume the outgoing queues of a running queue manager."""


def _set(ctx: click.Context, format_name: str, suspended: bool) -> None:
    c = ctx_of(ctx)
    conn = c.connection()
    info = conn.suspend_outgoing(format_name) if suspended else conn.resume_outgoing(format_name)
    done = "suspended" if suspended else "resumed"
    c.emit(
        {"queue": queue_row(info), "suspended": suspended},
        lambda: click.echo(f"{done} the outgoing queue to {format_name}"),
    )


@outgoing.command("suspend")
@click.argument("format_name", metavar="FORMAT_NAME")
@json_option
@click.pass_context
def suspend(ctx: click.Context, format_name: str) -> None:
    """Stop sending from the outgoing queue to FORMAT_NAME (as `status` lists it, e.g.
    'DIRECT=TCP:10.0.0.5\\private$\\orders'); its messages stay until `outgoing resume`."""
    _set(ctx, format_name, True)


@outgoing.command("resume")
@click.argument("format_name", metavar="FORMAT_NAME")
@json_option
@click.pass_context
def resume(ctx: click.Context, format_name: str) -> None:
    """Send from the outgoing queue to FORMAT_NAME again."""
    _set(ctx, format_name, False)


def register(group: click.Group) -> None:
    """Add ``outgoing`` to the ``openmsmq`` group."""
    group.add_command(outgoing)
