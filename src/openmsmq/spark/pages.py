"""The values the Spark data source reads and writes, apart from the backends that
produce them: a message as peeked (:class:`PeekedMessage`), a page of them by column
(:class:`PeekedPage`) and a message to send (:class:`OutgoingMessage`). Their own module
so that the Arrow conversions and the schema need not import the backends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PeekedMessage", "PeekedPage", "WriterMessage"]


@dataclass(frozen=True)
class PeekedMessage:
    """One message as the data source reads it (one output row).

    Field names follow the MS-MQDMPR 3.1.1.12 Message attributes they carry.
    """

    lookup_id: int
    """LookupIdentifier (u64, MS-MQDMPR 3.1.1.12)."""
    message_id: str
    """Identifier, an OBJECTID in MSMQ text form ``{GUID}\\uniquifier`` (MS-MQMQ 2.2.8)."""
    label: str
    body: bytes
    message_class: int
    """Class as its u16 wire value (MS-MQMQ 2.2.18.1.6; 0 = Normal)."""
    priority: int
    correlation_id: bytes
    """CorrelationIdentifier, 20 bytes (MS-MQMQ 2.2.19.3)."""
    app_specific: int
    """ApplicationTag (u32)."""
    sent_time: int
    """SentTime, seconds since 1970-01-01 UTC."""
    arrived_time: int
    """ArrivalTime, seconds since 1970-01-01 UTC."""
    source_qm: str
    """SourceMachineIdentifier: GUID text of the QM that first accepted the message."""
    tx_sequence_id: int | None = None
    """TxSequenceID (MS-MQMQ 2.2.18.1.2) as a signed 64-bit value; None if the message
    did not travel in a transactional sequence (local sends, non-transactional)."""
    tx_sequence_number: int | None = None
    """TxSequenceNumber (u32); None when ``tx_sequence_id`` is None."""


@dataclass(frozen=True)
class PeekedPage:
    """One page of peeked messages, column by column (what an executor turns into one
    Arrow record batch without building a Python object per row).

    Every column holds one value per message, in LookupIdentifier order; the meaning of
    each is that of the :class:`PeekedMessage` field of the same name.
    """

    lookup_id: Sequence[int]
    message_id: Sequence[str]
    label: Sequence[str]
    body: Sequence[bytes]
    message_class: Sequence[int]
    priority: Sequence[int]
    correlation_id: Sequence[bytes]
    app_specific: Sequence[int]
    sent_time: Sequence[int]
    arrived_time: Sequence[int]
    source_qm: Sequence[str]
    tx_sequence_id: Sequence[int]
    """TxSequenceID as the u64 of the wire (MS-MQMQ 2.2.18.1.2); 0 where the message did
    not travel in a transactional sequence (the Arrow builder makes that a null)."""
    tx_sequence_number: Sequence[int]
    """TxSequenceNumber (u32); meaningful only where ``tx_sequence_id`` is not 0."""

    def __len__(self) -> int:
        return len(self.lookup_id)

    @property
    def body_bytes(self) -> int:
        """Total size of the bodies of this page (to size the next peek request)."""
        return sum(map(len, self.body))

    @classmethod
    def from_messages(cls, messages: Sequence[PeekedMessage]) -> PeekedPage:
        """The page of ``messages`` (a test double or a row-wise backend)."""
        ms = list(messages)
        return cls(
            lookup_id=[m.lookup_id for m in ms],
            message_id=[m.message_id for m in ms],
            label=[m.label for m in ms],
            body=[m.body for m in ms],
            message_class=[m.message_class for m in ms],
            priority=[m.priority for m in ms],
            correlation_id=[m.correlation_id for m in ms],
            app_specific=[m.app_specific for m in ms],
            sent_time=[m.sent_time for m in ms],
            arrived_time=[m.arrived_time for m in ms],
            source_qm=[m.source_qm for m in ms],
            tx_sequence_id=[_u64(m.tx_sequence_id) for m in ms],
            tx_sequence_number=[m.tx_sequence_number or 0 for m in ms],
        )


@dataclass(frozen=True)
class WriterMessage:
    """A message the writer sends; ``identity`` makes the send idempotent (contract 4)."""

    identity: str
    """Deterministic key, 1 to 255 characters; unique per destination queue."""
    body: bytes
    label: str = ""
    priority: int = 3
    """0-7; a transactional queue stores 0 whatever is given (MS-MQDMPR 3.1.1.12)."""
    correlation_id: bytes | None = None
    """Exactly 20 bytes, or None for all zeros."""
    app_specific: int = 0


def _u64(value: int | None) -> int:
    """A TxSequenceID held as signed 64 bits (or None) back to its u64 (0 for None)."""
    if value is None:
        return 0
    return value + (1 << 64) if value < 0 else value
