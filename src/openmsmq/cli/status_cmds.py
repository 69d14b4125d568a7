"""``openmsmq status``: one queue manager at a glance.

Shows the queue manager (GUID, data directory, the endpoints of a running one), queue
depths with the age of the oldest message, outgoing queues with their transfer state,
transactional sequence (TxSequenceID, last OrderAck'ed and last unacknowledged
TxSequenceNumber) and the messages their destination rejected since the QM started (by
the class of their negative FinalAck), incoming sequences (IncomingTxSequenceID / Number, RejectCount,
LastAccessTime) and the dead-letter counts. The data come from
:meth:`openmsmq.client.Transport.status` (:mod:`openmsmq.remote.status`): against a
running queue manager through its remote-read service, with the live transfer state;
against a stopped one in this process, with the stored sequence state only.

``--json`` prints :meth:`~openmsmq.remote.status.QMStatus.to_dict` (stable keys);
``--watch [SECONDS]`` refreshes until Ctrl-C (with ``--json``: one document per line; into
a file or a pipe: every frame in full, each under a line with its time). Tables written
to a file or a pipe are not cut to 80 columns.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from openmsmq.cli.context import console, ctx_of, json_option

if TYPE_CHECKING:
    from openmsmq.remote.status import QMStatus

__all__ = ["format_age", "register", "render_status", "status"]


def format_age(seconds: float | None) -> str:
    """``-``, ``42s``, ``3m07s``, ``2h05m``, ``4d03h``."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _when(t: float | None) -> str:
    return "-" if not t else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seq_id(value: int | None) -> str:
    return "-" if value is None else f"{value:#018x}"


def _in_seq(number: int | None, seq_id: int | None, current: int) -> str:
    """A TxSequenceNumber, with its TxSequenceID when that is not the current sequence
    (once everything is acknowledged the sender starts a new one, MS-MQQB 3.1.5.6)."""
    if number is None:
        return "-"
    return str(number) if seq_id in (None, current) else f"{number} of {_seq_id(seq_id)}"


def render_status(st: QMStatus) -> RenderableType:
    """The rich rendering of a :class:`QMStatus` (what ``openmsmq status`` prints)."""
    parts: list[RenderableType] = []
    ident = Table("property", "value", show_header=False, title="queue manager", title_justify="left")
    ident.add_row("GUID", st.qm_guid)
    ident.add_row("data directory", st.data_dir)
    ident.add_row("state", f"running (pid {st.pid})" if st.running and st.pid else
                  "running" if st.running else "not running (opened in this process)")  # fmt: skip
    for name, url in sorted(st.endpoints.items()):
        ident.add_row(name, url)
    dead = st.dead_letter
    ident.add_row("dead letters", f"{dead['xact']} transactional, {dead['non_xact']} non-transactional")
    parts.append(ident)

    queues = Table("queue", "kind", "tx", "messages", "bytes", "oldest", title="queues", title_justify="left")
    for q in st.queues:
        if q.kind == "outgoing" or (q.kind == "journal" and not q.message_count):
            continue
        age = None if q.oldest_arrived_time is None else st.time - q.oldest_arrived_time
        queues.add_row(
            q.name, q.kind, "yes" if q.transactional else "no", str(q.message_count), str(q.total_bytes),
            format_age(age),
        )  # fmt: skip
    parts.append(queues)

    out = Table(
        "destination", "next hop", "state", "waiting", "in flight", "TxSequenceID", "next no.",
        "last acked", "last unacked", "rejected", title="outgoing queues", title_justify="left",
    )  # fmt: skip
    for o in st.outgoing:
        state = o.state
        if o.state == "retrying" and o.retry_at is not None:
            state = f"retrying in {format_age(max(0.0, o.retry_at - st.time))}"
        elif o.window is not None:
            # What bounds the session's rate: window / round trip (docs/operations.md).
            rtt = "" if o.round_trip is None else f", {o.round_trip * 1000:.0f} ms"
            state = f"{state} (window {o.window}{rtt})"
        out.add_row(
            o.format_name, o.next_hop or "-", state, str(o.waiting), str(o.in_flight),
            _seq_id(o.tx_sequence_id), str(o.next_tx_sequence_number),
            _in_seq(o.last_acked_number, o.last_acked_sequence_id, o.tx_sequence_id),
            _in_seq(o.last_unacked_number, o.last_unacked_sequence_id, o.tx_sequence_id),
            ", ".join(f"{name} {n}" for name, n in sorted(o.rejected.items())) or "-",
        )  # fmt: skip
    parts.append(out if st.outgoing else Text("outgoing queues: none"))

    inc = Table(
        "sender QM", "destination", "IncomingTxSequenceID", "number", "rejects", "last access",
        title="incoming sequences", title_justify="left",
    )  # fmt: skip
    for i in st.incoming:
        inc.add_row(
            i.source_qm, i.destination, _seq_id(i.tx_sequence_id), str(i.tx_sequence_number),
            str(i.reject_count), _when(i.last_access_time),
        )  # fmt: skip
    parts.append(inc if st.incoming else Text("incoming sequences: none"))
    if not st.transfer:
        parts.append(
            Text(
                "transfer state (connected, retrying, in flight, last acknowledged) needs a running"
                " queue manager: shown is the stored sequence state.",
                style="yellow",
            )
        )
    return Group(*parts)


def ha_role(target: str | None) -> dict[str, Any] | None:
    """The high-availability block (role, lease epoch, since) of the serve running over the
    data directory ``target``, or None (no such serve, or not a node of an HA QM)."""
    if target is None:
        return None
    from openmsmq.runtime import live_runtime

    info = live_runtime(target)
    ha = info.get("ha") if info else None
    return ha if isinstance(ha, dict) else None


def render_ha(ha: dict[str, Any]) -> RenderableType:
    """The high-availability part of ``openmsmq status``."""
    table = Table("property", "value", show_header=False, title="high availability", title_justify="left")
    table.add_row("role", str(ha.get("role")))
    table.add_row("lease epoch", "-" if ha.get("epoch") is None else str(ha["epoch"]))
    since = ha.get("since")
    if isinstance(since, int | float):
        when = datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        table.add_row("since", f"{when} ({format_age(max(0.0, time.time() - since))} ago)")
    table.add_row("this node", str(ha.get("holder") or "-"))
    if ha.get("last_step_down"):
        table.add_row("last step-down", str(ha["last_step_down"]))
    if ha.get("role") != "active":
        table.add_row("queues", "served by the active node (openmsmq status there)")
    return table


@click.command("status")
@click.option(
    "--watch",
    type=click.FloatRange(min=0.1),
    is_flag=False,
    flag_value=2.0,
    default=None,
    metavar="[SECONDS]",
    help="Refresh every SECONDS (default 2) until Ctrl-C.",
)
@click.option(
    "--count", type=click.IntRange(min=1), default=None, help="With --watch: stop after COUNT refreshes."
)
@json_option
@click.pass_context
def status(ctx: click.Context, watch: float | None, count: int | None) -> None:
    """Show the queue manager, its queues, outgoing and incoming sequences; a node of a
    highly available queue manager also its role (active / standby), lease epoch and since
    when (a standby only that)."""
    c = ctx_of(ctx)
    ha = ha_role(c.data_directory())
    if ha is not None and ha.get("role") != "active":
        c.emit({"ha": ha}, lambda: console().print(render_ha(ha)))
        return
    transport = c.connection().transport
    if watch is None:
        st = transport.status()
        doc = st.to_dict() if ha is None else {**st.to_dict(), "ha": ha}
        frame = render_status(st) if ha is None else Group(render_ha(ha), render_status(st))
        c.emit(doc, lambda: console().print(frame))
        return
    # Ctrl-C ends a watch: exit status 130, as for every command.
    shown = 0
    if c.json:
        while count is None or shown < count:
            if shown:
                time.sleep(watch)
            click.echo(json.dumps(transport.status().to_dict(), ensure_ascii=False))
            shown += 1
        return
    out = console()
    if not out.is_terminal:
        # Into a file or a pipe every frame is written in full, one after the other, each
        # under a line with its time: what a terminal would only show in place.
        while count is None or shown < count:
            if shown:
                time.sleep(watch)
            frame = render_status(transport.status())
            out.print(f"--- {datetime.now(UTC).strftime('%Y-%m-%d %H:%M:%S')} UTC")
            out.print(frame)
            out.file.flush()
            shown += 1
        return
    with Live(render_status(transport.status()), auto_refresh=False, console=out) as live:
        shown = 1
        while count is None or shown < count:
            time.sleep(watch)
            live.update(render_status(transport.status()), refresh=True)
            shown += 1


def register(group: click.Group) -> None:
    """Add ``status`` to the ``openmsmq`` group."""
    group.add_command(status)
