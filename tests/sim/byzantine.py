"""The byzantine peer of the simulation: a host (M, 127.0.0.9) that any QM lets connect
(it is on an allowed network) and that lies, as docs/security.md's threat model allows a
peer to. It is built from the project's own Session and codecs and opens its sessions
through the simulated network (so they are cut, stalled and partitioned like the rest).

What it does, each act on a new session to a random running QM:

* **forged-order-ack** -- an OrderAck releasing a sequence the QM sends to someone else,
  through the last number the QM's store assigned in it, claiming to come from that
  sequence's destination QM;
* **forged-final-ack** -- a negative FinalAck for the first message of such a sequence;
* **spoofed-source** -- a transactional message "from" a flow's sender into its queue
  (the next number of the sender's incoming sequence there), as a relay for a third host,
  or an OrderAck "from" a destination passing through the hop;
* **stolen-guid** -- any of the above on a session that claims another QM's GUID (the
  QMs of the simulation pin each other's GUIDs to their addresses, ``allowed_peers``);
* **implausible** -- as itself, a message starting a sequence whose TxSequenceID lies
  far ahead of every clock;
* **replay** -- bytes a QM sent on a real link, sent again on its own session;
* **own** -- as itself, a plausible message to a queue that does not exist (it creates
  an incoming sequence: the QMs' cap on them is exercised).

None may break an invariant: the checker sees no forged body stored, no message released
before it is durable, lost or delivered twice.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from openmsmq.protocol.events import Role
from openmsmq.protocol.incoming import SequenceKey
from openmsmq.protocol.session import Session
from openmsmq.wire.acks import FinalAck, FinalAckBody, OrderAck, OrderAckBody
from openmsmq.wire.constants import DeliveryMode, MessageClass
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.message import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

from .network import End, Link

if TYPE_CHECKING:
    from .world import SimNode, World

__all__ = ["ACTS", "ADDRESS", "NAME", "Byzantine"]

NAME = "M"
ADDRESS = "127.0.0.9"
ACTS = (
    "forged-order-ack",
    "forged-final-ack",
    "spoofed-source",
    "stolen-guid",
    "implausible",
    "replay",
    "own",
)
#: Body prefix of what it forges (a body the checker finds stored anywhere is a finding).
FORGED = b"X:"
#: Body prefix of its own plausible messages to queues that do not exist (its business).
OWN = b"Y:"


class _Conn:
    """One session of the byzantine peer and what it sends once the session is open."""

    def __init__(
        self, session: Session, link: Link | None, send: list[UserMessage | OrderAck | FinalAck | bytes]
    ):
        self.session = session
        self.link = link
        self.send = send


class Byzantine:
    """The lying peer of one simulation run (see the module docstring)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.rng = world.rng
        self._conns: dict[int, _Conn] = {}
        self._next_cid = 1
        #: Bytes QMs wrote on real links lately (replay material).
        self.captured: deque[bytes] = deque(maxlen=32)
        self._message_id = 0

    # ------------------------------------------------------------------ network

    def captures(self, data: bytes) -> None:
        """A QM wrote ``data`` on a real link (the byzantine peer sees it: a worst case)."""
        if self.rng.random() < 0.05:
            self.captured.append(data)

    def deliver(self, end: End, data: bytes) -> None:
        conn = self._conns.get(end.cid)
        if conn is None:
            return
        now = self.world.loop.now
        conn.session.receive_data(data, now)
        conn.session.pending_events.clear()
        conn.session.flush_acknowledgments(now)
        if conn.session.is_open and conn.send:
            for item in conn.send:
                if isinstance(item, bytes):
                    conn.session.flush_acknowledgments(now)
                    self._write(conn)
                    if conn.link is not None:
                        self.world.net.send(conn.link, 0, item)
                elif conn.session.is_open:
                    conn.session.send_user_message(item, now)
            conn.send = []
        self._write(conn)

    def lost(self, end: End) -> None:
        self._conns.pop(end.cid, None)

    def _write(self, conn: _Conn) -> None:
        data = conn.session.data_to_send()
        if data and conn.link is not None:
            self.world.net.send(conn.link, 0, data)

    def _open(
        self, target: SimNode, guid: uuid.UUID, send: list[UserMessage | OrderAck | FinalAck | bytes]
    ) -> None:
        world = self.world
        t = target.transfer
        if t is None or world.net.partitioned(NAME, target.name, world.loop.now):
            return
        cid = self._next_cid
        self._next_cid += 1
        now = world.loop.now
        session = Session(Role.INITIATOR, guid, now, peer=target.address)
        conn = _Conn(session, None, send)
        self._conns[cid] = conn
        their = t.connection_made(ADDRESS, Role.ACCEPTOR, now)
        link = world.net.open_link(End(NAME, 0, cid), End(target.name, target.epoch, their))
        conn.link = link
        target.conns[their] = (link, 1)
        self._write(conn)
        world.pump_node(target)

    # ------------------------------------------------------------------ acts

    def act(self) -> None:
        """One lie, chosen at random."""
        world = self.world
        up = [n for n in world.nodes.values() if n.transfer is not None and n.qm is not None]
        if not up:
            return
        kind = self.rng.choice(ACTS)
        world.stats.faults[f"byzantine-{kind}"] += 1
        world.trace(world.loop.now, "M %s", kind)
        acts: dict[str, Callable[[list[SimNode]], None]] = {
            "forged-order-ack": self._forged_ack,
            "forged-final-ack": self._forged_ack,
            "spoofed-source": self._spoofed,
            "stolen-guid": self._stolen,
            "implausible": self._implausible,
            "replay": self._replay,
            "own": self._own,
        }
        if kind == "forged-final-ack":
            self._forged_ack(up, final=True)
        else:
            acts[kind](up)

    def _guid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def _msg_id(self) -> int:
        self._message_id += 1
        return self._message_id

    def _forged_ack(self, up: list[SimNode], final: bool = False, guid: uuid.UUID | None = None) -> None:
        sender = self.rng.choice(up)
        assert sender.transfer is not None and sender.qm is not None
        queues = [t for t in sender.transfer.outgoing.values() if t.seq.current_sequence_id is not None]
        if not queues:
            return
        t = self.rng.choice(queues)
        sid = t.seq.current_sequence_id
        assert sid is not None
        state = sender.qm.outgoing_sequence(t.handle)
        top = max(1, state.next_tx_sequence_number - 1)
        dest = next((n for n in self.world.nodes.values() if n.address == t.host), None)
        source = dest.guid if dest is not None and dest.guid is not None else self._guid()
        packet: OrderAck | FinalAck
        if final:
            body = FinalAckBody(sid, 1, 0, sender.guid or self._guid(), 1)
            packet = FinalAck.build(
                body, MessageClass.NACK_RECEIVE_REJECTED, source_qm=source,
                destination_queue=PrivateQueueFormatNameId(4), destination_qm=sender.guid,
            )  # fmt: skip
        else:
            packet = OrderAck.build(
                OrderAckBody.for_number(sid, top), source_qm=source,
                destination_queue=PrivateQueueFormatNameId(4), destination_qm=sender.guid,
            )  # fmt: skip
        self._open(sender, guid or self._guid(), [packet])

    def _spoofed(self, up: list[SimNode], guid: uuid.UUID | None = None) -> None:
        world = self.world
        flow = self.rng.choice(world.flows)
        src, dst = world.nodes[flow.src], world.nodes[flow.dst]
        if src.guid is None:
            return
        how = self.rng.random()
        if how < 0.6:
            # Into the flow's queue at its destination, as the flow's sender, next in line.
            target = dst
            if target.transfer is None:
                return
            seq = target.transfer.incoming.find(
                SequenceKey(src.guid, f"DIRECT={flow.format_name[7:].lower()}")
            )
            sid, number = seq.durable_position if seq is not None else (TxSequenceId.from_int(0), 0)
            if sid.value == 0:
                sid = TxSequenceId.from_int((int(world.loop.now) << 32) | 1)
            packet: UserMessage | OrderAck = self._message(
                flow.format_name[7:], FORGED + b"spoofed", sid, number + 1, number, src.guid
            )
        elif how < 0.8:
            # Through the hop B to C's queue, as A (B relays along its route to C).
            target = world.nodes["B"]
            sid = TxSequenceId.from_int((int(world.loop.now) << 32) | 7)
            packet = self._message(world.flows[1].format_name[7:], FORGED + b"relayed", sid, 1, 0, src.guid)
        else:
            # An OrderAck "from" C for A's sequence to C, handed to the hop B to pass back.
            target = world.nodes["B"]
            a = world.nodes["A"]
            c = world.nodes["C"]
            queues = (
                [] if a.transfer is None else [t for t in a.transfer.outgoing.values() if t.host == c.address]
            )
            if not queues or a.guid is None or c.guid is None or queues[0].seq.current_sequence_id is None:
                return
            sid = queues[0].seq.current_sequence_id
            packet = OrderAck.build(
                OrderAckBody.for_number(sid, 0xFFFF), source_qm=c.guid,
                destination_queue=PrivateQueueFormatNameId(4), destination_qm=a.guid,
            )  # fmt: skip
        if target.transfer is not None:
            self._open(target, guid or self._guid(), [packet])

    def _stolen(self, up: list[SimNode]) -> None:
        victim = self.rng.choice(list(self.world.nodes.values()))
        if victim.guid is None:
            return
        if self.rng.random() < 0.5:
            self._forged_ack(up, final=self.rng.random() < 0.3, guid=victim.guid)
        else:
            self._spoofed(up, guid=victim.guid)

    def _implausible(self, up: list[SimNode]) -> None:
        flow = self.rng.choice(self.world.flows)
        dst = self.world.nodes[flow.dst]
        if dst.transfer is None:
            return
        far = TxSequenceId.from_int(0xFFFFFFFF_00000001 - self.rng.randrange(1 << 20))
        me = self._guid()  # as itself: only the TxSequenceID is a lie
        self._open(dst, me, [self._message(flow.format_name[7:], FORGED + b"far", far, 1, 0, me)])

    def _replay(self, up: list[SimNode]) -> None:
        if not self.captured:
            return
        self._open(self.rng.choice(up), self._guid(), [self.rng.choice(self.captured)])

    def _own(self, up: list[SimNode]) -> None:
        target = self.rng.choice(up)
        sid = TxSequenceId.from_int((int(self.world.loop.now) << 32) | 1)
        name = f"TCP:{target.address}\\private$\\nowhere{self.rng.randrange(100)}"
        me = self._guid()
        self._open(target, me, [self._message(name, OWN + b"own", sid, 1, 0, me)])

    def _message(
        self, direct: str, body: bytes, sid: TxSequenceId, number: int, previous: int, source: uuid.UUID
    ) -> UserMessage:
        return UserMessage.build(
            source_qm=source, message_id=self._msg_id(),
            destination_queue=DirectQueueFormatName(direct), body=body, sent_time=int(self.world.loop.now),
            delivery_mode=DeliveryMode.RECOVERABLE, transaction=TransactionHeader(sid, number, previous),
        )  # fmt: skip
