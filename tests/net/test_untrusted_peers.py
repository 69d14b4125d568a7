"""Untrusted MS-MQQB peers on a real listener cannot take the memory or the connection places
that other QMs need.

The attacks as reproduced: 50 connections each sending the start of a 4 MiB packet before
any handshake held everything they sent (about 200 MB in 0.3 s, 4 GB at the default 1,000
connections); 20 idle connections from one address locked a legitimate QM out for the whole
Session Initialization Timer (60 s) with ``mqqb.max_connections`` 20.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import tracemalloc
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from openmsmq.config import load_config
from openmsmq.net import MQQBNode, NetConfig
from openmsmq.observability.metrics import Metrics
from openmsmq.qm.manager import QueueManager
from openmsmq.server.options import net_config
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import Transfer, TransferConfig
from openmsmq.wire.constants import PACKET_SIGNATURE, PACKET_VERSION
from tests.serve_proc import free_port

A, B = "127.0.0.1", "127.0.0.2"
#: Unknown hosts of the attacks.
STRANGERS = ("127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6")
Q = "private$\\orders"


class Node:
    """A queue manager with its MS-MQQB node on ``address`` and metrics of its own."""

    def __init__(self, root: Path, address: str, port: int, *, routes: tuple[tuple[str, str], ...] = (),
                 **net: Any) -> None:  # fmt: skip
        self.root, self.address, self.port, self.routes, self.net = root, address, port, routes, net
        self.metrics = Metrics()
        self.qm = QueueManager(root / address, integrity_check=False)
        self.node: MQQBNode | None = None

    async def start(self) -> Node:
        loop = asyncio.get_running_loop()
        transfer = Transfer(
            self.qm, TransferConfig(local_addresses=(self.address,), routes=self.routes), loop.time(),
            metrics=self.metrics,
        )  # fmt: skip
        cfg = NetConfig(host=self.address, port=self.port, backoff_min=0.05, backoff_max=0.2,
                        poll_interval=0.02, **self.net)  # fmt: skip
        self.node = MQQBNode(transfer, cfg)
        await self.node.start()
        return self

    async def stop(self) -> None:
        assert self.node is not None
        await self.node.stop()
        self.qm.close()

    def refused(self, rule: str) -> float:
        return self.metrics.registry.get_sample_value("openmsmq_refusals_total", {"rule": rule}) or 0

    def count(self) -> int:
        return self.qm.get_queue(Q).msg_count


def _send(qm: QueueManager, n: int) -> None:
    with qm.begin() as tx:
        qm.send_many(
            f"DIRECT=TCP:{B}\\PRIVATE$\\orders", [MessageRecord(body=b"m%d" % i) for i in range(n)], tx
        )


async def _until(pred: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def _closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True once the other side closed ``sock`` (EOF or reset); False if it stays open."""
    loop = asyncio.get_running_loop()
    try:
        data = await asyncio.wait_for(loop.sock_recv(sock, 100), timeout)
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return data == b""


async def _connect(host: str, port: int, source: str) -> socket.socket:
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    sock.bind((source, 0))
    await loop.sock_connect(sock, (host, port))
    return sock


def _run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 120))


def _queue_at_b(root: Path) -> None:
    qm = QueueManager(root / B, integrity_check=False)
    qm.create_queue(Q, transactional=True)
    qm.close()


# ---- packets before the handshake --------------------------------------------------------------


def test_a_large_packet_before_the_handshake_is_not_waited_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    #: A UserMessage BaseHeader declaring 4 MiB, then the first MiB of it.
    header = struct.pack("<BBHIII", PACKET_VERSION, 0, 0, PACKET_SIGNATURE, 4 << 20, 0)
    part = header + bytes((1 << 20) - len(header))

    async def main() -> None:
        _queue_at_b(tmp_path)
        b = await Node(tmp_path, B, port).start()
        loop = asyncio.get_running_loop()
        socks = [await _connect(B, port, STRANGERS[0]) for _ in range(50)]
        tracemalloc.start()
        try:
            for s in socks:
                # (B may close it while we are still sending)
                with contextlib.suppress(ConnectionResetError, BrokenPipeError, TimeoutError):
                    await asyncio.wait_for(loop.sock_sendall(s, part), 10)
            closed = [await _closed_by_peer(s) for s in socks]
            _now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            for s in socks:
                s.close()
        assert all(closed), f"{closed.count(False)} of 50 still open"
        # B holds at most a read's worth per connection, never the packets' 50 MiB.
        assert peak < 20 << 20, f"{peak:,} bytes"
        assert b.refused("mqqb.protocol") == 50
        # B keeps serving: a real QM's transfer goes through.
        a = await Node(tmp_path, A, port).start()
        _send(a.qm, 20)
        await _until(lambda: b.count() == 20, "the transfer")
        await a.stop()
        await b.stop()

    with caplog.at_level("WARNING", logger="openmsmq.transfer"):
        _run(main())
    lines = [r.getMessage() for r in caplog.records if "refused BaseHeader" in r.getMessage()]
    assert lines and "<= 1024 before the session is open" in lines[0], lines
    assert len(lines) <= 2  # the first, then one summary of the other 49


# ---- connection places --------------------------------------------------------------------------


def test_serve_gives_one_address_at_most_half_the_places() -> None:
    config = load_config(None, {}, {"mqqb.max_connections": 20}).config
    assert net_config(config).max_connections_per_address == 10
    config = load_config(None, {}, {}).config  # 1,000 places: the key's 64
    assert net_config(config).max_connections_per_address == 64


def test_idle_connections_from_one_address_do_not_lock_out_a_qm(tmp_path: Path) -> None:
    port = free_port()

    async def main() -> None:
        _queue_at_b(tmp_path)
        b = await Node(tmp_path, B, port, max_connections=20, max_connections_per_address=10).start()
        assert b.node is not None
        idle = [await _connect(B, port, STRANGERS[0]) for _ in range(20)]
        await _until(lambda: b.refused("mqqb.max_connections_per_address") == 10, "10 refusals")
        assert b.node.per_address == {STRANGERS[0]: 10}
        a = await Node(tmp_path, A, port).start()  # an unknown QM: no route names it
        _send(a.qm, 30)
        await _until(lambda: b.count() == 30, "the transfer past the idle connections")
        for s in idle:
            s.close()
        await a.stop()
        await b.stop()

    _run(main())


def test_a_configured_peer_gets_in_when_unknown_ones_hold_every_place(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Six places, taken by idle connections of three unknown hosts (two each, within the
    per-address bound): A, the next hop of one of B's static routes, is let in by closing
    one of them; another unknown host is still refused."""
    port = free_port()

    async def main() -> None:
        _queue_at_b(tmp_path)
        b = await Node(
            tmp_path, B, port, routes=(("10.9.9.9", A),), max_connections=6, max_connections_per_address=2
        ).start()
        assert b.node is not None
        idle = [await _connect(B, port, host) for host in STRANGERS[:3] for _ in range(2)]
        await _until(lambda: len(b.node.transports) == 6, "six idle connections")  # type: ignore[union-attr]
        late = await _connect(B, port, STRANGERS[3])
        assert await _closed_by_peer(late)
        assert b.refused("mqqb.max_connections") == 1
        a = await Node(tmp_path, A, port).start()
        _send(a.qm, 30)
        await _until(lambda: b.count() == 30, "the configured peer's transfer")
        assert sum([await _closed_by_peer(s, 0.5) for s in idle]) >= 1
        for s in [*idle, late]:
            s.close()
        await a.stop()
        await b.stop()

    with caplog.at_level("WARNING", logger="openmsmq.net"):
        _run(main())
    assert any(f"to let in {A}, a configured peer" in r.getMessage() for r in caplog.records)


def test_intermediate_hops_and_pinned_peers_count_as_configured_peers(tmp_path: Path) -> None:
    """The peers the trust settings name are let in ahead of unknown ones like route hops:
    an intermediate hop by address or network, a peer within the networks its GUID is
    pinned to; a stranger is not."""
    import uuid

    from openmsmq.transfer.trust import TrustConfig

    qm = QueueManager(tmp_path / "qm", integrity_check=False)
    try:
        trust = TrustConfig(
            intermediate_hops=("127.0.0.7", "10.1.0.0/16"),
            pinned=((uuid.uuid4(), ("192.0.2.8/32",)),),
        )
        transfer = Transfer(qm, TransferConfig(local_addresses=(B,), trust=trust), 0.0)
        assert transfer.known_peer("127.0.0.7")
        assert transfer.known_peer("10.1.44.3")
        assert transfer.known_peer("192.0.2.8")
        assert not transfer.known_peer("192.0.2.9")
        assert not transfer.known_peer(STRANGERS[0])
    finally:
        qm.close()
