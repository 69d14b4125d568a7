"""The console's web application: sign-in, the guard of every page and action, rendering.

Pages are rendered on the server (Jinja2, autoescaped); the only script is
``static/console.js``, which draws the charts and applies the live updates of
``/events`` (server-sent events). Queue and message names travel in query parameters
(``/queue?name=private%24%5Corders``), so any name MSMQ allows reaches the QM unchanged.

Every page needs a session (:mod:`openmsmq.console.sessions`); without one a page
redirects to ``/login``. Every POST also needs the session's CSRF token in its form
(field ``csrf``) and is refused with 403 without it, before anything is read. What a
page shows and which buttons it offers follow the token's permissions, and every action
checks them again on the server: a read-only token that posts an action directly gets a
403 page naming the missing permission. An action the QM refuses shows the QM's error by
its HRESULT name (e.g. ``MQ_ERROR_QUEUE_EXISTS``) and changes nothing.
"""

from __future__ import annotations

import asyncio
import html
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from openmsmq.console.backend import Backend
from openmsmq.console.live import Sampler
from openmsmq.console.sessions import COOKIE, LOGIN_COOKIE, ConsoleSession, Sessions, same_secret
from openmsmq.errors import HResult, MQError, OpenMSMQError, quoted
from openmsmq.redact import redact
from openmsmq.remote.auth import Permission

__all__ = ["MAX_FORM_BYTES", "ConsoleApp", "Ctx", "Handler", "HttpError", "qm_error"]

log = logging.getLogger("openmsmq.console")

HERE = Path(__file__).parent
#: Largest form body accepted (a queue label, a few ids): more is refused with 413 unread.
MAX_FORM_BYTES = 64 * 1024

#: Headers of every page: no framing, no foreign scripts or styles, nothing cached.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none';"
    " form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}

PERMS = {
    "peek": Permission.PEEK,
    "receive": Permission.RECEIVE,
    "send": Permission.SEND,
    "admin": Permission.ADMIN,
}


class Ctx:
    """One request with its session and parsed form."""

    def __init__(self, request: Request, session: ConsoleSession, form: Mapping[str, list[str]]) -> None:
        self.request = request
        self.session = session
        self.form = form

    def field(self, name: str, default: str = "") -> str:
        """A form field (first value) or query parameter."""
        values = self.form.get(name)
        if values:
            return values[0]
        return self.request.query_params.get(name, default)

    def can(self, queue: str, perm: str) -> bool:
        """Whether the session's token has ``perm`` on canonical queue name ``queue``."""
        return self.session.principal.allows(queue, PERMS[perm])


Handler = Callable[[Ctx], Awaitable[Response]]


class HttpError(Exception):
    """Ends a request with an error page."""

    def __init__(self, status: int, title: str, text: str) -> None:
        super().__init__(text)
        self.status, self.title, self.text = status, title, text


class ConsoleApp:
    """Routing, guards and rendering; the pages themselves are :mod:`openmsmq.console.pages`."""

    def __init__(self, backend: Backend, sampler: Sampler, sessions: Sessions, *, secure: bool) -> None:
        self.backend = backend
        self.sampler = sampler
        self.sessions = sessions
        self.secure = secure
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters["q"] = lambda v: urllib.parse.quote(str(v), safe="")
        self.routes: list[Route | Mount] = [
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.wrap(self.logout, post=True), methods=["POST"]),
            Route("/events", self.events, methods=["GET"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
        self.app = Starlette(routes=self.routes)

    # ---- registration ----------------------------------------------------------------------

    def page(self, path: str, handler: Handler) -> None:
        """A GET page behind the session guard."""
        self.app.router.routes.insert(0, Route(path, self.wrap(handler, post=False), methods=["GET"]))

    def action(self, path: str, handler: Handler) -> None:
        """A POST action behind the session and CSRF guards."""
        self.app.router.routes.insert(0, Route(path, self.wrap(handler, post=True), methods=["POST"]))

    def wrap(self, handler: Handler, *, post: bool) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            session = self.sessions.get(request.cookies.get(COOKIE))
            if session is None:
                if self.sessions.open_access:
                    session = self.sessions.login(None)
                    assert session is not None
                    return self._with_cookie(RedirectResponse(str(request.url.path), 303), session)
                target = "/login?next=" + urllib.parse.quote(_local(request), safe="")
                return RedirectResponse(target, 303)
            form: dict[str, list[str]] = {}
            try:
                if post:
                    form = await _read_form(request)
                    if not same_secret(form.get("csrf", [""])[0], session.csrf):
                        log.warning("console: a POST to %s without its CSRF token refused", request.url.path)
                        raise HttpError(
                            403, "Refused", "The form carried no valid CSRF token: nothing was done."
                        )
                return await handler(Ctx(request, session, form))
            except HttpError as exc:
                return self.error(request, session, exc.status, exc.title, exc.text)

        return endpoint

    # ---- rendering -------------------------------------------------------------------------

    def render(self, request: Request, session: ConsoleSession | None, template: str, status: int = 200,
               **values: Any) -> HTMLResponse:  # fmt: skip
        flash, session_flash = [], session.flash if session is not None else []
        if session is not None:
            flash, session.flash = session_flash, []
        body = self.env.get_template(template).render(
            session=session, csrf=session.csrf if session else "", flash=flash,
            principal=session.principal if session else None, path=request.url.path,
            open_access=self.sessions.open_access, **values,
        )  # fmt: skip
        return HTMLResponse(body, status, headers=SECURITY_HEADERS)

    def error(self, request: Request, session: ConsoleSession | None, status: int, title: str, text: str
              ) -> HTMLResponse:  # fmt: skip
        back = request.headers.get("referer", "")
        return self.render(request, session, "error.html", status, title=title, text=text,
                           back=back if back.startswith(str(request.base_url)) else "/")  # fmt: skip

    def _with_cookie(self, response: Response, session: ConsoleSession) -> Response:
        response.set_cookie(
            COOKIE, session.sid, httponly=True, secure=self.secure, samesite="strict", path="/"
        )
        return response

    # ---- sign-in ---------------------------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        return self._login_form(request, "", 200)

    def _login_form(self, request: Request, problem: str, status: int) -> Response:
        import secrets

        nonce = secrets.token_urlsafe(24)
        nxt = request.query_params.get("next", "/")
        response = self.render(request, None, "login.html", status, problem=problem, nonce=nonce,
                               next=nxt if _is_local_path(nxt) else "/")  # fmt: skip
        response.set_cookie(LOGIN_COOKIE, nonce, httponly=True, secure=self.secure, samesite="strict",
                            path="/login")  # fmt: skip
        return response

    async def login(self, request: Request) -> Response:
        try:
            form = await _read_form(request)
        except HttpError as exc:
            return self.error(request, None, exc.status, exc.title, exc.text)
        if not same_secret(form.get("nonce", [""])[0], request.cookies.get(LOGIN_COOKIE)):
            return self._login_form(request, "The sign-in form expired: sign in again.", 403)
        session = self.sessions.login(form.get("token", [""])[0])
        if session is None:
            log.warning(
                "console: sign-in with an unknown token from %s",
                request.client.host if request.client else "?",
            )
            return self._login_form(request, "Unknown token.", 401)
        log.info("console: %s signed in", session.principal.name)
        nxt = form.get("next", ["/"])[0]
        response = RedirectResponse(nxt if _is_local_path(nxt) else "/", 303)
        response.delete_cookie(LOGIN_COOKIE, path="/login")
        return self._with_cookie(response, session)

    async def logout(self, ctx: Ctx) -> Response:
        self.sessions.logout(ctx.session.sid)
        response = RedirectResponse("/login", 303)
        response.delete_cookie(COOKIE, path="/")
        return response

    # ---- live updates ----------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        session = self.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            return Response("sign in first", 401, headers=SECURITY_HEADERS)
        principal = session.principal

        def visible(name: str) -> bool:
            return bool(principal.permissions(name))

        async def stream() -> Any:
            async for chunk in self.sampler.events(visible):
                if await request.is_disconnected():
                    return
                yield chunk

        headers = {**SECURITY_HEADERS, "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    # ---- helpers for pages and actions -----------------------------------------------------

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking QM call in a worker thread; a QM error becomes an error page
        naming its HRESULT (404 for what does not exist)."""
        try:
            return await asyncio.to_thread(fn, *args)
        except MQError as exc:
            raise qm_error(exc) from None
        except OpenMSMQError as exc:
            raise HttpError(409, type(exc).__name__, redact(str(exc))) from None

    async def need(self, ctx: Ctx, name: str, perm: str) -> str:
        """The canonical name of queue ``name``, after checking the session may ``perm``
        on it (404 when it does not exist; 403 naming the permission otherwise)."""
        try:
            key: str = await asyncio.to_thread(self.backend.queue_key, name)
        except MQError as exc:
            if exc.hresult in _NO_QUEUE:
                raise HttpError(
                    404, "Queue not found", f"There is no queue {quoted(name)} on this queue manager."
                ) from None
            raise qm_error(exc) from None
        if not ctx.can(key, perm):
            who = ctx.session.principal.name
            log.warning("console: %s may not %s %s: refused", who, perm, key)
            raise HttpError(403, "MQ_ERROR_ACCESS_DENIED", f"{who} may not {perm} on {name}.")
        return key

    async def done(self, ctx: Ctx, text: str, to: str) -> Response:
        """After an action: the live values read again, a message for the next page, and a
        redirect to ``to``."""
        await self.sampler.refresh()
        ctx.session.flash.append(("ok", text))
        return RedirectResponse(to, 303)


#: What a queue name that names no queue fails with.
_NO_QUEUE = (HResult.MQ_ERROR_QUEUE_NOT_FOUND, HResult.MQ_ERROR_ILLEGAL_FORMATNAME,
             HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME)  # fmt: skip


def qm_error(exc: MQError) -> HttpError:
    """The error page of a QM error: its HRESULT name as the title, 404 for missing things."""
    name = exc.hresult.name if isinstance(exc.hresult, HResult) else f"0x{int(exc.hresult):08X}"
    missing = exc.hresult in (HResult.MQ_ERROR_QUEUE_NOT_FOUND, HResult.MQ_ERROR_MESSAGE_NOT_FOUND,
                              HResult.MQ_ERROR_ILLEGAL_FORMATNAME)  # fmt: skip
    status = 404 if missing else 403 if exc.hresult == HResult.MQ_ERROR_ACCESS_DENIED else 409
    return HttpError(status, name, redact(exc.message or str(exc)))


async def _read_form(request: Request) -> dict[str, list[str]]:
    """A URL-encoded form body, refused with 413 beyond :data:`MAX_FORM_BYTES` (before it
    is read in full) and with 415 in any other encoding."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise HttpError(415, "Refused", "Actions take a URL-encoded form.")
    size = request.headers.get("content-length")
    if size is not None and (not size.isdigit() or int(size) > MAX_FORM_BYTES):
        raise HttpError(413, "Refused", f"A form has at most {MAX_FORM_BYTES} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise HttpError(413, "Refused", f"A form has at most {MAX_FORM_BYTES} bytes.")
    try:
        return urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=1000)
    except (UnicodeDecodeError, ValueError):
        raise HttpError(400, "Refused", "The form could not be read.") from None


def _local(request: Request) -> str:
    query = request.url.query
    return request.url.path + ("?" + query if query else "")


def _is_local_path(target: str) -> bool:
    """Only a path on this console may follow a sign-in (no open redirect)."""
    return target.startswith("/") and not target.startswith("//") and "\\" not in target


def escape(text: str) -> str:
    """HTML-escaped text (for the few strings built outside the templates)."""
    return html.escape(text)
