"""The console's pages (GET): overview, queues, a queue, a message, outgoing queues,
incoming sequences, dead letters, sessions and configuration."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.responses import Response

from openmsmq.client import Message
from openmsmq.console.app import ConsoleApp, Ctx, HttpError, qm_error
from openmsmq.console.backend import body_preview
from openmsmq.console.live import subqueue_totals
from openmsmq.errors import HResult, MQError
from openmsmq.qm.names import DEADLETTER, DEADXACT
from openmsmq.redact import SECRET_NAMES, redact
from openmsmq.remote.status import QMStatus

__all__ = [
    "PAGE_SIZE",
    "TAKEOVER_WARNING",
    "ConfigRow",
    "Pages",
    "config_rows",
    "number_field",
    "role_warnings",
    "when",
]

#: Messages per page of a queue's browse list.
PAGE_SIZE = 50
#: Dead letters listed on their page.
DEAD_LETTER_ROWS = 500
#: Below this share of free space in the data directory's file system the overview warns.
LOW_DISK_SHARE = 0.10
#: For this long after a node of a highly available pair took over the queue manager,
#: the overview warns: peers reconnect and resend, remote-read clients reconnect, and
#: transactions that were open on the former active were aborted.
TAKEOVER_WARNING = 15 * 60.0


@dataclass(frozen=True, slots=True)
class ConfigRow:
    """One key of the effective configuration and where its value came from."""

    key: str
    value: str
    source: str


class Pages:
    """Registers the pages on a :class:`ConsoleApp`."""

    def __init__(self, web: ConsoleApp, config_rows: list[ConfigRow], identity: Mapping[str, str],
                 data_dir: str) -> None:  # fmt: skip
        self.web = web
        self.backend = web.backend
        self.config_rows = config_rows
        self.identity = identity
        self.data_dir = data_dir
        for path, handler in (
            ("/", self.overview), ("/queues", self.queues), ("/queue", self.queue),
            ("/message", self.message), ("/message/body", self.body), ("/outgoing", self.outgoing),
            ("/incoming", self.incoming), ("/deadletters", self.dead_letters), ("/sessions", self.sessions),
            ("/config", self.configuration),
        ):  # fmt: skip
            web.page(path, handler)

    async def _status(self, ctx: Ctx) -> QMStatus:
        snapshot = self.backend.snapshot()  # on the loop: the transfer is not thread-safe
        status: QMStatus = await self.web.run(self.backend.status, snapshot, ctx.session.principal)
        return status

    def _admin(self, ctx: Ctx, what: str) -> None:
        if not ctx.session.principal.is_admin:
            raise HttpError(
                403, "MQ_ERROR_ACCESS_DENIED", f"{ctx.session.principal.name} may not see {what}."
            )

    async def overview(self, ctx: Ctx) -> Response:
        st = await self._status(ctx)
        warnings = []
        for o in st.outgoing:
            if o.state in ("retrying", "no route"):
                warnings.append(f"outgoing queue {o.format_name} is {o.state}"
                                + (f" (next hop {o.next_hop})" if o.next_hop else ""))  # fmt: skip
        for i in st.incoming:
            if i.last_reject_reason:
                warnings.append(f"incoming sequence from {i.source_qm} to {i.destination} rejects messages:"
                                f" {i.last_reject_reason}")  # fmt: skip
        usage = shutil.disk_usage(self.data_dir)
        if usage.free < usage.total * LOW_DISK_SHARE:
            warnings.append(
                f"the disk of {self.data_dir} is filling: {_size(usage.free)} free of {_size(usage.total)}"
            )
        role = self.web.sampler.role()
        warnings += role_warnings(role, time.time())
        dead = st.dead_letter
        return self.web.render(
            ctx.request, ctx.session, "overview.html", st=st, warnings=warnings, dead=dead,
            identity=self.identity, uptime=_duration(time.time() - self.backend.started),
            role=role, when=when_float,
            history=[[p.time, p.messages_in, p.messages_out, p.commits] for p in self.web.sampler.history],
            messages=sum(q.message_count for q in st.queues if q.kind != "journal"),
            disk_free=_size(usage.free), subqueues=subqueue_totals(
                {q.name: (q.message_count, q.total_bytes, q.oldest_arrived_time) for q in st.queues}),
        )  # fmt: skip

    async def queues(self, ctx: Ctx) -> Response:
        st = await self._status(ctx)
        kind = ctx.field("kind", "")
        # A subqueue (``queue;poison``) is listed under its queue, whatever the kind filter.
        parents = {q.name.lower() for q in st.queues if not kind or q.kind == kind}
        rows = sorted(
            (q for q in st.queues if {q.name.lower(), _parent(q.name)} & parents),
            key=lambda q: (_parent(q.name), ";" in q.name, q.name.lower()),
        )
        return self.web.render(ctx.request, ctx.session, "queues.html", st=st, rows=rows, kind=kind,
                               now=st.time, can=ctx.can, age=_age,
                               flows=self.web.sampler.tick.flows)  # fmt: skip

    async def queue(self, ctx: Ctx) -> Response:
        name = ctx.field("name")
        key = await self.web.need(ctx, name, "peek")
        after = number_field(ctx.field("after", "0"), "after")
        page = await self.web.run(self.backend.browse, name, after, PAGE_SIZE)
        template = "messages.html" if ctx.field("fragment") else "queue.html"
        return self.web.render(ctx.request, ctx.session, template, name=name, key=key, page=page,
                               can=ctx.can, when=when, is_dead=key in (DEADXACT, DEADLETTER))  # fmt: skip

    async def message(self, ctx: Ctx) -> Response:
        name = ctx.field("queue")
        key = await self.web.need(ctx, name, "peek")
        lookup_id = number_field(ctx.field("id"), "id")
        m = await self.find_message(name, lookup_id)
        form, preview = body_preview(m.body, ctx.field("form", "auto"))
        return self.web.render(ctx.request, ctx.session, "message.html", name=name, key=key, m=m,
                               form=form, preview=preview, can=ctx.can, when=when)  # fmt: skip

    async def body(self, ctx: Ctx) -> Response:
        name = ctx.field("queue")
        await self.web.need(ctx, name, "peek")
        lookup_id = number_field(ctx.field("id"), "id")
        m = await self.find_message(name, lookup_id)
        headers = {"Content-Disposition": f'attachment; filename="message-{lookup_id}.bin"',
                   "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}  # fmt: skip
        return Response(m.body, 200, headers=headers, media_type="application/octet-stream")

    async def find_message(self, name: str, lookup_id: int) -> Message:
        """The message, or a 404 page that names it and its queue."""
        try:
            m: Message = await asyncio.to_thread(self.backend.message, name, lookup_id)
        except MQError as exc:
            if exc.hresult == HResult.MQ_ERROR_MESSAGE_NOT_FOUND:
                raise HttpError(404, "Message not found", f"There is no message {lookup_id} in {name}"
                                " (it may have been received or deleted).") from None  # fmt: skip
            raise qm_error(exc) from None
        return m

    async def outgoing(self, ctx: Ctx) -> Response:
        st = await self._status(ctx)
        return self.web.render(ctx.request, ctx.session, "outgoing.html", st=st, can=ctx.can,
                               when=when_float, running=self.backend.hooks is not None)  # fmt: skip

    async def incoming(self, ctx: Ctx) -> Response:
        self._admin(ctx, "the incoming sequences")
        st = await self._status(ctx)
        return self.web.render(ctx.request, ctx.session, "incoming.html", st=st, when=when_float)

    async def dead_letters(self, ctx: Ctx) -> Response:
        letters, more = await self.web.run(self.backend.dead_letters, DEAD_LETTER_ROWS)
        visible = [d for d in letters if ctx.can(d.queue, "peek")]
        return self.web.render(ctx.request, ctx.session, "deadletters.html", letters=visible, more=more,
                               can=ctx.can, when=when, limit=DEAD_LETTER_ROWS)  # fmt: skip

    async def sessions(self, ctx: Ctx) -> Response:
        self._admin(ctx, "the MS-MQQB sessions")
        hooks = self.backend.hooks
        rows = hooks.sessions() if hooks is not None else []
        return self.web.render(ctx.request, ctx.session, "sessions.html", rows=rows)

    async def configuration(self, ctx: Ctx) -> Response:
        self._admin(ctx, "the configuration")
        return self.web.render(ctx.request, ctx.session, "config.html", rows=self.config_rows)


def role_warnings(role: Mapping[str, object], now: float) -> list[str]:
    """The overview's warning after a takeover: this node became active less than
    :data:`TAKEOVER_WARNING` ago in a term after the first (epoch above 1: another term,
    of this node or another, came before it)."""
    since, epoch = role.get("since"), role.get("epoch")
    if role.get("role") != "active" or not isinstance(since, float | int) or not isinstance(epoch, int):
        return []
    ago = now - since
    if epoch <= 1 or ago > TAKEOVER_WARNING:
        return []
    return [f"this node took over the queue manager {_duration(max(0.0, ago))} ago (lease epoch {epoch}):"
            " peers reconnect and resend, remote-read clients reconnect, transactions open on the"
            " former active were aborted"]  # fmt: skip


def config_rows(values: Mapping[str, object], sources: Mapping[str, str]) -> list[ConfigRow]:
    """The configuration page's rows; a value whose key names a secret is shown as ``***``
    and every value goes through :func:`~openmsmq.redact.redact`."""
    rows = []
    for key, value in values.items():
        text = "" if value is None else str(value)
        if any(word in key.rsplit(".", 1)[-1] for word in SECRET_NAMES if word != "token") and text:
            text = "***"
        rows.append(ConfigRow(key, redact(f"{key}={text}").split("=", 1)[1], sources.get(key, "default")))
    return rows


def number_field(text: str, what: str) -> int:
    if not text.isdigit() or len(text) > 20:
        raise HttpError(400, "Bad request", f"{what} must be a number, not {text[:40]!r}.")
    return int(text)


def when(seconds: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


def when_float(seconds: float | None) -> str:
    return "-" if not seconds else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _parent(name: str) -> str:
    """The case-folded queue a subqueue (``queue;poison``) belongs to; a queue's own name."""
    return name.split(";", 1)[0].lower()


def _age(now: float, arrived: int | None) -> str:
    return "-" if arrived is None else _duration(max(0.0, now - arrived))


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
