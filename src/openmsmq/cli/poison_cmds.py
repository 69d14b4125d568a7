"""``openmsmq move`` and ``openmsmq poison list|show|return|purge``: subqueues and the
messages a retry policy parked (docs/operations.md, "Poison messages")."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from openmsmq.cli.context import CliContext, confirm, console, ctx_of, json_option, message_row
from openmsmq.cli.receiving import print_messages
from openmsmq.client.types import Access, QueueInfo
from openmsmq.errors import HResult, MQError
from openmsmq.retry_policy import RetryPolicy
from openmsmq.wire.subqueues import POISON, RETRY

__all__ = ["policy_from_options", "policy_options", "register"]

#: Most messages ``poison list`` shows per queue.
_LIST_LIMIT = 1000


def policy_options(fn: Any) -> Any:
    """The retry-policy options of ``queue create`` and ``queue set``."""
    for option in reversed(
        [
            click.option(
                "--retry-count",
                "receive_retry_count",
                default=None,
                help="Retry policy: immediate retries (aborted receives) before a message moves to ;retry.",
            ),
            click.option(
                "--retry-cycles",
                "max_retry_cycles",
                default=None,
                help="Retry policy: cycles through ;retry before the final handling.",
            ),
            click.option(
                "--retry-delay",
                "retry_cycle_delay",
                default=None,
                help="Retry policy: time in ;retry per cycle (seconds, or 30s, 5m, 2h, 1d).",
            ),
            click.option(
                "--on-poison",
                "receive_error_handling",
                type=click.Choice(["move", "reject", "drop", "fault"]),
                default=None,
                help="Retry policy: the final handling (move to ;poison, reject to the dead-letter queue,"
                " drop, or fault: leave it and stop the consumers).",
            ),
        ]
    ):
        fn = option(fn)
    return fn


def policy_from_options(base: RetryPolicy | None, **settings: Any) -> RetryPolicy | None:
    """The policy the options ask for on top of ``base`` (None when no option was given);
    a bad value: MQ_ERROR_ILLEGAL_PROPERTY_VALUE naming the setting."""
    if all(v is None for v in settings.values()):
        return None
    return RetryPolicy.from_settings(base, **settings)


def _parents(c: CliContext, queue: str | None) -> list[QueueInfo]:
    conn = c.connection()
    if queue is not None:
        return [conn.queue_info(queue)]
    return [i for i in conn.list_queues() if i.kind == "private"]


def _sub(path: str, name: str) -> str:
    return f"{path};{name}"


def _peek_all(c: CliContext, queue: str, limit: int = _LIST_LIMIT) -> list[Any]:
    try:
        with c.connection().open_queue(queue, Access.PEEK) as q:
            return q.peek_many(limit, timeout=0)
    except MQError as exc:
        if exc.hresult in (HResult.MQ_ERROR_QUEUE_NOT_FOUND, HResult.MQ_ERROR_IO_TIMEOUT):
            return []  # no subqueue yet: nothing was ever moved into it
        raise


@click.command("move")
@click.argument("queue")
@click.argument("lookup_id", type=click.IntRange(min=1))
@click.option(
    "--to",
    "to",
    required=True,
    help="Where: a subqueue name (poison, retry, ...), the queue itself, or a format name of either.",
)
@json_option
@click.pass_context
def move(ctx: click.Context, queue: str, lookup_id: int, to: str) -> None:
    """Move message LOOKUP_ID of QUEUE to one of its subqueues, or from a subqueue
    (QUEUE 'private$\\orders;poison') back to its queue or to another of its subqueues
    (MSMQ's MQMoveMessage). The message keeps its identity and properties and gets a new
    LookupIdentifier; a subqueue is created by the first move into it."""
    c = ctx_of(ctx)
    with c.connection().open_queue(queue, Access.RECEIVE) as q:
        new = q.move(lookup_id, to)
    c.emit(
        {"queue": queue, "lookup_id": lookup_id, "to": to, "new_lookup_id": new},
        lambda: click.echo(f"moved {lookup_id} from {queue} to {to} (now {new})"),
    )


@click.group()
def poison() -> None:
    """Messages a retry policy moved to a queue's ;poison (and ;retry) subqueue."""


@poison.command("list")
@click.argument("queue", required=False)
@json_option
@click.pass_context
def list_(ctx: click.Context, queue: str | None) -> None:
    """Poison and retry counts of QUEUE (default: every queue with any), and the poison
    messages with their AbortCount and MoveCount."""
    c = ctx_of(ctx)
    rows: list[dict[str, Any]] = []
    for info in _parents(c, queue):
        poisoned = _peek_all(c, _sub(info.path, POISON))
        retrying = _peek_all(c, _sub(info.path, RETRY))
        if queue is None and not poisoned and not retrying:
            continue
        rows.append({
            "queue": info.path,
            "retry_policy": info.retry_policy,
            "poison": len(poisoned),
            "retry": len(retrying),
            "messages": [message_row(m) for m in poisoned],
        })  # fmt: skip

    def human() -> None:
        table = Table("queue", "poison", "retry", "policy")
        for r in rows:
            table.add_row(r["queue"], str(r["poison"]), str(r["retry"]), r["retry_policy"] or "-")
        console().print(table)
        for r in rows:
            if r["messages"]:
                click.echo(f"{r['queue']};poison:")
                table = Table("lookup id", "message id", "label", "aborts", "moves", "size")
                for m in r["messages"]:
                    table.add_row(
                        str(m["lookup_id"]), m["message_id"], m["label"], str(m["abort_count"]),
                        str(m["move_count"]), str(m["body_size"]),
                    )  # fmt: skip
                console().print(table)

    c.emit({"queues": rows}, human)


@poison.command("show")
@click.argument("queue")
@click.argument("lookup_id", type=click.IntRange(min=1))
@json_option
@click.pass_context
def show(ctx: click.Context, queue: str, lookup_id: int) -> None:
    """Show poison message LOOKUP_ID of QUEUE (its ;poison subqueue)."""
    c = ctx_of(ctx)
    with c.connection().open_queue(_sub(queue, POISON), Access.PEEK) as q:
        m = q.peek_by_lookup_id(lookup_id)
    c.emit({"message": message_row(m)}, lambda: print_messages([m]))


@poison.command("return")
@click.argument("queue")
@click.argument("lookup_ids", nargs=-1, type=click.IntRange(min=1))
@click.option("--all", "every", is_flag=True, help="Every message of the ;poison subqueue.")
@json_option
@click.pass_context
def return_(ctx: click.Context, queue: str, lookup_ids: tuple[int, ...], every: bool) -> None:
    """Move poison messages of QUEUE back to QUEUE (at its tail, counts kept: the retry
    policy sees them as it left them). Give LOOKUP_IDs or --all."""
    if bool(lookup_ids) == every:
        raise click.UsageError("give LOOKUP_IDs or --all")
    c = ctx_of(ctx)
    conn = c.connection()
    ids = list(lookup_ids) or [m.lookup_id for m in _peek_all(c, _sub(queue, POISON), 1_000_000)]
    # One transaction: every message returns, or none does.
    with conn.open_queue(_sub(queue, POISON), Access.RECEIVE) as q, conn.transaction() as tx:
        for lid in ids:
            q.move(lid, queue, tx=tx)
    moved = ids
    c.emit(
        {"queue": queue, "returned": sorted(moved)},
        lambda: click.echo(f"returned {len(moved)} message(s) from {queue};poison to {queue}"),
    )


@poison.command("purge")
@click.argument("queue")
@click.option("--yes", is_flag=True, help="Do not ask (needed when stdin is not a terminal).")
@json_option
@click.pass_context
def purge(ctx: click.Context, queue: str, yes: bool) -> None:
    """Delete every message of QUEUE's ;poison subqueue (asks first unless --yes)."""
    c = ctx_of(ctx)
    confirm(f"delete every poison message of {queue}", yes)
    try:
        with c.connection().open_queue(_sub(queue, POISON), Access.RECEIVE) as q:
            count = q.purge()
    except MQError as exc:
        if exc.hresult != HResult.MQ_ERROR_QUEUE_NOT_FOUND:
            raise
        count = 0
    c.emit(
        {"queue": queue, "purged": count}, lambda: click.echo(f"purged {count} poison message(s) of {queue}")
    )


def register(group: click.Group) -> None:
    """Add ``move`` and ``poison`` to the ``openmsmq`` group."""
    group.add_command(move)
    group.add_command(poison)
