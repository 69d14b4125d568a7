"""The MS-MQQB listener and connectors with real sockets on 127.0.0.1 / 127.0.0.2."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from openmsmq.net import MQQBNode, NetConfig, allow_networks
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import Transfer, TransferConfig

A, B, C = "127.0.0.1", "127.0.0.2", "127.0.0.3"
Q = "private$\\orders"
DEST_B = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"


def _free_port() -> int:
    # A port free on both addresses (MSMQ peers share one port on distinct IPs).
    for _ in range(50):
        with socket.socket() as s:
            s.bind((A, 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s2:
                s2.bind((B, port))
            return int(port)
        except OSError:
            continue
    raise RuntimeError("no free port")


class QM:
    """A queue manager with its transfer node on ``address``."""

    def __init__(
        self,
        root: Path,
        address: str,
        port: int,
        allow: list[str] | None = None,
        max_connections: int = 1000,
        routes: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.root, self.address, self.port, self.allow = root, address, port, allow
        self.max_connections, self.routes = max_connections, routes
        self.qm: QueueManager | None = None
        self.node: MQQBNode | None = None

    async def start(self) -> QM:
        self.qm = QueueManager(self.root / self.address, integrity_check=False)
        loop = asyncio.get_running_loop()
        config = TransferConfig(local_addresses=(self.address,), routes=self.routes)
        transfer = Transfer(self.qm, config, loop.time())
        allow = {} if self.allow is None else {"allow": allow_networks(self.allow)}
        cfg = NetConfig(
            host=self.address, port=self.port, backoff_min=0.05, backoff_max=0.2, poll_interval=0.02,
            max_connections=self.max_connections, **allow,  # type: ignore[arg-type]
        )  # fmt: skip
        self.node = MQQBNode(transfer, cfg)
        await self.node.start()
        return self

    async def stop(self) -> None:
        assert self.node is not None and self.qm is not None
        await self.node.stop()
        self.qm.close()


def _send(qm: QueueManager, n: int, prefix: str) -> None:
    tx = qm.begin()
    qm.send_many(DEST_B, [MessageRecord(body=f"{prefix}{i}".encode()) for i in range(n)], tx)
    tx.commit()


async def _wait_for(pred, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


def _outgoing(qm: QueueManager) -> int:
    return sum(r.msg_count for r in qm.list_queues(include_system=True) if r.queue_type == 4)


def _count(qm: QueueManager) -> int:
    return qm.get_queue(Q).msg_count


async def _closed_by_b(port: int) -> bool:
    """Connect to B from 127.0.0.3: True when B closes the connection without a word."""
    reader, writer = await asyncio.open_connection(B, port, local_addr=(C, 0))
    try:
        data = await asyncio.wait_for(reader.read(100), 10)
    except ConnectionResetError:
        data = b""
    writer.close()
    return data == b""


def _run(coro) -> None:  # type: ignore[no-untyped-def]
    asyncio.run(asyncio.wait_for(coro, 60))


def test_malformed_packet_closes_only_its_session(tmp_path: Path) -> None:
    port = _free_port()

    async def main() -> None:
        b = QM(tmp_path, B, port)
        qb = QueueManager(tmp_path / B, integrity_check=False)
        qb.create_queue(Q, transactional=True)
        qb.close()
        await b.start()
        a = await QM(tmp_path, A, port).start()
        assert a.qm is not None and b.qm is not None
        _send(a.qm, 300, "m")
        loop = asyncio.get_running_loop()
        # A misbehaving peer from 127.0.0.3 sends garbage while A transfers.
        reader, writer = await asyncio.open_connection(B, port, local_addr=(C, 0))
        writer.write(b"\x10\x00\x00\x00GARBAGE-GARBAGE-GARBAGE")
        await writer.drain()
        eof = await asyncio.wait_for(reader.read(100), 10)
        assert eof == b""  # B closed that session
        writer.close()
        _send(a.qm, 300, "n")
        await _wait_for(lambda: _count(b.qm) == 600 and _outgoing(a.qm) == 0)
        bodies = [m.body for m in b.qm.peek_range(Q, 0, 1000)]
        assert bodies == [f"m{i}".encode() for i in range(300)] + [f"n{i}".encode() for i in range(300)]
        assert loop.time() > 0
        await a.stop()
        await b.stop()

    _run(main())


def test_allowlist_refuses_other_peers(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = _free_port()

    async def main() -> None:
        b = await QM(tmp_path, B, port, allow=[f"{A}/32"]).start()
        assert await _closed_by_b(port)
        # An allowed peer still gets through.
        r2, w2 = await asyncio.open_connection(B, port, local_addr=(A, 0))
        assert not r2.at_eof()
        w2.close()
        await b.stop()

    with caplog.at_level("WARNING", logger="openmsmq.net"):
        _run(main())
    assert any("refused" in r.message and C in r.message for r in caplog.records)


def test_a_connection_to_a_refused_peer_is_dropped_whatever_name_the_route_gives_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """B refuses A's address (as after a store of A's messages failed) while B's route
    names A ``localhost:<port>``. B's connector reaches 127.0.0.1 under that name; the
    connection is dropped at once and nothing goes to A until the refusal ends, then
    B's message does (the connector's back-off between the tries)."""
    port = _free_port()

    async def main() -> None:
        a = await QM(tmp_path, A, port).start()
        assert a.qm is not None
        a.qm.create_queue(Q, transactional=True)
        b = await QM(tmp_path, B, port, routes=((A, f"localhost:{port}"),)).start()
        assert b.node is not None and b.qm is not None
        loop = asyncio.get_running_loop()
        until = loop.time() + 1.0
        b.node.transfer.backoff.refuse({A}, until)
        tx = b.qm.begin()
        b.qm.send_many(f"DIRECT=TCP:{A}\\PRIVATE$\\orders", [MessageRecord(body=b"b0")], tx)
        tx.commit()
        await _wait_for(lambda: any("connection to 127.0.0.1" in r.getMessage() for r in caplog.records))
        await asyncio.sleep(0.3)
        assert _count(a.qm) == 0 and loop.time() < until
        await _wait_for(lambda: _count(a.qm) == 1)
        assert loop.time() >= until
        await b.stop()
        await a.stop()

    with caplog.at_level("WARNING", logger="openmsmq.net"):
        _run(main())


def test_connections_beyond_max_connections_are_closed_and_the_qm_keeps_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With mqqb.max_connections 3, idle connections take the three places; the next is
    closed at once (the process never runs out of file descriptors, which made every
    accept fail), the refusals are logged once, and once the idle ones go a peer's
    transfer goes through."""
    port = _free_port()

    async def main() -> None:
        qb = QueueManager(tmp_path / B, integrity_check=False)
        qb.create_queue(Q, transactional=True)
        qb.close()
        b = await QM(tmp_path, B, port, max_connections=3).start()
        assert b.node is not None and b.qm is not None
        idle = [await asyncio.open_connection(B, port, local_addr=(C, 0)) for _ in range(3)]
        await _wait_for(lambda: len(b.node.transports) == 3)  # type: ignore[union-attr]
        for _ in range(4):
            assert await _closed_by_b(port)
        assert len(b.node.transports) == 3
        for _, w in idle:
            w.close()
        await _wait_for(lambda: not b.node.transports)  # type: ignore[union-attr]
        a = await QM(tmp_path, A, port).start()
        assert a.qm is not None
        _send(a.qm, 50, "m")
        await _wait_for(lambda: _count(b.qm) == 50 and _outgoing(a.qm) == 0)
        await a.stop()
        await b.stop()

    with caplog.at_level("WARNING", logger="openmsmq.net"):
        _run(main())
    refused = [r.getMessage() for r in caplog.records if "max_connections" in r.getMessage()]
    assert len(refused) == 2 and all(C in m for m in refused)  # the first, and at the stop:
    assert refused[1].startswith("3 more in")  # the other three summed up


def test_the_connection_cap_follows_the_open_file_limit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """serve raises its soft open-file limit toward the hard one for mqqb.max_connections
    plus a reserve, and lowers the cap (with a warning) when the hard limit is too low."""
    import resource

    from openmsmq.server import options as server

    limits = {"soft": 1024, "hard": 4096}
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (limits["soft"], limits["hard"]))

    def setrlimit(_r: int, value: tuple[int, int]) -> None:
        limits["soft"] = value[0]

    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    assert server.connection_limit(1000) == 1000 and limits["soft"] == 1000 + server.FD_RESERVE
    limits.update(soft=1024, hard=1024)
    with caplog.at_level("WARNING", logger="openmsmq.serve"):
        assert server.connection_limit(1000) == 1024 - server.FD_RESERVE
    assert any("lowered to 768" in r.getMessage() for r in caplog.records)


def test_reconnect_after_peer_restart(tmp_path: Path) -> None:
    port = _free_port()

    async def main() -> None:
        qb = QueueManager(tmp_path / B, integrity_check=False)
        qb.create_queue(Q, transactional=True)
        qb.close()
        b = await QM(tmp_path, B, port).start()
        a = await QM(tmp_path, A, port).start()
        assert a.qm is not None and b.qm is not None
        _send(a.qm, 100, "x")
        await _wait_for(lambda: _count(b.qm) == 100 and _outgoing(a.qm) == 0)
        await b.stop()
        _send(a.qm, 100, "y")  # B is down: they wait in A's outgoing queue
        await asyncio.sleep(0.3)
        assert _outgoing(a.qm) == 100
        b = await QM(tmp_path, B, port).start()
        await _wait_for(lambda: _count(b.qm) == 200 and _outgoing(a.qm) == 0)
        bodies = [m.body for m in b.qm.peek_range(Q, 0, 1000)]
        assert bodies == [f"x{i}".encode() for i in range(100)] + [f"y{i}".encode() for i in range(100)]
        await a.stop()
        await b.stop()

    _run(main())
