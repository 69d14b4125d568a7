"""The MS-MQQB session as the transfer uses it, and the transfer's per-connection and
per-accepted-message records (see :mod:`openmsmq.qm.transfer`)."""

from __future__ import annotations

from dataclasses import dataclass

from openmsmq.protocol.events import ForwardMessage, Role, UserMessagePacket
from openmsmq.protocol.incoming import IncomingSequenceSnapshot, SequenceKey
from openmsmq.protocol.session import Session
from openmsmq.qm.transfer_codec import split_direct
from openmsmq.wire.ids import NULL_GUID, TxSequenceId
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName

__all__ = ["Conn", "Pending", "TransferSession", "session_key_form"]


class TransferSession(Session):
    """A Session that also treats a DIRECT=TCP: destination on another host as "not for
    this QM" (MS-MQQB 3.1.1.6.2): direct names carry a NULL QueueManagerAddress, so the
    GUID alone cannot tell an intermediate hop from the final destination."""

    def __init__(self, *args: object, local_hosts: frozenset[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._local_hosts = local_hosts
        self._null_seen: object = NULL_GUID
        # Direct name -> "another host" (a session carries few destinations; bounded).
        self._remote_names: dict[str, bool] = {}
        #: The last direct name found to be on this host (identity: no lookup in _route).
        self._local_seen: object = None

    def _route(self, packet: UserMessagePacket, message: UserMessage, recoverable: int, now: float) -> None:
        user = message.user
        dest = user.destination_queue
        qm = user.queue_manager_address
        if qm is not self._null_seen and qm == NULL_GUID:
            self._null_seen = qm  # the decoder's shared NULL GUID object: identity next time
        if qm is self._null_seen and dest is not self._local_seen and isinstance(dest, DirectQueueFormatName):
            remote = self._remote_names.get(dest.name)
            if remote is None:
                parts = split_direct(dest.name)
                remote = parts is not None and parts[0] not in self._local_hosts
                if len(self._remote_names) < 1024:
                    self._remote_names[dest.name] = remote
            if remote:
                self._events.append(ForwardMessage(packet))
                return
            self._local_seen = dest  # the decoder shares direct-name objects: identity next time
        Session._route(self, packet, message, recoverable, now)  # not super(): once per message


@dataclass(eq=False)
class Conn:
    """One TCP connection of the transfer and its session."""

    cid: int
    peer: str
    role: Role
    session: Session
    open: bool = False


@dataclass(slots=True)
class Pending:
    """An accepted message waiting for its batch: its packet is converted to a stored
    message (and the sequence state to a store record) only when the batch is formed."""

    queue: str
    key: SequenceKey
    position: tuple[TxSequenceId, int]
    packet: UserMessage
    state: IncomingSequenceSnapshot
    #: RemoteQMAddress of the session it came on, and whether that peer is the sender QM
    #: (DirectFormatSession): where its FinalAcks go (MS-MQQB 3.1.7.17).
    peer: str = ""
    direct: bool = False


def session_key_form(destination: str) -> str:
    """The session's form of a stored IncomingTransactionalTransferInfo.FormatName."""
    # The store lower-cases IncomingTransactionalTransferInfo.FormatName; the session's
    # key spells the prefix upper-case ("DIRECT=tcp:..."): restore that form.
    prefix, sep, rest = destination.partition("=")
    return prefix.upper() + sep + rest if sep else destination
