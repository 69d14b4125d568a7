"""Status of a queue manager (``openmsmq status``): queues, outgoing and incoming sequences.

:func:`collect_status` reads what the store knows (queue depths in one aggregate, the
persisted OutgoingTxSequenceID / next OutgoingTxSequenceNumber of each outgoing queue,
the persisted incoming sequences, MS-MQQB 3.1.1.3.1 and MS-MQDMPR 3.1.1.5) and, when the
queue manager runs, merges in the live transfer state of
:class:`~openmsmq.transfer.engine.Transfer` (connected or retrying, messages in flight, the
last TxSequenceNumber released by an OrderAck, the last one sent and not acknowledged),
handed over as a :class:`TransferSnapshot`.

The same :class:`QMStatus` value comes from the in-process transport (a stopped queue
manager: stored state only, ``transfer`` is False) and from the remote-read ``Status``
rpc of a running one; :meth:`QMStatus.to_dict` is the stable JSON of ``status --json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from openmsmq.errors import MQError

if TYPE_CHECKING:  # the client decodes a status without loading the queue manager or the store
    from openmsmq.qm import QueueManager
    from openmsmq.remote import openmsmq_remote_pb2 as pb
    from openmsmq.transfer.engine import Transfer
    from openmsmq.transfer.state import IncomingStatus, OutgoingStatus

__all__ = [
    "IncomingSequenceStatus",
    "OutgoingQueueStatus",
    "QMStatus",
    "QueueStatus",
    "TransferSnapshot",
    "collect_status",
    "outgoing_state",
    "snapshot_of",
    "status_from_pb",
    "status_to_pb",
]


@dataclass(frozen=True, slots=True)
class TransferSnapshot:
    """The live state of a running queue manager, taken on its event loop.

    ``clock_offset`` turns the driver's clock into wall-clock seconds
    (``wall = driver + clock_offset``) for the retry times of the connectors.
    """

    outgoing: tuple[OutgoingStatus, ...]
    incoming: tuple[IncomingStatus, ...]
    clock_offset: float = 0.0
    pid: int | None = None
    #: Where the services listen: ``mqqb``, ``remote``, ``metrics`` (runtime.json).
    endpoints: Mapping[str, str] = field(default_factory=dict)
    #: Format names (case-folded) of the outgoing queues an operator suspended, also
    #: those the transfer has not taken up yet.
    suspended: frozenset[str] = frozenset()


def snapshot_of(
    transfer: Transfer, clock_offset: float, info: Mapping[str, Any], endpoints: tuple[str, ...]
) -> TransferSnapshot:
    """``transfer``'s live state now (call it on the transfer's event loop: it is not
    thread-safe); ``clock_offset``: wall clock minus the loop's clock; ``info``: serve's
    runtime.json, of which the pid and the services named in ``endpoints`` are kept."""
    return TransferSnapshot(
        tuple(transfer.outgoing_status()),
        tuple(transfer.incoming_status()),
        clock_offset,
        info.get("pid"),
        {k: str(v) for k, v in info.items() if k in endpoints and v},
        frozenset(transfer.sender.suspended_names),
    )


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """Depth of one queue."""

    name: str
    #: ``private`` / ``system`` / ``journal`` / ``outgoing``.
    kind: str
    transactional: bool
    message_count: int
    total_bytes: int
    #: ArrivedTime (seconds since the epoch) of the oldest message, None when empty.
    oldest_arrived_time: int | None


@dataclass(frozen=True, slots=True)
class OutgoingQueueStatus:
    """One outgoing queue (MS-MQDMPR 3.1.1.3) and its transactional sequence."""

    #: DestinationFormatName.
    format_name: str
    #: The queue manager the session goes to (empty when the QM is not running).
    next_hop: str
    #: ``suspended`` (by an operator), ``connected``, ``retrying``, ``waiting`` (messages,
    #: no session yet), ``idle``,
    #: ``no route`` (a PRIVATE=<guid> name whose QM cannot be reached yet), or
    #: ``stopped`` (the QM is not running: stored state only).
    state: str
    #: Messages in the outgoing queue (committed, not yet released by an OrderAck).
    waiting: int
    #: Sent or loaded for sending and not yet OrderAck'ed (0 when not running).
    in_flight: int
    #: Persisted OutgoingTxSequenceID (u64, ``TimeStamp << 32 | Ordinal``) and the
    #: OutgoingTxSequenceNumber the next committed message gets (MS-MQQB 3.1.1.3.1).
    tx_sequence_id: int
    next_tx_sequence_number: int
    #: Last (TxSequenceID, TxSequenceNumber) released by an OrderAck since the QM started.
    last_acked_sequence_id: int | None = None
    last_acked_number: int | None = None
    #: Last sent and not yet OrderAck'ed.
    last_unacked_sequence_id: int | None = None
    last_unacked_number: int | None = None
    #: When the connector retries (seconds since the epoch), while ``retrying``.
    retry_at: float | None = None
    #: The open session's send window (packets: the smaller of both QMs' WindowSize) and
    #: the round trip its handshake measured (s; None when the peer opened it): a session
    #: moves at most window / round trip messages a second.
    window: int | None = None
    round_trip: float | None = None
    #: Messages of this queue its destination rejected since the queue manager started:
    #: the class of their negative FinalAck (MS-MQQB 3.1.7.17 names, e.g.
    #: ``NackBadDestQueue``) -> how many. Those sent with ``dead_letter`` are in the
    #: transactional dead-letter queue with that class (docs/acknowledgments.md).
    rejected: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IncomingSequenceStatus:
    """One incoming transactional sequence (IncomingTransactionalTransferInfo,
    MS-MQDMPR 3.1.1.5): keyed by sender QM and destination format name."""

    source_qm: str
    destination: str
    #: IncomingTxSequenceID (u64) and IncomingTxSequenceNumber, durable.
    tx_sequence_id: int
    tx_sequence_number: int
    #: TxMessageRejectCount.
    reject_count: int
    #: LastAccessTime (seconds since the epoch; stored on the transfer driver's clock and
    #: converted, so approximate across reboots).
    last_access_time: float
    #: The message it last rejected since its last acceptance (a running QM only; "" /
    #: zeros when none): the acceptance rule's reason, its TxSequenceID (u64),
    #: TxSequenceNumber and PreviousTxSequenceNumber (openmsmq sequence list / reset).
    last_reject_reason: str = ""
    last_reject_tx_sequence_id: int = 0
    last_reject_number: int = 0
    last_reject_previous: int = 0


@dataclass(frozen=True, slots=True)
class QMStatus:
    """Everything ``openmsmq status`` shows about one queue manager."""

    qm_guid: str
    data_dir: str
    #: The queue manager runs (``openmsmq serve``); False: opened in this process.
    running: bool
    #: True when the outgoing states come from a running transfer (else stored only).
    transfer: bool
    pid: int | None
    endpoints: Mapping[str, str]
    #: When this was taken (seconds since the epoch, the QM's clock).
    time: float
    queues: tuple[QueueStatus, ...]
    outgoing: tuple[OutgoingQueueStatus, ...]
    incoming: tuple[IncomingSequenceStatus, ...]

    @property
    def dead_letter(self) -> dict[str, int]:
        """Messages in the transactional (``xact``) and the other (``non_xact``)
        dead-letter queues (MS-MQDMPR 3.1.1.1)."""
        from openmsmq.qm.names import DEADLETTER, DEADXACT

        by_name = {q.name.lower(): q.message_count for q in self.queues}
        return {"xact": by_name.get(DEADXACT, 0), "non_xact": by_name.get(DEADLETTER, 0)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``openmsmq status --json`` (stable keys)."""
        return {
            "qm": {
                "guid": self.qm_guid,
                "data_dir": self.data_dir,
                "running": self.running,
                "transfer": self.transfer,
                "pid": self.pid,
                "endpoints": dict(self.endpoints),
                "time": self.time,
            },
            "queues": [
                {**asdict(q), "oldest_age": _age(self.time, q.oldest_arrived_time)} for q in self.queues
            ],
            "outgoing": [{**asdict(o), "rejected": dict(o.rejected)} for o in self.outgoing],
            "incoming": [asdict(i) for i in self.incoming],
            "dead_letter": self.dead_letter,
        }


def _age(now: float, arrived: int | None) -> float | None:
    return None if arrived is None else max(0.0, now - arrived)


def outgoing_state(o: OutgoingStatus) -> str:
    """``suspended`` / ``connected`` / ``retrying`` / ``waiting`` / ``idle`` / ``no route``
    of a live outgoing queue."""
    if o.suspended:
        return "suspended"
    if not o.routed:
        return "no route"
    if o.connected:
        return "connected"
    if o.retry_at is not None:
        return "retrying"
    return "waiting" if o.waiting or o.in_flight else "idle"


def collect_status(
    qm: QueueManager,
    now: float,
    snapshot: TransferSnapshot | None = None,
    *,
    visible: Callable[[str], bool] | None = None,
    show_incoming: bool = True,
    running: bool | None = None,
    clock_offset: float | None = None,
) -> QMStatus:
    """The status of ``qm`` at ``now`` (wall clock), with the live transfer state when
    ``snapshot`` is given. ``visible(name)`` filters queues and outgoing queues by their
    canonical name (a remote caller sees those it has a right on); ``show_incoming``
    False leaves out the incoming sequences. ``running`` (default: a snapshot is given)
    says whether the queue manager is served (a remote-read server without a transfer
    runs, yet has no live transfer state). ``clock_offset`` turns the transfer driver's
    clock (monotonic under asyncio) into wall-clock seconds, for retry times; default: the
    snapshot's, else 0. The stored LastAccessTime is already wall-clock seconds."""
    # Imported here: the client (and the Spark source runner) import this module for
    # QMStatus and must not load the store package (sqlite3) to decode a status.
    from openmsmq.store.records import QueueType

    kinds = {QueueType.PRIVATE: "private", QueueType.SYSTEM: "system", QueueType.JOURNAL: "journal",
             QueueType.OUTGOING: "outgoing", QueueType.SUBQUEUE: "subqueue"}  # fmt: skip
    records = {r.display_name: r for r in qm.list_queues(include_system=True)}
    queues: list[QueueStatus] = []
    outgoing_records = []
    for s in qm.queue_stats():  # one aggregate over every queue
        rec = records.get(s.name)
        if rec is None or (visible is not None and not visible(rec.name)):
            continue
        queues.append(
            QueueStatus(
                rec.display_name, kinds.get(rec.queue_type, str(rec.queue_type)), rec.transactional,
                s.message_count, s.total_bytes, s.oldest_arrived_time,
            )
        )  # fmt: skip
        if rec.queue_type == QueueType.OUTGOING and rec.destination_format_name:
            outgoing_records.append((rec, s.message_count))
    live = {o.format_name.casefold(): o for o in snapshot.outgoing} if snapshot is not None else {}
    if clock_offset is not None:
        offset = clock_offset
    else:
        offset = snapshot.clock_offset if snapshot is not None else 0.0
    outgoing: list[OutgoingQueueStatus] = []
    for rec, count in outgoing_records:
        fmt = rec.destination_format_name or ""
        try:
            stored = qm.outgoing_sequence(fmt)
        except MQError:
            continue  # deleted meanwhile
        o = live.get(fmt.casefold())
        if o is None:
            if snapshot is None:
                state = "stopped"
            elif fmt.casefold() in snapshot.suspended:
                state = "suspended"
            else:
                state = "idle" if not count else "waiting"
            outgoing.append(
                OutgoingQueueStatus(
                    fmt, "", state,
                    count, 0, stored.tx_sequence_id, stored.next_tx_sequence_number,
                )
            )  # fmt: skip
            continue
        acked, unacked = o.last_acked, o.last_unacked
        outgoing.append(
            OutgoingQueueStatus(
                fmt, o.next_hop, outgoing_state(o), count, o.in_flight,
                stored.tx_sequence_id, stored.next_tx_sequence_number,
                acked[0].value if acked else None, acked[1] if acked else None,
                unacked[0].value if unacked else None, unacked[1] if unacked else None,
                None if o.retry_at is None else o.retry_at + offset, o.window, o.round_trip,
                dict(o.rejected),
            )
        )  # fmt: skip
    incoming: list[IncomingSequenceStatus] = []
    if show_incoming:
        # The store holds LastAccessTime; the live registry may be ahead of a batch in flight.
        live_in = {(i.source_qm, i.destination.casefold()): i for i in snapshot.incoming} if snapshot else {}
        for st in qm.incoming_sequences():
            li = live_in.get((st.sender_qm, st.destination.casefold()))
            seq_id, number, rejects = st.tx_sequence_id, st.tx_sequence_number, st.reject_count
            last: tuple[str, int, int, int] = ("", 0, 0, 0)
            if li is not None:
                seq_id, number, rejects = li.tx_sequence_id.value, li.tx_sequence_number, li.reject_count
                if li.last_rejected is not None:
                    reason, rid, rnumber, rprevious = li.last_rejected
                    last = (reason, rid.value, rnumber, rprevious)
            incoming.append(
                IncomingSequenceStatus(
                    str(st.sender_qm), st.destination, seq_id, number, rejects, st.last_access_time, *last
                )
            )
    return QMStatus(
        qm_guid=str(qm.guid),
        data_dir=str(qm.data_dir),
        running=snapshot is not None if running is None else running,
        transfer=snapshot is not None,
        pid=snapshot.pid if snapshot is not None else None,
        endpoints=dict(snapshot.endpoints) if snapshot is not None else {},
        time=now,
        queues=tuple(queues),
        outgoing=tuple(outgoing),
        incoming=tuple(incoming),
    )


# ---- protobuf mapping (the Status rpc) -------------------------------------------------------


def status_to_pb(st: QMStatus) -> pb.StatusReply:
    """A :class:`QMStatus` as the protobuf :class:`StatusReply`."""
    # Imported here: a local ``openmsmq status`` never needs the protobuf classes.
    from openmsmq.remote import openmsmq_remote_pb2 as pb

    return pb.StatusReply(
        qm_guid=st.qm_guid, data_dir=st.data_dir, running=st.running, transfer=st.transfer,
        pid=st.pid or 0, endpoints=dict(st.endpoints), time=st.time,
        queues=[
            pb.QueueStatus(
                name=q.name, kind=q.kind, transactional=q.transactional, message_count=q.message_count,
                total_bytes=q.total_bytes, oldest_arrived_time=q.oldest_arrived_time,
            )
            for q in st.queues
        ],
        outgoing=[
            pb.OutgoingQueueStatus(
                format_name=o.format_name, next_hop=o.next_hop, state=o.state, waiting=o.waiting,
                in_flight=o.in_flight, tx_sequence_id=o.tx_sequence_id,
                next_tx_sequence_number=o.next_tx_sequence_number,
                last_acked_sequence_id=o.last_acked_sequence_id, last_acked_number=o.last_acked_number,
                last_unacked_sequence_id=o.last_unacked_sequence_id,
                last_unacked_number=o.last_unacked_number, retry_at=o.retry_at,
                window=o.window, round_trip=o.round_trip, rejected=dict(o.rejected),
            )
            for o in st.outgoing
        ],
        incoming=[
            pb.IncomingSequenceStatus(
                source_qm=i.source_qm, destination=i.destination, tx_sequence_id=i.tx_sequence_id,
                tx_sequence_number=i.tx_sequence_number, reject_count=i.reject_count,
                last_access_time=i.last_access_time, last_reject_reason=i.last_reject_reason,
                last_reject_tx_sequence_id=i.last_reject_tx_sequence_id,
                last_reject_number=i.last_reject_number, last_reject_previous=i.last_reject_previous,
            )
            for i in st.incoming
        ],
    )  # fmt: skip


def _opt(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def status_from_pb(r: pb.StatusReply) -> QMStatus:
    """Inverse of :func:`status_to_pb`."""
    return QMStatus(
        qm_guid=r.qm_guid, data_dir=r.data_dir, running=r.running, transfer=r.transfer,
        pid=r.pid or None, endpoints=dict(r.endpoints), time=r.time,
        queues=tuple(
            QueueStatus(q.name, q.kind, q.transactional, q.message_count, q.total_bytes,
                        _opt(q, "oldest_arrived_time"))
            for q in r.queues
        ),
        outgoing=tuple(
            OutgoingQueueStatus(
                o.format_name, o.next_hop, o.state, o.waiting, o.in_flight, o.tx_sequence_id,
                o.next_tx_sequence_number, _opt(o, "last_acked_sequence_id"), _opt(o, "last_acked_number"),
                _opt(o, "last_unacked_sequence_id"), _opt(o, "last_unacked_number"), _opt(o, "retry_at"),
                _opt(o, "window"), _opt(o, "round_trip"), dict(o.rejected),
            )
            for o in r.outgoing
        ),
        incoming=tuple(
            IncomingSequenceStatus(i.source_qm, i.destination, i.tx_sequence_id, i.tx_sequence_number,
                                   i.reject_count, i.last_access_time, i.last_reject_reason,
                                   i.last_reject_tx_sequence_id, i.last_reject_number, i.last_reject_previous)
            for i in r.incoming
        ),
    )  # fmt: skip
