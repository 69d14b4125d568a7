"""The checker: an oracle of what each flow committed, stored, released and consumed.

It is fed by the simulator at the instants things become durable (a commit returned, a
store operation ran) and fails the run at the first broken invariant (DESIGN 1, 3, 4, 7):

* **exactly-once / in-order** (1): the destination stores a flow's committed messages in
  commit order, each once — checked at every durable accept;
* **release-after-durable** (3, 2): a message leaves the sender's outgoing queue only
  after it is durable at the destination (the OrderAck came after the store);
* **committed-receive** (7): a committed receive takes a message that is durable at the
  destination and not yet taken by committed work;
* **sequence-state** (4): after a restart, the store holds exactly the state the oracle
  saw become durable (checked by the simulator with the oracle's data);
* at the end, **drained**: every committed message stored once, in order, and consumed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openmsmq.store.records import MessageRecord

from .model import SimFailure


@dataclass
class Flow:
    """One application stream: transactions committed at ``src`` for ``queue`` at ``dst``."""

    name: str
    src: str
    dst: str
    #: Path of the destination queue at ``dst`` (``private$\\q1``).
    queue: str
    #: Format name the sender uses (``DIRECT=TCP:<dst address>\\PRIVATE$\\q1``).
    format_name: str
    #: Bodies committed at the sender, in commit order.
    expected: list[bytes] = field(default_factory=list)
    #: Body -> position in ``expected``.
    index: dict[bytes, int] = field(default_factory=dict)
    #: How many of ``expected`` are durable at the destination (always a prefix).
    arrived: int = 0
    #: Durable at the destination and not taken by committed work.
    present: set[bytes] = field(default_factory=set)
    #: Taken by committed work: body -> LookupIdentifier at the destination.
    consumed: dict[bytes, int] = field(default_factory=dict)
    #: Deleted from the sender's outgoing queue (OrderAck'ed).
    released: set[bytes] = field(default_factory=set)
    #: Sequence numbers handed out to bodies for this flow (committed or not).
    next_body: int = 0

    def new_body(self, tx: int) -> bytes:
        """A body unique in the run that names its flow."""
        self.next_body += 1
        return f"{self.name}:{tx}:{self.next_body}".encode()


def flow_of(body: bytes) -> str:
    """The flow name a body belongs to."""
    return body.split(b":", 1)[0].decode()


class Oracle:
    """What must be true of every flow; each method fails the run on a violation."""

    def __init__(self, flows: list[Flow], check_release: bool = True) -> None:
        self.flows = {f.name: f for f in flows}
        self.check_release = check_release

    def committed(self, flow: Flow, bodies: list[bytes]) -> None:
        """The sender's transaction committed these bodies (in this order)."""
        for b in bodies:
            flow.index[b] = len(flow.expected)
            flow.expected.append(b)

    def stored(self, node: str, messages: tuple[MessageRecord, ...] | list[MessageRecord]) -> None:
        """An accept batch made ``messages`` durable at ``node``, in this order."""
        for m in messages:
            flow = self.flows.get(flow_of(m.body))
            if flow is None:
                # Only the byzantine peer (tests/sim/byzantine.py) sends such bodies.
                raise SimFailure("forged", f"{m.body!r} from no application stored at {node}")
            if flow.dst != node:
                raise SimFailure("routing", f"{m.body!r} stored at {node}, destination {flow.dst}")
            pos = flow.index.get(m.body)
            if pos is None:
                raise SimFailure("exactly-once", f"{m.body!r} stored at {node} but never committed")
            if pos < flow.arrived:
                raise SimFailure("exactly-once", f"{m.body!r} stored twice at {node} ({flow.name} #{pos})")
            if pos != flow.arrived:
                missing = flow.expected[flow.arrived]
                raise SimFailure(
                    "in-order", f"{m.body!r} stored at {node} before {missing!r} ({flow.name} #{pos})"
                )
            flow.arrived += 1
            flow.present.add(m.body)

    def released(self, flow: Flow, bodies: list[bytes]) -> None:
        """These bodies left the sender's outgoing queue."""
        for b in bodies:
            pos = flow.index.get(b)
            if self.check_release and (pos is None or pos >= flow.arrived):
                raise SimFailure(
                    "release-after-durable",
                    f"{b!r} released by {flow.src} before it was durable at {flow.dst}",
                )
            if b in flow.released:
                raise SimFailure("release-after-durable", f"{b!r} released twice by {flow.src}")
            flow.released.add(b)

    def consumed(self, flow: Flow, messages: list[MessageRecord], how: str) -> None:
        """Committed work at the destination took these messages."""
        for m in messages:
            if m.body in flow.consumed:
                raise SimFailure("committed-receive", f"{m.body!r} delivered twice to committed work ({how})")
            if m.body not in flow.present:
                raise SimFailure(
                    "committed-receive", f"{m.body!r} delivered to committed work but not durable ({how})"
                )
            flow.present.discard(m.body)
            flow.consumed[m.body] = m.lookup_id

    def all_consumed(self) -> bool:
        """Every committed message was taken by committed work."""
        return all(len(f.consumed) == len(f.expected) for f in self.flows.values())

    def final_check(self) -> int:
        """After draining: everything exactly once, in order. Returns messages checked."""
        total = 0
        for f in self.flows.values():
            if f.arrived != len(f.expected):
                raise SimFailure("drained", f"{f.name}: {f.arrived} of {len(f.expected)} stored")
            by_lookup = [b for b, _ in sorted(f.consumed.items(), key=lambda kv: kv[1])]
            if by_lookup != f.expected:
                raise SimFailure("in-order", f"{f.name}: destination LookupIdentifier order differs")
            if f.released != set(f.expected):
                raise SimFailure("drained", f"{f.name}: {len(f.expected) - len(f.released)} not released")
            total += len(f.expected)
        return total

    def summary(self) -> str:
        """One line per flow (for failure reports)."""
        return "; ".join(
            f"{f.name} {f.src}->{f.dst}: committed {len(f.expected)} stored {f.arrived} "
            f"consumed {len(f.consumed)} released {len(f.released)}"
            for f in self.flows.values()
        )
