"""A large read reaches the protocol in slices, each slice's output written before the
next is processed (a SessionAck due mid-read leaves at once: MS-MQQB 3.1.5.8.7)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openmsmq.net.mqqb import NetConfig, _MQQBProtocol
from openmsmq.protocol.events import Role


@dataclass
class _Transfer:
    log: list[Any]
    reading_wanted: bool = True

    def data_received(self, cid: int, data: bytes, now: float) -> None:
        self.log.append(("feed", len(data)))


@dataclass
class _Node:
    config: NetConfig
    log: list[Any] = field(default_factory=list)
    _reading_paused: bool = False

    def __post_init__(self) -> None:
        self.transfer = _Transfer(self.log)

    def now(self) -> float:
        return 0.0

    def write_pending(self) -> None:
        self.log.append("write")

    def connected_ok(self, peer: str) -> None:
        pass

    def kick(self) -> None:
        self.log.append("kick")

    def read_done(self, read_at: float) -> None:
        pass


def _protocol(feed_bytes: int) -> tuple[_MQQBProtocol, list[Any]]:
    node = _Node(NetConfig(feed_bytes=feed_bytes))
    proto = _MQQBProtocol.__new__(_MQQBProtocol)  # no event loop needed for data_received
    proto.node, proto.role, proto.peer, proto.cid, proto.transport = node, Role.ACCEPTOR, "p", 1, None  # type: ignore[assignment]
    return proto, node.log


def test_a_large_read_is_fed_in_slices_with_a_write_after_each() -> None:
    proto, log = _protocol(8192)
    proto.data_received(b"x" * 20000)
    assert log == [("feed", 8192), "write", ("feed", 8192), "write", ("feed", 3616), "write", "kick"]


def test_a_small_read_or_slicing_off_feeds_once() -> None:
    proto, log = _protocol(8192)
    proto.data_received(b"x" * 8192)
    assert log == [("feed", 8192), "kick"]
    proto, log = _protocol(0)
    proto.data_received(b"x" * 20000)
    assert log == [("feed", 20000), "kick"]
