"""The MS-MQQB session as the transfer uses it, and the transfer's per-connection and
per-accepted-message records (see :mod:`openmsmq.transfer.engine`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from openmsmq.protocol.events import Role, TransactionalMessageAccepted
from openmsmq.protocol.incoming import SequenceKey
from openmsmq.protocol.session import Session
from openmsmq.transfer.acknowledgments import AckSession
from openmsmq.transfer.codec import split_direct
from openmsmq.transfer.state import hop_host
from openmsmq.transfer.trust import SessionTrust
from openmsmq.wire.ids import NULL_GUID
from openmsmq.wire.userheader import DirectQueueFormatName

__all__ = ["AcceptRoute", "Conn", "Pending", "TransferRouting", "ack_session_of", "session_key_form"]


class TransferRouting:
    """The transfer's :class:`~openmsmq.protocol.session.RoutingPolicy` for one session:
    the trust rules of its peer (docs/security.md), and a DIRECT=TCP: destination on
    another host taken as "not for this QM" (MS-MQQB 3.1.1.6.2): direct names carry a NULL
    QueueManagerAddress, so the GUID alone cannot tell an intermediate hop from the final
    destination."""

    def __init__(self, local_hosts: frozenset[str], trust: SessionTrust | None = None) -> None:
        self.local_hosts = local_hosts
        #: The QM's trust rules for this session; None trusts every claim.
        self.trust = trust
        self._null_seen: object = NULL_GUID
        # Direct name -> "another host" (a session carries few destinations; bounded).
        self._remote_names: dict[str, bool] = {}

    def identity_refusal(self, remote_qm: uuid.UUID) -> str | None:
        """The ``identity`` rule (transfer.trust.PeerTrust.identity_refusal)."""
        return None if self.trust is None else self.trust.identity_refusal(remote_qm)

    def source_refusal(self, source: uuid.UUID, remote_qm: uuid.UUID) -> str | None:
        """The ``source-qm`` rule: a peer speaks for itself (SourceQueueManager = the
        session's QM) unless it is a configured intermediate hop, which carries messages of
        QMs behind it (MS-MQQB 3.1.1.6.2). Without it a peer could send as any QM: move
        that QM's incoming sequences, get past a queue's allowed senders."""
        trust = self.trust
        if trust is None or source == remote_qm or trust.carries_others(remote_qm):
            return None
        return (
            f"SourceQueueManager {source} is not the session's QM {remote_qm}, and {trust.peer}"
            " is not a configured intermediate hop (mqqb.intermediate_hops, or a route's next hop)"
        )

    def forwards(self, destination: object, qm_address: uuid.UUID) -> bool | None:
        """A DIRECT=TCP: name of another host with a NULL QueueManagerAddress goes on
        (intermediate hop). The session asks only for a destination object it has not kept
        as local: a direct name found on this host is kept (False; the decoder shares
        direct-name objects), so this runs once per name, not per message."""
        if qm_address is not self._null_seen:
            if qm_address != NULL_GUID:
                return None  # a GUID of this QM: the final destination whatever the name
            self._null_seen = qm_address  # the decoder's shared NULL GUID: identity next time
        if not isinstance(destination, DirectQueueFormatName):
            return None
        remote = self._remote_names.get(destination.name)
        if remote is None:
            parts = split_direct(destination.name)
            remote = parts is not None and parts[0] not in self.local_hosts
            if len(self._remote_names) < 1024:
                self._remote_names[destination.name] = remote
        return remote


@dataclass(eq=False)
class Conn:
    """One TCP connection of the transfer and its session."""

    cid: int
    peer: str
    role: Role
    session: Session
    open: bool = False
    #: The peer's socket address (an IP; for an initiator, what ``peer`` resolved to).
    address: str = ""
    #: The QM GUID of the peer's TLS certificate (None: a plain connection).
    certified: uuid.UUID | None = None
    #: The session's QM GUID is more than the peer's claim (this QM dialled the address,
    #: a pin or a certificate binds it): only such sessions teach this QM where a QM is.
    verified: bool = False

    @property
    def remote_qm_address(self) -> str:
        """RemoteQMAddress (MS-MQQB 3.1.1.3.1): the peer's IP address."""
        return self.address or hop_host(self.peer)


def ack_session_of(conn: Conn, source_qm: uuid.UUID) -> AckSession:
    """The session ADM elements MS-MQQB 3.1.7.17 reads to address a transactional
    acknowledgment for a message of ``source_qm`` that came on ``conn``.

    DirectFormatSession is the session's (set by the first UserMessage with DQ 0x7 it
    received, 3.1.5.8.2), RemoteQMAddress its peer's address. Transactional
    acknowledgments are end to end (seed 003): they answer the QM at the other end of
    the sequence. When the session's peer is not that QM (the message came through an
    intermediate), the direct form would name the intermediate's order queue, where no
    sequence is processed, so the acknowledgment goes to ``PRIVATE=<source QM>\\00000004``
    whatever the session's DirectFormatSession (docs/conformance.md, seed 000)."""
    from_sender = conn.session.remote_qm == source_qm
    return AckSession(conn.session.direct_format_session and from_sender, conn.remote_qm_address, source_qm)


@dataclass(frozen=True, slots=True)
class AcceptRoute:
    """Where accepted messages go: their queue (a local path), their sequence and the
    session they came on. One value is shared by consecutive accepted messages of one
    stream, destination and connection; a message waits for its batch as ``(route,
    event)`` and its packet becomes a stored row only when the batch is stored."""

    queue: str
    key: SequenceKey
    #: RemoteQMAddress of the session it came on, and DirectFormatSession as
    #: :func:`ack_session_of` reads it: where its FinalAcks go (MS-MQQB 3.1.7.17).
    peer: str = ""
    direct: bool = False


#: An accepted message waiting for its accept batch.
Pending = tuple[AcceptRoute, TransactionalMessageAccepted]


def session_key_form(destination: str) -> str:
    """The session's form of a stored IncomingTransactionalTransferInfo.FormatName."""
    # The store lower-cases IncomingTransactionalTransferInfo.FormatName; the session's
    # key spells the prefix upper-case ("DIRECT=tcp:..."): restore that form.
    prefix, sep, rest = destination.partition("=")
    return prefix.upper() + sep + rest if sep else destination
