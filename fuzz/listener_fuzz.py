"""Mutation fuzzing of the MS-MQQB decoder and session through a real listener.

Run: ``make fuzz`` (after the wire fuzzer), or
``.venv/bin/python fuzz/listener_fuzz.py --seconds 60 [--seed N]``.

A queue manager with its MS-MQQB node listens on 127.0.0.1 (in this process, on its own
event loop thread). Each round builds a valid client stream with the project's codecs
(EstablishConnection, ConnectionParameters, then transactional, recoverable and express
UserMessages, OrderAcks, FinalAcks and SessionAcks, under the session's own GUID or
another QM's), mutates it (bit flips, inserted, deleted and duplicated bytes, splices,
truncation, PacketSize fields set to extremes) and writes it over a real TCP connection
in random pieces from a random 127.0.0.x address, reading what comes back. It fails on:

* an exception that is not a typed protocol error: the node logs any other as
  ``internal error`` (and closes that session), which the fuzzer counts as a failure;
* a QM that stops serving: every ``check_every`` rounds a well-behaved peer must open a
  session and get a transactional message stored, once;
* memory that grows: the Python heap (tracemalloc) after the rounds stays within
  ``memory_bound`` of what it was after the warm-up rounds, and the incoming sequences
  within the configured cap.

The seed is printed; ``--seed`` replays the same mutations (timing of real sockets aside).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import socket
import struct
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openmsmq.net import MQQBNode, NetConfig
from openmsmq.protocol.incoming import SequenceKey
from openmsmq.qm.manager import QueueManager
from openmsmq.transfer.engine import Transfer, TransferConfig
from openmsmq.transfer.trust import TrustConfig
from openmsmq.wire.acks import FinalAck, FinalAckBody, OrderAck, OrderAckBody
from openmsmq.wire.constants import DeliveryMode, MessageClass
from openmsmq.wire.headers import (
    ConnectionParametersHeader,
    EstablishConnectionHeader,
    SessionHeader,
    TransactionHeader,
)
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.message import UserMessage
from openmsmq.wire.packets import ConnectionParameters, EstablishConnection, SessionAck
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

__all__ = ["FuzzResult", "Listener", "fuzz", "main"]

HOST = "127.0.0.1"
QUEUE = "private$\\fuzz"
#: Incoming sequences the fuzzed QM keeps at most (each round may start one).
SEQUENCE_CAP = 500


class Listener:
    """A queue manager and its MS-MQQB node on 127.0.0.1, on an event loop thread."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loop = asyncio.new_event_loop()
        self.errors: list[logging.LogRecord] = []
        self._thread = threading.Thread(target=self.loop.run_forever, name="fuzz-listener", daemon=True)
        self.qm: QueueManager | None = None
        self.node: MQQBNode | None = None
        self.port = 0

    def start(self) -> Listener:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        return self

    async def _start(self) -> None:
        self.qm = QueueManager(self.root, integrity_check=False)
        self.qm.create_queue(QUEUE, transactional=True)
        config = TransferConfig(
            local_addresses=(HOST,), trust=TrustConfig(max_incoming_sequences=SEQUENCE_CAP)
        )
        transfer = Transfer(self.qm, config, self.loop.time())
        self.node = MQQBNode(transfer, NetConfig(host=HOST, port=0, poll_interval=0.02, max_connections=200))
        await self.node.start()
        self.port = self.node.address[1]

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the loop thread (the transfer is not thread-safe)."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def stats(self) -> dict[str, int]:
        assert self.node is not None
        node = self.node
        return self.call(
            lambda: {
                "connections": len(node.transports),
                "sequences": len(node.transfer.incoming),
                "unstored": node.transfer.unstored_bytes,
            }
        )

    def stored(self) -> list[bytes]:
        assert self.qm is not None
        qm = self.qm
        return self.call(lambda: [m.body for m in qm.peek_range(QUEUE, 0, 1_000_000)])

    def stop(self) -> None:
        assert self.node is not None and self.qm is not None
        asyncio.run_coroutine_threadsafe(self.node.stop(flush_timeout=2.0), self.loop).result(30)
        self.call(self.qm.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


class _ErrorLog(logging.Handler):
    """Collects the node's records of unexpected exceptions (``internal error``)."""

    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None or "internal error" in record.getMessage():
            self.into.append(record)


# ---------------------------------------------------------------------- the streams


def _stream(rng: random.Random, server: uuid.UUID, now: int) -> list[bytes]:
    """A valid client stream: handshake, then user messages of every kind (packets)."""
    guid = uuid.UUID(int=rng.getrandbits(128), version=4)
    other = uuid.UUID(int=rng.getrandbits(128), version=4)
    packets = [
        EstablishConnection(
            EstablishConnectionHeader(
                client_guid=guid, server_guid=rng.choice([server, uuid.UUID(int=0)]),
                timestamp=rng.getrandbits(32), operating_system=0x10,
            )
        ).encode(),
        ConnectionParameters(
            ConnectionParametersHeader(recoverable_ack_timeout=500, ack_timeout=20000, window_size=64)
        ).encode(),
    ]  # fmt: skip
    sid = TxSequenceId.from_int((now << 32) | rng.randrange(1, 1000))
    dest = DirectQueueFormatName(f"TCP:{HOST}\\{QUEUE}")
    sent = 0
    for n in range(1, rng.randint(1, 8)):
        kind = rng.random()
        source = guid if rng.random() < 0.8 else other
        sent += 1
        session = None
        if rng.random() < 0.2:
            session = SessionHeader(
                ack_sequence_number=0, recoverable_msg_ack_seq_number=0, recoverable_msg_ack_flags=0,
                user_msg_sequence_number=sent, recoverable_msg_seq_number=rng.randrange(0, sent + 1),
                window_size=64,
            )  # fmt: skip
        if kind < 0.5:
            packet: Any = UserMessage.build(
                source_qm=source, message_id=n, destination_queue=dest,
                body=rng.randbytes(rng.randint(0, 64)), sent_time=now, delivery_mode=DeliveryMode.RECOVERABLE,
                session=session,
                transaction=TransactionHeader(sid, n, n - 1),
            )  # fmt: skip
        elif kind < 0.65:
            packet = UserMessage.build(
                source_qm=source, message_id=n, destination_queue=dest, body=b"plain", sent_time=now,
                delivery_mode=rng.choice([DeliveryMode.RECOVERABLE, DeliveryMode.EXPRESS]), session=session,
            )  # fmt: skip
        elif kind < 0.8:
            packet = OrderAck.build(
                OrderAckBody.for_number(sid, rng.randrange(1, 10)), source_qm=source,
                destination_queue=PrivateQueueFormatNameId(4), destination_qm=server,
            )  # fmt: skip
        elif kind < 0.9:
            packet = FinalAck.build(
                FinalAckBody(sid, 1, 0, server, n), MessageClass.ACK_RECEIVE, source_qm=source,
                destination_queue=PrivateQueueFormatNameId(4), destination_qm=server,
            )  # fmt: skip
        else:
            sent -= 1
            packet = SessionAck(
                SessionHeader(
                    ack_sequence_number=rng.getrandbits(16), recoverable_msg_ack_seq_number=0,
                    recoverable_msg_ack_flags=rng.getrandbits(32), user_msg_sequence_number=sent,
                    recoverable_msg_seq_number=0, window_size=rng.randint(0, 0xFFFF),
                )
            )  # fmt: skip
        packets.append(packet.encode())
    return packets


def _mutate(rng: random.Random, packets: list[bytes], corpus: list[bytes]) -> bytes:
    """One mutated stream (rarely left valid)."""
    packets = list(packets)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(packets))
        p = bytearray(packets[i])
        op = rng.randrange(9)
        if op == 0 and p:  # flip bits
            for _ in range(rng.randint(1, 8)):
                p[rng.randrange(len(p))] ^= 1 << rng.randrange(8)
        elif op == 1:  # insert bytes
            at = rng.randrange(len(p) + 1)
            p[at:at] = rng.randbytes(rng.randint(1, 32))
        elif op == 2 and p:  # delete bytes
            at = rng.randrange(len(p))
            del p[at : at + rng.randint(1, 32)]
        elif op == 3 and len(p) >= 12:  # PacketSize (BaseHeader +8, u32) to an extreme
            struct.pack_into(
                "<I", p, 8, rng.choice([0, 1, 15, 16, 0x400000, 0x400001, 0x7FFFFFFF, 0xFFFFFFFF])
            )
        elif op == 4 and len(p) > 4:  # truncate
            del p[rng.randrange(1, len(p)) :]
        elif op == 5:  # duplicate a packet
            packets.insert(i, bytes(p))
        elif op == 6 and corpus:  # splice another stream's packet in
            packets.insert(i, rng.choice(corpus))
        elif op == 7 and p:  # overwrite a 16-bit or 32-bit field with an extreme
            at = rng.randrange(max(1, len(p) - 3))
            fmt = rng.choice(["<H", "<I"])
            if at + struct.calcsize(fmt) <= len(p):
                struct.pack_into(
                    fmt,
                    p,
                    at,
                    rng.choice([0, 1, 0xFFFF, 0xFFFFFFFF & ((1 << (8 * struct.calcsize(fmt))) - 1)]),
                )
        elif op == 8:  # drop a packet
            packets.pop(i)
            if not packets:
                return b""
            continue
        packets[i] = bytes(p)
    return b"".join(packets)


def _send(rng: random.Random, port: int, data: bytes, local: str, read_for: float) -> None:
    """Write ``data`` in random pieces and read what comes back (bounded)."""
    try:
        sock = socket.create_connection((HOST, port), 5, source_address=(local, 0))
    except OSError:
        return
    with sock:
        sock.settimeout(0.05)
        i = 0
        try:
            while i < len(data):
                step = rng.choice([1, 7, 64, 1500, 65536])
                sock.sendall(data[i : i + step])
                i += step
                if rng.random() < 0.1:
                    with contextlib.suppress(TimeoutError):
                        sock.recv(65536)
            end = time.monotonic() + read_for
            while time.monotonic() < end:
                try:
                    if not sock.recv(65536):
                        break
                except TimeoutError:
                    continue
        except OSError:
            pass  # the QM closed the connection (what a bad peer gets)


def _well_behaved(listener: Listener, rng: random.Random, server: uuid.UUID, body: bytes) -> None:
    """A correct peer sends one transactional message; it must be stored once."""
    from tests.net.peer_socket import SocketPeer

    peer = SocketPeer(HOST, listener.port, f"127.0.0.{rng.randint(2, 250)}")
    sid = TxSequenceId.from_int((int(time.time()) << 32) | 1)
    peer.send(peer.transactional(QUEUE, body, sid, 1, 0), settle=0.2)
    peer.close()
    deadline = time.monotonic() + 10
    while listener.stored().count(body) != 1:
        if time.monotonic() > deadline:
            raise AssertionError(f"the QM stopped serving: {body!r} not stored once")
        time.sleep(0.02)
    assert SequenceKey  # (imported for readers: sequences are keyed by sender QM and queue)


@dataclass
class FuzzResult:
    """What a fuzz run did and found."""

    seed: int
    rounds: int = 0
    checks: int = 0
    errors: list[str] = field(default_factory=list)
    heap_growth: int = 0
    sequences: int = 0


def fuzz(
    root: Path, *, seed: int, rounds: int | None = None, seconds: float | None = None,
    check_every: int = 50, memory_bound: int = 24 << 20, read_for: float = 0.01,
) -> FuzzResult:  # fmt: skip
    """Fuzz a listener over ``root`` for ``rounds`` rounds or ``seconds`` seconds."""
    rng = random.Random(seed)
    result = FuzzResult(seed)
    listener = Listener(root).start()
    handler = _ErrorLog(listener.errors)
    logging.getLogger("openmsmq").addHandler(handler)
    assert listener.qm is not None
    server = listener.qm.guid
    corpus: list[bytes] = []
    tracemalloc.start()
    baseline = 0
    end = None if seconds is None else time.monotonic() + seconds
    try:
        while (rounds is None or result.rounds < rounds) and (end is None or time.monotonic() < end):
            packets = _stream(rng, server, int(time.time()))
            corpus.extend(rng.sample(packets, min(2, len(packets))))
            del corpus[:-64]
            data = _mutate(rng, packets, corpus) if rng.random() < 0.9 else b"".join(packets)
            _send(rng, listener.port, data, f"127.0.0.{rng.randint(2, 250)}", read_for)
            result.rounds += 1
            if result.rounds % check_every == 0:
                _well_behaved(listener, rng, server, f"check-{result.checks}".encode())
                result.checks += 1
            if result.rounds == check_every:
                baseline = tracemalloc.get_traced_memory()[0]
        _well_behaved(listener, rng, server, b"last-check")
        result.checks += 1
        time.sleep(0.2)
        stats = listener.stats()
        result.sequences = stats["sequences"]
        result.heap_growth = tracemalloc.get_traced_memory()[0] - baseline if baseline else 0
        if result.heap_growth > memory_bound:
            result.errors.append(f"heap grew by {result.heap_growth:,} bytes (bound {memory_bound:,})")
        if result.sequences > SEQUENCE_CAP:
            result.errors.append(f"{result.sequences} incoming sequences, beyond the cap {SEQUENCE_CAP}")
    except AssertionError as exc:
        result.errors.append(str(exc))
    finally:
        tracemalloc.stop()
        logging.getLogger("openmsmq").removeHandler(handler)
        listener.stop()
    result.errors += [
        f"untyped exception: {r.getMessage()} ({r.exc_info[1]!r})" if r.exc_info else r.getMessage()
        for r in listener.errors
    ]
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz (default 60)")
    p.add_argument("--rounds", type=int, default=None, help="stop after this many rounds")
    p.add_argument("--seed", type=int, default=None, help="replay a seed")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"listener fuzz seed {seed}", flush=True)
    # The refusals of the bad input are warnings by design; errors are what counts here.
    logging.getLogger("openmsmq").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="openmsmq-fuzz-") as tmp:
        result = fuzz(Path(tmp), seed=seed, rounds=args.rounds, seconds=args.seconds)
    print(
        f"rounds {result.rounds}, QM still serving after {result.checks} checks, heap growth after warm-up"
        f" {result.heap_growth:,} bytes, incoming sequences {result.sequences}"
    )
    for e in result.errors:
        print("FAILED:", e)
    return 1 if result.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
