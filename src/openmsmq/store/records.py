"""Values the store reads and writes: messages and their rows; the queue and sequence
records live in :mod:`openmsmq.store.queue_records` and are re-exported here.

Frozen dataclasses only; conversion to and from SQL rows lives next to them so that
the column list is written once (:data:`MESSAGE_COLUMNS`).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from openmsmq.errors import HResult, MQError
from openmsmq.store.props import (
    CORRELATION,
    GFLAGS_AT,
    GUIDS_END,
    HEAD,
    LENGTHS_AT,
    RARE,
    RARE_LENGTHS,
    STRINGS_AT,
    ZERO_CORRELATION,
    guid_block,
    split_guids,
)
from openmsmq.store.queue_records import (
    QUEUE_COLUMNS,
    IncomingSequenceState,
    OutgoingSequenceState,
    QueueRecord,
    QueueType,
    queue_from_row,
    sender_allowed,
    with_queue_id,
)
from openmsmq.wire.fast import fast_constructor, fast_init, slot_builder

__all__ = [
    "ABORT_SHIFT",
    "COL",
    "COUNT_MAX",
    "INFINITE",
    "KEYED_COLUMNS",
    "KEYED_SELECT",
    "LOOKUP_MASK",
    "MAX_MESSAGE_BYTES",
    "MESSAGE_COLUMNS",
    "MOVE_SHIFT",
    "PRIORITY0_BAND",
    "PROPS",
    "QUEUE_COLUMNS",
    "ROW_COLUMNS",
    "IncomingSequenceState",
    "MessageRecord",
    "OutgoingSequenceState",
    "QueueRecord",
    "QueueType",
    "Stamp",
    "counts_of",
    "from_i64",
    "keyed_messages",
    "message_from_row",
    "message_sent_time",
    "message_to_row",
    "message_uniquifier",
    "queue_from_row",
    "sender_allowed",
    "stamped_rows",
    "to_i64",
    "with_queue_id",
]

#: TimeToBeReceived / TimeToReachQueue value meaning "never expires" (MS-MQDMPR 3.1.1.12).
INFINITE = 0xFFFFFFFF
#: Largest message body MSMQ accepts (4 MiB); larger sends fail with MQ_ERROR_INSUFFICIENT_RESOURCES.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024

_NULL_GUID = uuid.UUID(int=0)


def to_i64(value: int) -> int:
    """Map an unsigned 64-bit value (TxSequenceID) to SQLite's signed INTEGER."""
    return value - (1 << 64) if value >= (1 << 63) else value


def from_i64(value: int) -> int:
    """Inverse of :func:`to_i64`."""
    return value + (1 << 64) if value < 0 else value


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """A message: every Message attribute of MS-MQDMPR 3.1.1.12 a user sets or reads.

    The first group is set by the sender; the second is assigned by the queue manager
    (``lookup_id``, Identifier, times, destination, transactional sequence fields).
    Times are seconds since 1970 (UTC). GUIDs are :class:`uuid.UUID`.
    """

    body: bytes = b""
    label: str = ""
    #: 0–7, 7 highest; forced to 0 for transactional messages (MS-MQDMPR 3.1.1.12 note on PR).
    priority: int = 3
    #: Message.Class (wire MessageClass, MS-MQMQ 2.2.18.1.6).
    message_class: int = 0
    body_type: int = 0
    #: CorrelationIdentifier: a 20-byte OBJECTID.
    correlation_id: bytes = bytes(20)
    #: ApplicationTag (AppSpecific), u32.
    app_specific: int = 0
    #: DeliveryGuarantee: 0 Express, 1 Recoverable (UserHeader.Flags.DM).
    delivery: int = 0
    #: Seconds relative to SentTime (BaseHeader.TimeToReachQueue).
    time_to_reach_queue: int = 0x54600
    #: Seconds relative to SentTime; INFINITE = never (UserHeader.TimeToBeReceived).
    time_to_be_received: int = INFINITE
    #: AcknowledgementsRequested as MessagePropertiesHeader.Flags bits (PA/PR/NA/NR).
    ack_flags: int = 0
    positive_journaling: bool = False
    negative_journaling: bool = False
    tracing: bool = False
    admin_queue: str = ""
    response_queue: str = ""
    extension: bytes = b""
    sender_id: bytes = b""
    hop_count: int = 0
    #: TransactionHeader.Flags.FA.
    final_ack_required: bool = False
    # ---- assigned by the queue manager -------------------------------------------------
    #: LookupIdentifier: 64-bit, strictly increasing per QM, never reused (invariant 5).
    lookup_id: int = 0
    #: Identifier.Lineage: GUID of the QM that created the message (MS-MQMQ 2.2.8).
    id_lineage: uuid.UUID = _NULL_GUID
    #: Identifier.Uniquifier (u32; UserHeader.MessageID).
    id_uniquifier: int = 0
    sent_time: int = 0
    arrived_time: int = 0
    destination_queue: str = ""
    destination_qm: uuid.UUID = _NULL_GUID
    source_machine: uuid.UUID = _NULL_GUID
    #: True when the message was sent inside a transaction (it carries a TransactionHeader).
    transactional: bool = False
    #: TransactionalMessageSequenceIdentifier as u64 ``(TimeStamp << 32) | Ordinal``; 0 = none.
    tx_sequence_id: int = 0
    tx_sequence_number: int = 0
    tx_previous_sequence_number: int = 0
    first_in_transaction: bool = False
    last_in_transaction: bool = False
    #: AbortCount: transactional receives of the message aborted since it last moved (the
    #: SubqueueHeader's AbortCounter, MS-MQRR 2.2.5; openmsmq.retry_policy).
    abort_count: int = 0
    #: MoveCount: how often the message moved between its queue and subqueues.
    move_count: int = 0

    @property
    def size(self) -> int:
        """Bytes counted against quotas (body, label and extension)."""
        return len(self.body) + 2 * len(self.label) + len(self.extension)


#: Message(...) stores its fields as plain slot stores (openmsmq.wire.fast.fast_init): the
#: generated frozen __init__ (one object.__setattr__ per field) is costly per message sent.
MessageRecord.__init__ = fast_init(MessageRecord)  # type: ignore[method-assign]


class Stamp(NamedTuple):
    """Attributes the queue manager assigns at send time, overriding the sender's values."""

    priority: int
    transactional: bool
    delivery: int
    id_lineage: uuid.UUID
    id_uniquifier: int
    sent_time: int
    source_machine: uuid.UUID
    destination_queue: str


#: ``tx_flags`` holds, above the First/LastInTransaction bits (0 and 1), the message's
#: AbortCount (bits 2-16) and MoveCount (bits 17-31), each saturating at
#: :data:`COUNT_MAX` (above any count a retry policy acts on: at most 10,001 aborts per
#: cycle, 20,001 moves): an abort or a move then writes one column, and the send and
#: receive statements are unchanged (openmsmq.store.moves). A head read carries them
#: above the 32 bits of PreviousTxSequenceNumber (:data:`KEYED_SELECT`): no extra value.
ABORT_SHIFT = 2
MOVE_SHIFT = 17
COUNT_MAX = (1 << 15) - 1


def counts_of(tx_flags: int) -> tuple[int, int]:
    """(AbortCount, MoveCount) of a stored ``tx_flags`` value."""
    return (tx_flags >> ABORT_SHIFT) & COUNT_MAX, (tx_flags >> MOVE_SHIFT) & COUNT_MAX


#: Columns of the ``messages`` table that a message row carries, in row order. Attributes
#: SQL filters or updates get a column; all the others travel packed in ``props``
#: (:data:`_PROPS`), which keeps a row narrow: fewer bound parameters, smaller records.
ROW_COLUMNS: tuple[str, ...] = (
    "lookup_id",
    "priority",
    "message_class",
    "transactional",
    "tx_sequence_id",
    "tx_sequence_number",
    "tx_previous_sequence_number",
    "tx_flags",  # bit 0 FirstInTransaction, bit 1 LastInTransaction
    "arrived_time",
    "ack_wanted",  # acknowledgments, journaling or a FinalAck asked for
    "size",
    "props",
    "body",
)
#: Position of each column in a message row (``COL["lookup_id"]``).
COL: dict[str, int] = {name: i for i, name in enumerate(ROW_COLUMNS)}
MESSAGE_COLUMNS = ROW_COLUMNS  # kept for the schema module

# props: its layout is openmsmq.store.props' (a head, the GUIDs the head's flags name,
# then the strings).
_PROPS = HEAD
#: The fixed part of ``props`` (:data:`openmsmq.store.props.HEAD`), for code that reads
#: rows without building a :class:`MessageRecord` (the remote-read service's packed
#: PeekRange reply, the transfer's row encoder).
PROPS = _PROPS
_PROPS_COL = COL["props"]
_uuid_cache: dict[bytes, uuid.UUID] = {}


def _uuid(raw: bytes) -> uuid.UUID:
    """bytes → UUID, memoised: a store holds few distinct QM GUIDs."""
    got = _uuid_cache.get(raw)
    if got is None:
        if len(_uuid_cache) > 4096:
            _uuid_cache.clear()
        got = _uuid_cache[raw] = uuid.UUID(bytes=raw)
    return got


#: UUID.int -> 16 bytes (keyed by the int: hashing a UUID runs Python code, an int's does not).
GUID_BYTES: dict[int, bytes] = {}


def guid_bytes_of(guid: uuid.UUID) -> bytes:
    """UUID → 16 bytes, memoised (``UUID.bytes`` converts from an int every time)."""
    if len(GUID_BYTES) > 4096:
        GUID_BYTES.clear()
    raw = GUID_BYTES[guid.int] = guid.bytes
    return raw


def message_to_row(m: MessageRecord, stamp: Stamp | None = None) -> list[Any]:
    """The message as a row in :data:`ROW_COLUMNS` order; ``stamp`` overrides the
    QM-assigned attributes."""
    gb = GUID_BYTES
    if stamp is None:
        lineage, source = m.id_lineage, m.source_machine
        lineage_bytes = gb.get(lineage.int) or guid_bytes_of(lineage)
        return _row(
            m,
            m.priority,
            m.transactional,
            m.delivery,
            lineage_bytes,
            m.id_uniquifier,
            m.sent_time,
            # Usually the same GUID object (a QM's own messages): one lookup then.
            lineage_bytes if source is lineage else gb.get(source.int) or guid_bytes_of(source),
            m.destination_queue.encode(),
            m.arrived_time,
        )
    return _row(
        m,
        stamp.priority,
        stamp.transactional,
        stamp.delivery,
        gb.get(stamp.id_lineage.int) or guid_bytes_of(stamp.id_lineage),
        stamp.id_uniquifier,
        stamp.sent_time,
        gb.get(stamp.source_machine.int) or guid_bytes_of(stamp.source_machine),
        stamp.destination_queue.encode(),
        m.arrived_time,
    )


def stamped_rows(
    messages: Sequence[MessageRecord],
    transactional: bool,
    qm: uuid.UUID,
    first_uniquifier: int,
    now: int,
    name: str,
    max_bytes: int = MAX_MESSAGE_BYTES,
) -> list[list[Any]]:
    """Rows of messages a queue manager sends now: Identifier ``(qm, uniquifier)`` with
    uniquifiers from ``first_uniquifier`` (u32, wrapping, never 0), SentTime = ArrivedTime
    = ``now``, source ``qm``, destination ``m.destination_queue or name``; transactional
    messages get priority 0 and Recoverable delivery (MS-MQDMPR 3.1.1.12). The send path's
    batch form of :func:`message_to_row` (constants computed once per batch).

    Each message is checked first (in the same loop): larger than ``max_bytes`` (4 MiB;
    less for a remote queue, whose packet must hold the headers too)
    (MQ_ERROR_INSUFFICIENT_RESOURCES), a label over 249 characters
    (MQ_ERROR_LABEL_TOO_LONG), a priority outside 0..7 (MQ_ERROR_ILLEGAL_PROPERTY_VALUE)."""
    qm_bytes = GUID_BYTES.get(qm.int) or guid_bytes_of(qm)
    name_bytes = name.encode()
    rows: list[list[Any]] = []
    append = rows.append
    uniq = first_uniquifier - 1
    for m in messages:
        label = m.label
        extension = m.extension
        n_label = len(label) if label else 0  # (no label, no extension: the usual message)
        n_body = len(m.body)
        size = n_body + 2 * n_label + (len(extension) if extension else 0)  # Message.size
        if size > max_bytes or n_label > 249:
            _check_message(m, max_bytes)
        priority = m.priority
        if not 0 <= priority <= 7:
            _check_message(m)
        uniq = uniq % 0xFFFFFFFF + 1  # u32, wraps to 1 (never 0)
        dest = m.destination_queue
        append(
            _row(
                m,
                0 if transactional else priority,
                transactional,
                1 if transactional else m.delivery,
                qm_bytes,
                uniq,
                now,
                qm_bytes,
                dest.encode() if dest else name_bytes,
                now,
                n_body,
                size,
            )
        )
    return rows


def _check_message(m: MessageRecord, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
    """Raise the MQError of a message a queue manager must refuse to send."""
    size = m.size
    if size > MAX_MESSAGE_BYTES:
        raise MQError(
            HResult.MQ_ERROR_INSUFFICIENT_RESOURCES, f"message of {size} bytes exceeds the 4 MiB limit"
        )
    if size > max_bytes:
        raise MQError(
            HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
            f"message of {size} bytes exceeds the {max_bytes:,} bytes a message may have here"
            " (store.max_message_size; to a remote queue, its MS-MQQB packet with its headers"
            " must fit 4 MiB)",
        )
    if len(m.label) > 249:
        raise MQError(HResult.MQ_ERROR_LABEL_TOO_LONG, "message label has at most 249 characters")
    if not 0 <= m.priority <= 7:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "priority must be 0..7")


def _row(
    m: MessageRecord,
    priority: int,
    transactional: bool,
    delivery: int,
    lineage: bytes,
    uniquifier: int,
    sent_time: int,
    source: bytes,
    dest: bytes,
    arrived_time: int,
    n_body: int = -1,
    size: int = -1,
) -> list[Any]:
    """The stored row of ``m`` with the stamp given (see :func:`message_to_row`). ``n_body``
    and ``size``: ``len(m.body)`` and Message.size when the caller measured them already
    (-1: measured here)."""
    label = m.label.encode() if m.label else b""
    admin = m.admin_queue.encode() if m.admin_queue else b""
    response = m.response_queue.encode() if m.response_queue else b""
    bits = m.positive_journaling | m.negative_journaling << 1 | m.tracing << 2 | m.final_ack_required << 3
    extension = m.extension
    sender_id = m.sender_id
    dest_qm = m.destination_qm
    corr = m.correlation_id
    if corr != ZERO_CORRELATION and len(corr) != 20:  # the zero id is 20 bytes
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_SIZE, "CorrelationId is a 20-byte OBJECTID")
    # props (openmsmq.store.props): the head, then the GUIDs (usually the lineage alone),
    # the CorrelationId and the lengths of the rare strings only when there are any.
    if dest_qm is _NULL_GUID and source is lineage:  # a message sent here: identity checks only
        g, guids = 0, lineage
    else:
        dest_qm_bytes = GUID_BYTES.get(dest_qm.int) or guid_bytes_of(dest_qm)
        g, guids = guid_block(lineage, dest_qm_bytes, source)
    try:
        if corr != ZERO_CORRELATION:
            g |= CORRELATION
            guids += corr
        if label or admin or response or extension or sender_id:
            g |= RARE
            guids += _pack_rare(len(label), len(admin), len(response), len(extension), len(sender_id))
        head = _pack_props(
            m.body_type,
            m.app_specific,
            delivery,
            m.time_to_reach_queue,
            m.time_to_be_received,
            m.ack_flags,
            bits,
            m.hop_count,
            uniquifier,
            sent_time,
            len(dest),
            g,
        )
    except struct.error as exc:
        raise MQError(
            HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"message property out of range: {exc}"
        ) from exc
    # props is a bytearray: sqlite3 binds a bytearray directly but sends bytes through its
    # adapter lookup.
    if g & RARE:
        props = _join_bytearray((head, guids, label, admin, response, dest, extension, sender_id))
    else:
        props = _join_bytearray((head, guids, dest))
    body: bytes | bytearray = m.body
    if n_body < 0:
        n_body = len(body)
        size = n_body + 2 * len(m.label) + len(extension)
    if n_body <= BODY_COPY_MAX:
        # Bound as a bytearray too (the bytes would take sqlite3's adapter lookup): the
        # copy costs less than the lookup up to this size (message_from_row gives bytes).
        body = bytearray(body)
    seq_id = m.tx_sequence_id
    # Flags are bound as plain ints, never bool: sqlite3 binds only exact ints directly
    # and sends a bool through its adapter lookup, a cost per bool per row.
    return [
        m.lookup_id,
        priority,
        m.message_class,
        1 if transactional else 0,
        seq_id - (1 << 64) if seq_id >= (1 << 63) else seq_id,  # to_i64
        m.tx_sequence_number,
        m.tx_previous_sequence_number,
        (1 if m.first_in_transaction else 0) | (2 if m.last_in_transaction else 0),
        arrived_time,
        1 if bits or m.ack_flags else 0,
        size,  # Message.size
        props,
        body,
    ]


_pack_props = _PROPS.pack
_pack_rare = RARE_LENGTHS.pack
_unpack_rare = RARE_LENGTHS.unpack_from
#: A body up to this size goes into its row as a ``bytearray``: sqlite3 binds a
#: ``bytearray`` directly but sends ``bytes`` through its adapter lookup, and up to this
#: size ``bytearray(body)`` costs less than that lookup. Larger bodies stay ``bytes``:
#: the copy would cost more.
BODY_COPY_MAX = 8192
#: Joins into a new bytearray (the empty separator is never changed).
_join_bytearray = bytearray().join


#: Offsets in ``props`` of Identifier.Uniquifier (u32) and SentTime (i64): the size of
#: the :data:`_PROPS` fields before them.
_UNIQ_AT = struct.Struct("<I").unpack_from, struct.calcsize("<IIBIIIBH")
_SENT_AT = struct.Struct("<q").unpack_from, struct.calcsize("<IIBIIIBHI")


def message_sent_time(row: list[Any]) -> int:
    """SentTime of a message row without decoding the rest."""
    unpack, at = _SENT_AT
    return int(unpack(row[_PROPS_COL], at)[0])


def message_uniquifier(row: list[Any]) -> int:
    """Identifier.Uniquifier of a message row without decoding the rest (one u32 read at
    its offset, not the whole props header)."""
    unpack, at = _UNIQ_AT
    return int(unpack(row[_PROPS_COL], at)[0])


def _variable_fields(
    props: bytes | bytearray,
    i: int,
    n_label: int,
    n_admin: int,
    n_response: int,
    n_ext: int,
    n_sender: int,
    n_dest: int,
) -> tuple[str, str, str, str, bytes, bytes]:
    """(label, admin queue, response queue, destination queue, extension, sender id):
    the strings of ``props`` from offset ``i``, given their lengths (those of
    :data:`~openmsmq.store.props.RARE_LENGTHS`, then the destination's).
    extension and sender id are returned as bytes also when ``props`` is a bytearray (a
    row built by :func:`message_to_row`, not read back from SQLite)."""
    label = props[i : i + n_label].decode()
    i += n_label
    admin = props[i : i + n_admin].decode()
    i += n_admin
    response = props[i : i + n_response].decode()
    i += n_response
    dest = props[i : i + n_dest].decode()
    i += n_dest
    extension = bytes(props[i : i + n_ext])
    i += n_ext
    return label, admin, response, dest, extension, bytes(props[i : i + n_sender])


def message_from_row(row: tuple[Any, ...] | list[Any]) -> MessageRecord:
    """Inverse of :func:`message_to_row` (a ``SELECT`` of :data:`ROW_COLUMNS`).

    Hot on every receive and peek: builds the frozen Message with the wire layer's
    fast constructor (rows come from our own table, already valid) and decodes the
    variable-length strings only when present.
    """
    (
        lookup_id,
        priority,
        cls,
        transactional,
        seq_id,
        seq_no,
        prev_no,
        tx_flags,
        arrived,
        _ack,
        _size,
        props,
        body,
    ) = row
    (
        body_type,
        app_specific,
        delivery,
        ttrq,
        ttbr,
        ack_flags,
        bits,
        hop_count,
        uniquifier,
        sent_time,
        n_dest,
        g,
    ) = _unpack_props(props)
    end = GUIDS_END[g & 3]
    correlation = bytes(props[end : end + 20]) if g & CORRELATION else ZERO_CORRELATION
    key = props[GFLAGS_AT:end]  # gflags and the GUIDs
    if key.__class__ is not bytes:  # a row built by message_to_row (a bytearray props)
        key = bytes(key)
    lineage, dest_qm, source = _guid_triples.get(key) or _guid_triple(key)
    at = STRINGS_AT[g & 15]
    if g & RARE:
        n_label, n_admin, n_response, n_ext, n_sender = _unpack_rare(props, LENGTHS_AT[g & 7])
        label, admin, response, dest, extension, sender_id = _variable_fields(
            props, at, n_label, n_admin, n_response, n_ext, n_sender, n_dest
        )
    else:  # the usual message: only the destination follows
        label = admin = response = ""
        extension = sender_id = b""
        dest = props[at : at + n_dest].decode()
    if body.__class__ is not bytes:  # a row built by message_to_row (a bytearray body)
        body = bytes(body)
    return _make_message(
        body,
        label,
        priority,
        cls,
        body_type,
        correlation,
        app_specific,
        delivery,
        ttrq,
        ttbr,
        ack_flags,
        bool(bits & 1),
        bool(bits & 2),
        bool(bits & 4),
        admin,
        response,
        extension,
        sender_id,
        hop_count,
        bool(bits & 8),
        lookup_id,
        lineage,
        uniquifier,
        sent_time,
        arrived,
        dest,
        dest_qm,
        source,
        bool(transactional),
        seq_id + (1 << 64) if seq_id < 0 else seq_id,
        seq_no,
        prev_no,
        bool(tx_flags & 1),
        bool(tx_flags & 2),
        (tx_flags >> ABORT_SHIFT) & COUNT_MAX,
        (tx_flags >> MOVE_SHIFT) & COUNT_MAX,
    )


_make_message = fast_constructor(MessageRecord)
_unpack_props = _PROPS.unpack_from

_guid_triples: dict[bytes, tuple[uuid.UUID, uuid.UUID, uuid.UUID]] = {}


def _guid_triple(key: bytes) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """(lineage, destination QM, source QM) of a ``props`` GUIDs part with its flags byte
    before it (``props[GFLAGS_AT:GUIDS_END[g & 3]]`` as ``bytes``), memoised like
    :func:`_uuid`: one ``bytes`` and one cache look-up per row for the three GUIDs."""
    got = _guid_triples.get(key)
    if got is None:
        if len(_guid_triples) > 4096:
            _guid_triples.clear()
        lineage, dest_qm, source = split_guids(key)
        got = _guid_triples[key] = (_uuid(lineage), _uuid(dest_qm), _uuid(source))
    return got


#: Filled field by field by :func:`keyed_messages`, then made a Message (None: this
#: interpreter cannot; keyed_messages then goes through message_from_row).
_MessageBuilder = slot_builder(MessageRecord)

#: The values of a read that :func:`keyed_messages` decodes: ``order_key`` first, then
#: :data:`ROW_COLUMNS` without ``lookup_id`` and ``priority`` (``order_key`` holds both:
#: ``((7 - priority) << 56) | lookup_id``, set at insert and kept by every move), without
#: ``ack_wanted`` and ``size`` (the decoder does not use them), and with
#: ``message_class``, ``transactional`` and ``tx_flags`` as one value, ``class_flags``
#: (:data:`KEYED_SELECT`). Every value a row carries costs sqlite3 a value object, so a
#: head read selects as few columns as it can.
_NOT_KEYED = ("lookup_id", "priority", "ack_wanted", "size", "message_class", "transactional", "tx_flags")
KEYED_COLUMNS: tuple[str, ...] = (
    "order_key",
    "class_flags",
    *(c for c in ROW_COLUMNS if c not in _NOT_KEYED),
)
#: SQL of ``class_flags``: ``message_class << 3 | transactional << 2 | tx_flags``.
#: ``transactional`` is stored as 0 or 1 and ``tx_flags`` as 0-3 (bit 0 First-, bit 1
#: LastInTransaction: :func:`message_to_row`), so the three come back exactly for any
#: Message.Class of |class| < 2**60 (the 16-bit MQMSG_CLASS values of MS-MQDMPR
#: 3.1.1.12; SQLite shifts a 64-bit integer). ``<<`` and ``|`` bind equally tightly in
#: SQLite (left to right), hence the parentheses.
_CLASS_FLAGS_SQL = "(m.message_class << 3) | (m.transactional << 2) | (m.tx_flags & 3)"
#: SQL of ``tx_previous_sequence_number`` in a head read: PreviousTxSequenceNumber (a
#: u32) in the low 32 bits, AbortCount and MoveCount as stored in ``tx_flags`` above them
#: (30 bits: the value stays below 2**62).
_PREV_COUNTS_SQL = "m.tx_previous_sequence_number | ((m.tx_flags >> 2) << 32)"
#: PreviousTxSequenceNumber's part of that value.
_U32 = 0xFFFFFFFF
#: The ``SELECT`` list of :data:`KEYED_COLUMNS` over ``messages m``.
KEYED_SELECT = ", ".join(
    {"class_flags": _CLASS_FLAGS_SQL, "tx_previous_sequence_number": _PREV_COUNTS_SQL}.get(c, f"m.{c}")
    for c in KEYED_COLUMNS
)
#: order_key -> LookupIdentifier (the low 56 bits; priority is the top byte).
LOOKUP_MASK = (1 << 56) - 1
#: Lowest order_key of priority 0 (band ``(7 - 0) << 56``), the highest band: every
#: transactional message has priority 0, so an outgoing queue's sequence lies in it.
PRIORITY0_BAND = 7 << 56


def _full_row(r: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of :data:`ROW_COLUMNS` from one of :data:`KEYED_COLUMNS` (``ack_wanted`` and
    ``size``, which :func:`message_from_row` does not use, as 0)."""
    order_key, class_flags = r[0], r[1]
    return (
        order_key & LOOKUP_MASK,
        7 - (order_key >> 56),
        class_flags >> 3,
        class_flags >> 2 & 1,
        r[2],
        r[3],
        r[4] & _U32,
        class_flags & 3 | (r[4] >> 32) << ABORT_SHIFT,
        r[5],
        0,
        0,
        r[6],
        r[7],
    )


def keyed_messages(rows: Iterable[tuple[Any, ...]]) -> list[tuple[int, MessageRecord]]:
    """``(order_key, message)`` for each row of a ``SELECT`` of :data:`KEYED_COLUMNS`:
    :func:`message_from_row` for a whole read in one call.

    The receive path's decoder (a head read returns up to ``limit`` rows): the loop
    stores each field of the Message straight into a builder instance (the
    :func:`openmsmq.wire.fast.slot_builder` of Message) instead of calling the fast
    constructor with 34 arguments, and reads the three GUIDs as one cached block: much
    cheaper than ``(r[0], message_from_row(r[1:]))``. Results are equal to
    message_from_row's (tests/store/test_keyed_messages.py).
    """
    builder = _MessageBuilder
    if builder is None:
        return [(r[0], message_from_row(_full_row(r))) for r in rows]
    out: list[tuple[int, MessageRecord]] = []
    append = out.append
    new = object.__new__
    message = MessageRecord
    unpack = _unpack_props
    triples = _guid_triples
    gat = GFLAGS_AT
    ends = GUIDS_END
    starts = STRINGS_AT
    zero_correlation = ZERO_CORRELATION
    mask = LOOKUP_MASK
    count_max = COUNT_MAX
    move_at = MOVE_SHIFT - ABORT_SHIFT + 32
    u32 = _U32
    for (
        order_key,
        class_flags,
        seq_id,
        seq_no,
        prev_no,
        arrived,
        props,
        body,
    ) in rows:
        (
            body_type,
            app_specific,
            delivery,
            ttrq,
            ttbr,
            ack_flags,
            bits,
            hop_count,
            uniquifier,
            sent_time,
            n_dest,
            g,
        ) = unpack(props)
        m: Any = new(builder)
        at = starts[g & 15]
        if g & 8:  # RARE
            n_label, n_admin, n_response, n_ext, n_sender = _unpack_rare(props, LENGTHS_AT[g & 7])
            (
                m.label,
                m.admin_queue,
                m.response_queue,
                m.destination_queue,
                m.extension,
                m.sender_id,
            ) = _variable_fields(props, at, n_label, n_admin, n_response, n_ext, n_sender, n_dest)
        else:  # the usual message: only the destination follows
            m.label = m.admin_queue = m.response_queue = ""
            m.extension = m.sender_id = b""
            m.destination_queue = props[at : at + n_dest].decode()
        end = ends[g & 3]
        key = props[gat:end]  # gflags and the GUIDs
        m.id_lineage, m.destination_qm, m.source_machine = triples.get(key) or _guid_triple(key)
        m.correlation_id = props[end : end + 20] if g & 4 else zero_correlation
        m.body = body
        m.priority = 7 - (order_key >> 56)
        m.message_class = class_flags >> 3
        m.body_type = body_type
        m.app_specific = app_specific
        m.delivery = delivery
        m.time_to_reach_queue = ttrq
        m.time_to_be_received = ttbr
        m.ack_flags = ack_flags
        m.positive_journaling = bits & 1 != 0
        m.negative_journaling = bits & 2 != 0
        m.tracing = bits & 4 != 0
        m.hop_count = hop_count
        m.final_ack_required = bits & 8 != 0
        m.lookup_id = order_key & mask
        m.id_uniquifier = uniquifier
        m.sent_time = sent_time
        m.arrived_time = arrived
        m.transactional = class_flags & 4 != 0
        m.tx_sequence_id = seq_id + (1 << 64) if seq_id < 0 else seq_id
        m.tx_sequence_number = seq_no
        m.tx_previous_sequence_number = prev_no & u32
        m.first_in_transaction = class_flags & 1 != 0
        m.last_in_transaction = class_flags & 2 != 0
        m.abort_count = prev_no >> 32 & count_max
        m.move_count = prev_no >> move_at & count_max
        m.__class__ = message
        append((order_key, m))
    return out
