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
"""

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
