"""Names and messages as System.Messaging users give them: the ``FormatName:`` prefix, a
"did you mean" for a path name without ``private$``, and the search behind receive by
MessageId and by CorrelationId.

System.Messaging's ``MessageQueue`` takes a format name as ``FormatName:DIRECT=...``; the
prefix only says "what follows is a format name" and is not part of it (MS-MQMQ 2.1 has no
such prefix), so the client drops it before a name reaches the queue manager.

ReceiveById / ReceiveByCorrelationId have no request of their own in MSMQ's protocols
(MS-MQRR reads by position, cursor or LookupIdentifier): System.Messaging browses the
queue with a cursor, finds the message, then receives it by its LookupIdentifier. The
same happens here over any transport: :func:`find_message` browses a page at a time, and
the caller receives by LookupIdentifier, browsing again if another reader took the
message meanwhile.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from openmsmq.client.message import Message
from openmsmq.client.transport import Transport
from openmsmq.client.types import Access, ReadAction, ShareMode
from openmsmq.errors import HResult, MQError, quoted
from openmsmq.wire.ids import ObjectId

__all__ = [
    "BROWSE_PAGE",
    "TAKE_ATTEMPTS",
    "by_correlation_id",
    "by_message_id",
    "did_you_mean",
    "find_message",
    "hinting",
    "object_id",
    "open_handle",
    "queue_name",
    "take_message",
    "with_hint",
]

#: Messages one browse call of :func:`find_message` peeks.
BROWSE_PAGE = 256
#: How often a receive by id browses again when other readers keep taking the message it
#: found before it receives it: then it is gone, and the error says so.
TAKE_ATTEMPTS = 8

_PREFIX = "formatname:"
_ID_TEXT = re.compile(r"^\{?([0-9a-fA-F-]{32,36})\}?\\(\d{1,10})$")


def queue_name(name: str) -> str:
    """``name`` without System.Messaging's ``FormatName:`` prefix (any letter case)."""
    stripped = name.lstrip()
    if stripped[: len(_PREFIX)].casefold() == _PREFIX:
        return stripped[len(_PREFIX) :]
    return name


def did_you_mean(name: str) -> str | None:
    """The private queue path name a user probably meant by ``name``: ``private$\\orders``
    for a bare ``orders`` (a path name needs a computer or ``private$``) and for
    ``private\\orders`` (``$`` missing). None when ``name`` is not one of those."""
    text = name.strip()
    if not text or "=" in text or ";" in text:
        return None
    parts = text.split("\\")
    if len(parts) == 1:
        return f"private$\\{text}"
    if len(parts) == 2 and parts[0].casefold() == "private":
        return f"private$\\{parts[1]}"
    if len(parts) == 3 and parts[1].casefold() == "private":
        return f"{parts[0]}\\private$\\{parts[2]}"
    return None


def with_hint(exc: MQError, name: str) -> MQError:
    """``exc`` (a bad path name, or no such queue) with "did you mean" added when ``name``
    looks like a private queue's path name written without ``private$``; else ``exc``."""
    hint = did_you_mean(name)
    codes = (HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, HResult.MQ_ERROR_QUEUE_NOT_FOUND)
    if hint is None or exc.hresult not in codes:
        return exc
    return MQError(exc.hresult, f"{exc.message}; did you mean {quoted(hint)}?")


@contextmanager
def hinting(name: str) -> Iterator[None]:
    """Raise an error about queue ``name`` with :func:`with_hint`'s suggestion added."""
    try:
        yield
    except MQError as exc:
        hinted = with_hint(exc, name)
        if hinted is exc:
            raise
        raise hinted from None


def object_id(value: str | bytes, what: str) -> bytes:
    """The 20-byte OBJECTID (MS-MQMQ 2.2.8) of a MessageId or CorrelationId given as text
    (``{GUID}\\uniquifier``, what :attr:`Message.message_id` shows; braces optional) or as
    its 20 bytes. Anything else: MQ_ERROR_INVALID_PARAMETER naming it."""
    if isinstance(value, bytes | bytearray):
        if len(value) != ObjectId.SIZE:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"{what} of {len(value)} bytes (20 expected)")
        return bytes(value)
    match = _ID_TEXT.match(value.strip())
    if match is not None:
        try:
            return ObjectId(uuid.UUID(match.group(1)), int(match.group(2))).encode()
        except ValueError:
            pass
    raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"{what} {quoted(value)}: expected {{GUID}}\\number")


def by_message_id(message_id: str | bytes) -> Callable[[Message], bool]:
    """A test for the message whose Identifier is ``message_id``."""
    wanted = object_id(message_id, "MessageId")
    return lambda m: object_id(m.message_id, "MessageId") == wanted


def by_correlation_id(correlation_id: str | bytes) -> Callable[[Message], bool]:
    """A test for the first message whose CorrelationId is ``correlation_id``."""
    wanted = object_id(correlation_id, "CorrelationId")
    return lambda m: m.correlation_id == wanted


def find_message(transport: Transport, handle: int, wanted: Callable[[Message], bool]) -> Message | None:
    """The first message of the handle's queue (in queue order) for which ``wanted`` is
    true, browsed with a cursor of its own, a page at a time; None when there is none."""
    cursor = transport.create_cursor(handle)
    try:
        action = ReadAction.PEEK_CURRENT
        while True:
            try:
                if action == ReadAction.PEEK_NEXT:  # step past the page just read
                    transport.read(handle, ReadAction.PEEK_NEXT, cursor=cursor, timeout=0.0)
                page = transport.read(
                    handle, ReadAction.PEEK_CURRENT, cursor=cursor, timeout=0.0, max_count=BROWSE_PAGE
                )
            except MQError as exc:
                if exc.hresult == HResult.MQ_ERROR_IO_TIMEOUT:
                    return None
                raise
            for m in page:
                if wanted(m):
                    return m
            action = ReadAction.PEEK_NEXT
    finally:
        transport.close_cursor(handle, cursor)


def take_message(
    transport: Transport,
    handle: int,
    wanted: Callable[[Message], bool],
    receive: Callable[[int], Message] | None,
    what: str,
) -> Message:
    """The first message ``wanted`` selects, peeked (``receive`` None) or received by its
    LookupIdentifier with ``receive``. None there: MQ_ERROR_MESSAGE_NOT_FOUND naming ``what``."""
    for _ in range(TAKE_ATTEMPTS):
        found = find_message(transport, handle, wanted)
        if found is None:
            break
        if receive is None:
            return found
        try:
            return receive(found.lookup_id)
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_MESSAGE_NOT_FOUND:
                raise
            # another reader received it first: browse again
    raise MQError(HResult.MQ_ERROR_MESSAGE_NOT_FOUND, f"no message with {what} in the queue")


def open_handle(
    transport: Transport, name: str, access: Access | None, share: ShareMode
) -> tuple[str, int, Access]:
    """Open ``name`` (``FormatName:`` dropped) and return it with its handle and access.

    ``access`` None is the default: send and receive a queue of this QM, and only send a
    queue of another QM (a remote format name, which MSMQ opens for sending without a
    connection to it; reading it needs the remote-read transport to that QM)."""
    name = queue_name(name)
    with hinting(name):
        if access is not None:
            return name, transport.open_queue(name, access, share), Access(access)
        both = Access.SEND | Access.RECEIVE
        try:
            return name, transport.open_queue(name, both, share), both
        except MQError as exc:
            # A queue of another QM cannot be read here: the service says so, or (when it
            # has no outgoing queue for it yet) that it has no such queue to read; opened
            # for sending, a local queue that does not exist gives the same error again.
            if exc.hresult not in (
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                HResult.MQ_ERROR_QUEUE_NOT_FOUND,
            ):
                raise
        return name, transport.open_queue(name, Access.SEND, share), Access.SEND
