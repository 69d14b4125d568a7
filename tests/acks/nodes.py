"""A queue manager of the in-memory net with its acknowledgment listener attached."""

from __future__ import annotations

from openmsmq.transfer.ack_admin import attach_acknowledgments
from tests.transfer.harness import Net, Node


def acked_node(net: Net, address: str, **cfg: object) -> Node:
    """``net.add(address)`` with the acknowledgment listener attached as ``serve`` does."""
    node = net.add(address, **cfg)  # type: ignore[arg-type]
    attach_acknowledgments(node.qm, session_of=node.transfer.ack_session_for)
    return node
