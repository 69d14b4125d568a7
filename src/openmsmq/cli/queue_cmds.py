"""``openmsmq queue create|list|delete|purge|show``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click
from rich.table import Table

from openmsmq.cli.context import confirm, console, ctx_of, json_option, queue_row
from openmsmq.cli.poison_cmds import policy_from_options, policy_options
from openmsmq.client.types import INFINITE, Access, QueueInfo
from openmsmq.errors import HResult, MQError, quoted
from openmsmq.retry_policy import RetryPolicy

__all__ = ["queue", "register"]


def _limit(kb: int) -> str:
    return "unlimited" if kb == INFINITE else f"{kb} KB"


def _when(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S") if seconds else "-"


def _table(infos: list[QueueInfo]) -> None:
    table = Table("queue", "kind", "tx", "messages", "bytes", "label")
    for i in infos:
        table.add_row(
            i.path,
            i.kind,
            "yes" if i.transactional else "no",
            str(i.message_count),
            str(i.total_bytes),
            i.label,
        )
    console().print(table)


def _policy_text(stored: str) -> str:
    policy = RetryPolicy.decode(stored)
    if policy is None:
        return "none (aborted messages stay in the queue)"
    return (
        f"{policy.receive_retry_count} retries, {policy.max_retry_cycles} cycles of"
        f" {policy.retry_cycle_delay:g}s, then {policy.receive_error_handling.value}"
    )


def _details(i: QueueInfo) -> None:
    table = Table("property", "value", show_header=False)
    for key, value in (
        ("queue", i.path),
        ("kind", i.kind),
        ("transactional", "yes" if i.transactional else "no"),
        ("label", i.label),
        ("messages", str(i.message_count)),
        ("bytes", str(i.total_bytes)),
        ("quota", _limit(i.quota_kb)),
        ("journal", "yes" if i.journal else "no"),
        ("journal quota", _limit(i.journal_quota_kb)),
        ("private number", f"0x{i.private_number:X}"),
        ("created", _when(i.created_time)),
        ("modified", _when(i.modify_time)),
    ):
        table.add_row(key, value)
    if i.destination:
        table.add_row("destination", i.destination)
    if i.kind == "private":
        table.add_row("allowed senders", "\n".join(i.allowed_senders) or "every QM")
        table.add_row("retry policy", _policy_text(i.retry_policy))
    console().print(table)


@click.group()
def queue() -> None:
    """Create, list, inspect, purge and delete queues."""


@queue.command("create")
@click.argument("name")
@click.option("--transactional", is_flag=True, help="Accept only transactional messages.")
@click.option(
    "--quota",
    "quota_kb",
    type=click.IntRange(min=0),
    default=None,
    help="Quota in KB (default: the QM's store.default_queue_quota, unlimited unless set).",
)
@click.option("--journal", is_flag=True, help="Copy received messages to the queue's journal.")
@click.option("--label", default="", help="Queue label (up to 124 characters).")
@click.option(
    "--allow-sender",
    "allowed_senders",
    multiple=True,
    metavar="QM_GUID",
    help="Only this QM may send into the queue over MS-MQQB (repeat for more; default: every QM). "
    "Messages from other QMs are rejected with NACK_ACCESS_DENIED.",
)
@click.option(
    "--exist-ok",
    "exist_ok",
    is_flag=True,
    help="A queue NAME that exists already is success, left as it is (for scripts run again).",
)
@policy_options
@json_option
@click.pass_context
def create(
    ctx: click.Context,
    name: str,
    transactional: bool,
    quota_kb: int | None,
    journal: bool,
    label: str,
    allowed_senders: tuple[str, ...],
    exist_ok: bool,
    receive_retry_count: str | None,
    max_retry_cycles: str | None,
    retry_cycle_delay: str | None,
    receive_error_handling: str | None,
) -> None:
    """Create the private queue NAME (e.g. 'private$\\orders'). A --retry-* or
    --on-poison option gives a transactional queue a retry policy (WCF's defaults for
    the others: 5 retries, 2 cycles, 30m, move)."""
    c = ctx_of(ctx)
    try:
        info = c.connection().create_queue(
            name,
            transactional=transactional,
            quota_kb=quota_kb,
            journal=journal,
            label=label,
            allowed_senders=allowed_senders,
            retry_policy=policy_from_options(
                None,
                receive_retry_count=receive_retry_count,
                max_retry_cycles=max_retry_cycles,
                retry_cycle_delay=retry_cycle_delay,
                receive_error_handling=receive_error_handling,
            ),
        )
    except MQError as exc:
        if not exist_ok or exc.hresult != HResult.MQ_ERROR_QUEUE_EXISTS:
            raise
        info = c.connection().queue_info(name)
        if info.transactional != transactional:
            kind = "transactional" if info.transactional else "not transactional"
            click.echo(f"warning: queue {quoted(name)} exists and is {kind}; it is left as it is", err=True)
        c.emit({"created": queue_row(info), "existed": True}, lambda: click.echo(f"exists {info.path}"))
        return
    c.emit({"created": queue_row(info), "existed": False}, lambda: click.echo(f"created {info.path}"))


@queue.command("list")
@click.option("--all", "include_system", is_flag=True, help="Include system, journal and outgoing queues.")
@json_option
@click.pass_context
def list_(ctx: click.Context, include_system: bool) -> None:
    """List queues with their message counts."""
    c = ctx_of(ctx)
    infos = c.connection().list_queues(include_system=include_system)
    c.emit({"queues": [queue_row(i) for i in infos]}, lambda: _table(infos))


@queue.command("show")
@click.argument("name")
@json_option
@click.pass_context
def show(ctx: click.Context, name: str) -> None:
    """Show the properties and counts of queue NAME."""
    c = ctx_of(ctx)
    info = c.connection().queue_info(name)
    c.emit({"queue": queue_row(info)}, lambda: _details(info))


class _Quota(click.ParamType[int]):
    """A quota in KB, or ``unlimited``."""

    name = "KB|unlimited"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().casefold()
        if text in ("unlimited", "infinite", "none"):
            return INFINITE
        try:
            kb = int(text)
        except ValueError:
            self.fail(f"{value!r} is neither a number of KB nor 'unlimited'", param, ctx)
        if not 0 <= kb < INFINITE:
            self.fail(f"{kb} is out of range (0 to {INFINITE - 1}, or 'unlimited')", param, ctx)
        return kb


@queue.command("set")
@click.argument("name")
@click.option("--label", default=None, help="Queue label (up to 124 characters).")
@click.option("--quota", "quota_kb", type=_Quota(), default=None, help="Quota in KB, or 'unlimited'.")
@click.option("--journal/--no-journal", default=None, help="Copy received messages to the queue's journal.")
@click.option("--journal-quota", "journal_quota_kb", type=_Quota(), default=None, help="Journal quota in KB.")
@click.option(
    "--base-priority", type=click.IntRange(-32768, 32767), default=None, help="BasePriority of the queue."
)
@click.option(
    "--allow-sender",
    "allowed_senders",
    multiple=True,
    metavar="QM_GUID",
    help="Replace the QMs that may send into the queue over MS-MQQB with these (repeat for more).",
)
@click.option("--allow-every-sender", is_flag=True, help="Let every QM send into the queue again.")
@policy_options
@click.option("--no-retry-policy", is_flag=True, help="Remove the queue's retry policy.")
@json_option
@click.pass_context
def set_(
    ctx: click.Context,
    name: str,
    label: str | None,
    quota_kb: int | None,
    journal: bool | None,
    journal_quota_kb: int | None,
    base_priority: int | None,
    allowed_senders: tuple[str, ...],
    allow_every_sender: bool,
    no_retry_policy: bool,
    receive_retry_count: str | None,
    max_retry_cycles: str | None,
    retry_cycle_delay: str | None,
    receive_error_handling: str | None,
) -> None:
    """Change properties of the private queue NAME (only those given), as MSMQ's
    MQSetQueueProperties; works on a running queue manager too. Shows the queue then."""
    if allowed_senders and allow_every_sender:
        raise click.UsageError("give --allow-sender or --allow-every-sender, not both")
    changes: dict[str, Any] = {
        k: v
        for k, v in (
            ("label", label),
            ("quota_kb", quota_kb),
            ("journal", journal),
            ("journal_quota_kb", journal_quota_kb),
            ("base_priority", base_priority),
        )
        if v is not None
    }
    if allowed_senders or allow_every_sender:
        changes["allowed_senders"] = list(allowed_senders)
    c = ctx_of(ctx)
    policy = {
        "receive_retry_count": receive_retry_count,
        "max_retry_cycles": max_retry_cycles,
        "retry_cycle_delay": retry_cycle_delay,
        "receive_error_handling": receive_error_handling,
    }
    if no_retry_policy:
        if any(v is not None for v in policy.values()):
            raise click.UsageError("give --no-retry-policy or retry policy options, not both")
        changes["retry_policy"] = ""
    elif any(v is not None for v in policy.values()):
        # Options not given keep the queue's current values (else WCF's defaults).
        current = RetryPolicy.decode(c.connection().queue_info(name).retry_policy)
        new = policy_from_options(current, **policy)
        assert new is not None
        changes["retry_policy"] = new.encode()
    if not changes:
        raise click.UsageError("nothing to set: give at least one option (see --help)")
    info = c.connection().set_queue_properties(name, **changes)
    c.emit({"queue": queue_row(info)}, lambda: _details(info))


@queue.command("delete")
@click.argument("name")
@json_option
@click.pass_context
def delete(ctx: click.Context, name: str) -> None:
    """Delete queue NAME and its messages."""
    c = ctx_of(ctx)
    c.connection().delete_queue(name)
    c.emit({"deleted": name}, lambda: click.echo(f"deleted {name}"))


@queue.command("purge")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask (needed when stdin is not a terminal).")
@json_option
@click.pass_context
def purge(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete every available message of queue NAME.

    NAME may also be a remote queue's format name (DIRECT=TCP:host\\private$\\q, as
    `queue list --all` shows outgoing queues): this QM's outgoing queue to it is purged,
    with the queue manager stopped. Its messages leave with the class NACK_DELETED
    (0x8001); those sent with --dead-letter go to the dead-letter queues (see `openmsmq
    dlq`).

    Asks for confirmation first, unless --yes."""
    c = ctx_of(ctx)
    conn = c.connection()
    confirm(f"delete every message of {name}", yes)
    try:
        with conn.open_queue(name, Access.RECEIVE) as q:
            count = q.purge()
    except MQError as exc:
        if exc.hresult != HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION:
            raise
        count = conn.purge_outgoing(name)  # a remote queue: this QM's outgoing queue to it
        c.emit(
            {"queue": name, "outgoing": True, "purged": count},
            lambda: click.echo(
                f"purged {count} message(s) from the outgoing queue to {name}"
                " (those sent with --dead-letter are in the dead-letter queues)"
            ),
        )
        return
    c.emit({"queue": name, "purged": count}, lambda: click.echo(f"purged {count} message(s) from {name}"))


def register(group: click.Group) -> None:
    """Add ``queue`` to the ``openmsmq`` group."""
    group.add_command(queue)
