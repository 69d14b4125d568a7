"""Status records of a :class:`~openmsmq.transfer.engine.Transfer` for ``openmsmq status``,
the console and the remote status call: built from the objects that own the state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from openmsmq.protocol.incoming import IncomingSequences
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.sequences import IncomingUpkeep
from openmsmq.transfer.state import IncomingStatus, OutgoingStatus, OutgoingTransfer
from openmsmq.wire.constants import message_class_name

__all__ = ["incoming_statuses", "outgoing_statuses"]


def outgoing_statuses(
    outgoing: Iterable[OutgoingTransfer],
    connections: Connections,
    retry_at: Mapping[str, float],
    rejections: Mapping[int, Counter[int]],
    unrouted: Iterable[str],
) -> list[OutgoingStatus]:
    """Per outgoing queue: waiting, in flight, last acknowledged / unacknowledged, the
    link (``retry_at``: when the connector retries each next hop), negative FinalAcks by
    class; then the queues not taken up for want of a route (``unrouted``: PRIVATE=<guid>
    names)."""
    out = []
    for t in outgoing:
        unacked = t.seq.unacked
        conn = connections.open_to(t.next_hop) if t.connected else None
        out.append(
            OutgoingStatus(
                t.format_name,
                t.next_hop,
                t.waiting,
                len(t.messages),
                t.last_acked,
                (unacked[-1].tx_sequence_id, unacked[-1].tx_sequence_number) if unacked else None,
                t.connected,
                retry_at.get(t.next_hop),
                window=None if conn is None else conn.session.send_window,
                round_trip=None if conn is None else conn.session.round_trip,
                rejected=tuple(
                    sorted((message_class_name(c), n) for c, n in rejections.get(t.queue_id, {}).items())
                ),
                suspended=t.suspended,
            )
        )
    out += [OutgoingStatus(name, "", 0, 0, None, None, False, None, routed=False) for name in unrouted]
    return out


def incoming_statuses(incoming: IncomingSequences, upkeep: IncomingUpkeep) -> list[IncomingStatus]:
    """Per incoming sequence: IncomingTxSequenceID / Number (durable), RejectCount and the
    message it last rejected (``upkeep`` watches rejections)."""
    out = []
    for s in incoming:
        rec = upkeep.last_rejected(s.key)
        last = None if rec is None else (
            rec.reason.name, rec.tx_sequence_id, rec.tx_sequence_number, rec.previous_tx_sequence_number
        )  # fmt: skip
        out.append(
            IncomingStatus(s.key.source_qm, s.key.destination, *s.durable_position, s.reject_count, last)
        )
    return out
