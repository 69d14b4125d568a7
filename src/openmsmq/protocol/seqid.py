"""TxSequenceID as the protocol layer uses it (MS-MQMQ 2.2.18.1.2).

Provisional: replaced by a re-export of :mod:`openmsmq.wire.ids` once it lands.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ZERO_SEQUENCE_ID", "TxSequenceId"]


@dataclass(frozen=True, slots=True, order=True)
class TxSequenceId:
    """TxSequenceID: compared as the unsigned 64-bit ``(TimeStamp << 32) | Ordinal``."""

    timestamp: int
    ordinal: int


ZERO_SEQUENCE_ID = TxSequenceId(0, 0)
