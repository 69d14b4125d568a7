"""The application client library: sync API here, async in :mod:`openmsmq.client.aio`.

::

    import openmsmq

    with openmsmq.connect("./data") as conn:
        q = conn.open_queue("private$\\orders")
        with conn.transaction() as tx:
            q.send(b"hello", label="greeting", tx=tx)

The API runs over a :class:`~openmsmq.client.transport.Transport`: in-process
(:mod:`openmsmq.client.inproc`) for a data directory, remote read for ``grpc://``.
See ``docs/client.md``.

Names are imported from their modules on first use (PEP 562): importing one module of
this package (``openmsmq.client.types`` for the Spark source, say) does not load the
connection API and everything under it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openmsmq.lazy import lazy_exports

if TYPE_CHECKING:
    from openmsmq.client.connection import (
        SINGLE_MESSAGE,
        Connection,
        Cursor,
        Queue,
        Seek,
        Transaction,
        connect,
        open_transport,
        outgoing,
    )
    from openmsmq.client.message import Message, PendingMessage, class_name
    from openmsmq.client.transport import Transport
    from openmsmq.client.types import (
        INFINITE,
        Access,
        Ack,
        AckRequest,
        Delivery,
        OutgoingMessage,
        QueueInfo,
        ReadAction,
        SendReceipt,
        ShareMode,
        TransactionId,
    )

_SUBMODULE_NAMES: dict[str, tuple[str, ...]] = {
    "connection": (
        "SINGLE_MESSAGE",
        "Connection",
        "Cursor",
        "Queue",
        "Seek",
        "Transaction",
        "connect",
        "open_transport",
        "outgoing",
    ),
    "message": ("Message", "PendingMessage", "class_name"),
    "transport": ("Transport",),
    "types": (
        "INFINITE",
        "Access",
        "Ack",
        "AckRequest",
        "Delivery",
        "OutgoingMessage",
        "QueueInfo",
        "ReadAction",
        "SendReceipt",
        "ShareMode",
        "TransactionId",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULE_NAMES)


__all__ = [
    "INFINITE",
    "SINGLE_MESSAGE",
    "Access",
    "Ack",
    "AckRequest",
    "Connection",
    "Cursor",
    "Delivery",
    "Message",
    "OutgoingMessage",
    "PendingMessage",
    "Queue",
    "QueueInfo",
    "ReadAction",
    "Seek",
    "SendReceipt",
    "ShareMode",
    "Transaction",
    "TransactionId",
    "Transport",
    "class_name",
    "connect",
    "open_transport",
    "outgoing",
]
