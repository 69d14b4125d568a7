"""The console's actions (POST): create, purge, delete and change queues; receive, delete
and move messages; requeue and purge dead letters; suspend and resume outgoing queues.

Each checks the session's permission on the queue it touches (as the remote-read service
does: RECEIVE to receive, delete a message or purge; ADMIN to create, delete, change a
queue, move a message between a queue and its subqueues or suspend an outgoing one;
RECEIVE on the dead-letter queue and SEND on the destination to requeue) before it calls
the QM. Purging and deleting a queue ask first (a GET of the same path shows what would
go and a confirm button).
"""

from __future__ import annotations

import logging
import urllib.parse

from starlette.responses import Response

from openmsmq.client import Message, QueueInfo
from openmsmq.client.dead_letters import DEAD_LETTER_QUEUES
from openmsmq.console.app import ConsoleApp, Ctx, HttpError
from openmsmq.console.backend import body_preview
from openmsmq.console.pages import number_field, when
from openmsmq.qm.names import DEADLETTER, DEADXACT
from openmsmq.remote.auth import Permission

__all__ = ["Actions"]

log = logging.getLogger("openmsmq.console")

#: Longest move target accepted (a format name of a subqueue fits).
MAX_MOVE_TARGET = 400


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


class Actions:
    """Registers the actions on a :class:`ConsoleApp`."""

    def __init__(self, web: ConsoleApp) -> None:
        self.web = web
        self.backend = web.backend
        for path, handler in (
            ("/queues/create", self.create), ("/queue/purge", self.purge),
            ("/queue/delete", self.delete_queue),
            ("/queue/properties", self.properties), ("/queue/receive", self.receive),
            ("/message/delete", self.delete_message), ("/message/receive", self.receive_message),
            ("/message/move", self.move_message),
            ("/deadletters/requeue", self.requeue), ("/deadletters/purge", self.purge_dead_letters),
            ("/outgoing/suspend", self.suspend), ("/outgoing/resume", self.resume),
        ):  # fmt: skip
            web.action(path, handler)
        web.page("/queue/purge", self.confirm_purge)
        web.page("/queue/delete", self.confirm_delete)
        web.page("/deadletters/purge", self.confirm_purge_dead_letters)

    def _log(self, ctx: Ctx, what: str) -> None:
        log.info("console: %s %s", ctx.session.principal.name, what)

    # ---- queues ----------------------------------------------------------------------------

    async def create(self, ctx: Ctx) -> Response:
        path = ctx.field("path").strip()
        if not path or len(path) > 380:
            raise HttpError(
                400,
                "Bad request",
                "A queue path such as private$\\orders is needed (at most 380 characters).",
            )
        key = path.lower() if "\\" in path else f"private$\\{path.lower()}"
        if not ctx.session.principal.allows(key, Permission.ADMIN):
            raise HttpError(
                403, "MQ_ERROR_ACCESS_DENIED", f"{ctx.session.principal.name} may not create {path}."
            )
        quota = _quota(ctx.field("quota_kb"))
        info = await self.web.run(self.backend.create_queue, path, ctx.field("transactional") == "on",
                                  ctx.field("label"), quota)  # fmt: skip
        self._log(ctx, f"created {info.path}")
        return await self.web.done(ctx, f"Created {info.path}.", f"/queue?name={_q(info.path)}")

    async def confirm_purge(self, ctx: Ctx) -> Response:
        name = ctx.field("name")
        await self.web.need(ctx, name, "receive")
        info = await self.web.run(self.backend.info, name)
        return self.web.render(ctx.request, ctx.session, "confirm.html", action="/queue/purge",
                               title=f"Purge {info.path}?", field=("name", name), button="Purge",
                               text=f"{info.message_count} message(s) will be deleted from {info.path}.",
                               back=f"/queue?name={_q(name)}")  # fmt: skip

    async def purge(self, ctx: Ctx) -> Response:
        name = ctx.field("name")
        await self.web.need(ctx, name, "receive")
        n = await self.web.run(self.backend.purge, name)
        self._log(ctx, f"purged {n} message(s) from {name}")
        return await self.web.done(ctx, f"Purged {n} message(s) from {name}.", f"/queue?name={_q(name)}")

    async def confirm_delete(self, ctx: Ctx) -> Response:
        name = ctx.field("name")
        await self.web.need(ctx, name, "admin")
        info = await self.web.run(self.backend.info, name)
        return self.web.render(ctx.request, ctx.session, "confirm.html", action="/queue/delete",
                               title=f"Delete {info.path}?", field=("name", name), button="Delete queue",
                               text=f"The queue and its {info.message_count} message(s) will be deleted.",
                               back=f"/queue?name={_q(name)}")  # fmt: skip

    async def delete_queue(self, ctx: Ctx) -> Response:
        name = ctx.field("name")
        await self.web.need(ctx, name, "admin")
        await self.web.run(self.backend.delete_queue, name)
        self._log(ctx, f"deleted queue {name}")
        return await self.web.done(ctx, f"Deleted {name}.", "/queues")

    async def properties(self, ctx: Ctx) -> Response:
        name = ctx.field("name")
        await self.web.need(ctx, name, "admin")
        label = ctx.field("label")
        await self.web.run(self.backend.set_properties, name, label, _quota(ctx.field("quota_kb")),
                           ctx.field("journal") == "on")  # fmt: skip
        self._log(ctx, f"changed the properties of {name}")
        return await self.web.done(ctx, f"Saved the properties of {name}.", f"/queue?name={_q(name)}")

    # ---- messages --------------------------------------------------------------------------

    async def receive(self, ctx: Ctx) -> Response:
        """Receive the first message of a queue and show it."""
        name = ctx.field("name")
        key = await self.web.need(ctx, name, "receive")
        m = await self.web.run(self.backend.receive, name, None)
        self._log(ctx, f"received message {m.lookup_id} from {name}")
        await self.web.sampler.refresh()
        return self._received(ctx, name, key, m)

    async def receive_message(self, ctx: Ctx) -> Response:
        name = ctx.field("queue")
        key = await self.web.need(ctx, name, "receive")
        m = await self.web.run(self.backend.receive, name, number_field(ctx.field("id"), "id"))
        self._log(ctx, f"received message {m.lookup_id} from {name}")
        await self.web.sampler.refresh()
        return self._received(ctx, name, key, m)

    def _received(self, ctx: Ctx, name: str, key: str, m: Message) -> Response:
        form, preview = body_preview(m.body, "auto")
        return self.web.render(ctx.request, ctx.session, "message.html", name=name, key=key, m=m, form=form,
                               preview=preview, can=ctx.can, when=when, received=True)  # fmt: skip

    async def delete_message(self, ctx: Ctx) -> Response:
        name = ctx.field("queue")
        await self.web.need(ctx, name, "receive")
        lookup_id = number_field(ctx.field("id"), "id")
        await self.web.run(self.backend.receive, name, lookup_id)
        self._log(ctx, f"deleted message {lookup_id} from {name}")
        return await self.web.done(ctx, f"Deleted message {lookup_id}.", f"/queue?name={_q(name)}")

    async def move_message(self, ctx: Ctx) -> Response:
        """Move one message to a subqueue of its queue, or from a subqueue back to its queue
        (the QM checks the target: MQ_ERROR_ILLEGAL_QUEUE_PATHNAME for a bad one)."""
        name = ctx.field("queue")
        await self.web.need(ctx, name, "admin")
        lookup_id = number_field(ctx.field("id"), "id")
        to = ctx.field("to").strip()
        if not to or len(to) > MAX_MOVE_TARGET:
            raise HttpError(400, "Bad request", "Name where the message goes: a subqueue such as poison, or"
                            f" the queue itself (at most {MAX_MOVE_TARGET} characters).")  # fmt: skip
        new = await self.web.run(self.backend.move, name, lookup_id, to)
        self._log(ctx, f"moved message {lookup_id} from {name} to {to} (now {new})")
        await self.web.sampler.refresh()
        return await self.web.done(
            ctx,
            f"Moved message {lookup_id} from {name} to {to}: it is message {new} there.",
            f"/queue?name={_q(name)}",
        )

    # ---- dead letters ----------------------------------------------------------------------

    async def requeue(self, ctx: Ctx) -> Response:
        ids = [number_field(v, "id") for v in ctx.form.get("id", [])][:1000]
        if not ids:
            raise HttpError(400, "Bad request", "Choose the dead letters to requeue.")
        for dlq in (DEADXACT, DEADLETTER):
            await self.web.need(ctx, dlq, "receive")
        letters = await self.web.run(self.backend.find_dead_letters, ids)
        for letter in letters:
            if letter.destination:
                await self.web.need(ctx, letter.destination, "send")
        results = await self.web.run(self.backend.requeue, letters)
        failed = [r for r in results if not r.ok]
        moved = len(results) - len(failed)
        self._log(ctx, f"requeued {moved} dead letter(s)")
        for r in failed:
            ctx.session.flash.append(
                ("error", f"Message {r.letter.message.lookup_id} not requeued: {r.error}")
            )
        return await self.web.done(ctx, f"Requeued {moved} dead letter(s).", "/deadletters")

    async def confirm_purge_dead_letters(self, ctx: Ctx) -> Response:
        for dlq in DEAD_LETTER_QUEUES.values():
            await self.web.need(ctx, dlq, "receive")
        return self.web.render(ctx.request, ctx.session, "confirm.html", action="/deadletters/purge",
                               title="Purge the dead-letter queues?", field=("all", "1"), button="Purge",
                               text="Every dead letter (transactional and not) will be deleted.",
                               back="/deadletters")  # fmt: skip

    async def purge_dead_letters(self, ctx: Ctx) -> Response:
        n = 0
        for dlq in DEAD_LETTER_QUEUES.values():
            await self.web.need(ctx, dlq, "receive")
            n += await self.web.run(self.backend.purge, dlq)
        self._log(ctx, f"purged {n} dead letter(s)")
        return await self.web.done(ctx, f"Purged {n} dead letter(s).", "/deadletters")

    # ---- outgoing queues -------------------------------------------------------------------

    async def _outgoing(self, ctx: Ctx) -> str:
        name = ctx.field("name")
        await self.web.need(ctx, name, "admin")
        if self.backend.hooks is None:
            raise HttpError(409, "MQ_ERROR_SERVICE_NOT_AVAILABLE", "No MS-MQQB transfer runs in this QM.")
        info: QueueInfo = await self.web.run(self.backend.info, name)
        if info.kind != "outgoing":
            raise HttpError(400, "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME", f"{name} is not an outgoing queue.")
        return info.path

    async def suspend(self, ctx: Ctx) -> Response:
        name = await self._outgoing(ctx)
        assert self.backend.hooks is not None
        self.backend.hooks.suspend(name)  # on the loop, where the transfer lives
        self._log(ctx, f"suspended outgoing queue {name}")
        return await self.web.done(ctx, f"Suspended {name}.", "/outgoing")

    async def resume(self, ctx: Ctx) -> Response:
        name = await self._outgoing(ctx)
        assert self.backend.hooks is not None
        self.backend.hooks.resume(name)
        self._log(ctx, f"resumed outgoing queue {name}")
        return await self.web.done(ctx, f"Resumed {name}.", "/outgoing")


def _quota(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or len(text) > 10:
        raise HttpError(400, "Bad request", f"A quota is a number of KB, not {text[:40]!r}.")
    return int(text)
