"""One queue manager with what makes it a node: its acknowledgments and, when it
transfers, its :class:`~openmsmq.transfer.engine.Transfer`.

``openmsmq serve`` and the in-process client open a queue manager here, so both raise the
same acknowledgments: administration acknowledgments when messages leave their queue
(MS-MQQB 3.1.7.2), and with a transfer the FinalAcks to the sender recorded with each
incoming sequence (MS-MQQB 3.1.7.17).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openmsmq.qm.manager import QueueManager
from openmsmq.transfer.ack_admin import AcknowledgmentListener, attach_acknowledgments

if TYPE_CHECKING:
    from openmsmq.transfer.engine import Transfer
    from openmsmq.transfer.state import TransferConfig

__all__ = ["Node", "open_node"]


@dataclass(frozen=True, eq=False)
class Node:
    """A queue manager, its acknowledgment listener and its transfer (None: a queue
    manager that does not transfer itself, as the in-process client's: its outgoing
    queues wait for ``openmsmq serve``)."""

    qm: QueueManager
    acknowledgments: AcknowledgmentListener
    transfer: Transfer | None = None


def open_node(
    data_dir: str | Path,
    *,
    transfer: TransferConfig | None = None,
    now: float = 0.0,
    **qm_options: Any,
) -> Node:
    """Open the queue manager over ``data_dir`` (``qm_options``: the keywords of
    :class:`QueueManager`) with its acknowledgments attached; with ``transfer``, also its
    :class:`Transfer` (``now``: the driver's clock), whose sessions then address the
    FinalAcks. The queue manager is closed again if the rest cannot be built."""
    qm = QueueManager(data_dir, **qm_options)
    try:
        engine = None
        if transfer is not None:
            # Imported here: the in-process client (every CLI command on a data directory)
            # opens queue managers that do not transfer, and need not load the MS-MQQB stack.
            from openmsmq.transfer.engine import Transfer

            engine = Transfer(qm, transfer, now, metrics=qm.metrics)
        session_of = None if engine is None else engine.ack_session_for
        listener = attach_acknowledgments(qm, session_of=session_of)
    except BaseException:
        qm.close()
        raise
    return Node(qm, listener, engine)
