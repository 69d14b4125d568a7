"""Wire codec throughput: encode+decode packets/s on one core.

Run: .venv/bin/python bench/wire.py [--seconds S] [--repeat R]

Measures (1) a transactional UserMessage with a 256-byte body (direct destination,
TransactionHeader, label) and (2) an OrderAck, each as encode() followed by
decode_packet() of the bytes, (3) the stream decoder fed a 1000-packet buffer, and
(4, 5) that UserMessage's encode() and decode_packet() alone.
Each figure is measured R times (default 3) and printed as the median with the
range; the machine's load average is printed before and after, since other
processes on a shared machine move the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable

from openmsmq.wire import (
    ORDER_QUEUE_ID,
    DirectQueueFormatName,
    OrderAck,
    OrderAckBody,
    PacketDecoder,
    PrivateQueueFormatNameId,
    TransactionHeader,
    TxSequenceId,
    UserMessage,
    decode_packet,
    encode_packets,
)

COMMAND = ".venv/bin/python bench/wire.py"


def transactional_message() -> UserMessage:
    """The benchmark's UserMessage: transactional, 256-byte body, direct destination."""
    return UserMessage.build(
        source_qm=uuid.UUID("557358d1-9150-9595-4997-b6e611ea26c6"),
        message_id=2286,
        destination_queue=DirectQueueFormatName("TCP:10.0.0.2\\PRIVATE$\\orders"),
        body=bytes(range(256)),
        sent_time=1_700_000_000,
        label="order 42",
        transaction=TransactionHeader(
            TxSequenceId(1_700_000_000, 7), 42, 41, TransactionHeader.make_flags(first=True, last=True)
        ),
    )


def order_ack() -> OrderAck:
    """The benchmark's OrderAck (routed form: private order queue id 4)."""
    return OrderAck.build(
        OrderAckBody.for_number(TxSequenceId(1_700_000_000, 7), 42),
        source_qm=uuid.UUID("fca09e90-7890-4544-8f11-394c43cd8907"),
        destination_queue=PrivateQueueFormatNameId(ORDER_QUEUE_ID),
        destination_qm=uuid.UUID("557358d1-9150-9595-4997-b6e611ea26c6"),
        sent_time=1_700_000_001,
    )


def _round_trips(packet: UserMessage | OrderAck, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(1000):
            decode_packet(packet.encode())
        n += 1000
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def _encodes(packet: UserMessage, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(1000):
            packet.encode()
        n += 1000
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def _decodes(data: bytes, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(1000):
            decode_packet(data)
        n += 1000
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def _stream(packet: UserMessage, seconds: float) -> float:
    data = encode_packets([packet] * 1000)
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        decoder = PacketDecoder()
        for i in range(0, len(data), 65536):
            n += len(decoder.feed(data[i : i + 65536]))
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per figure (median printed)")
    args = parser.parse_args()
    msg = transactional_message()
    ack = order_ack()
    assert decode_packet(msg.encode()) == msg and decode_packet(ack.encode()) == ack
    print(
        f"# {COMMAND}  (python {sys.version.split()[0]}, {args.seconds:g} s per measurement, "
        f"median of {args.repeat})"
    )
    print(f"# load average before: {_load()}")
    figures: list[tuple[str, str, Callable[[], float]]] = [
        (
            f"UserMessage, transactional, 256 B body ({len(msg.encode())} B)",
            "encode+decode",
            lambda: _round_trips(msg, args.seconds),
        ),
        (f"OrderAck ({len(ack.encode())} B)", "encode+decode", lambda: _round_trips(ack, args.seconds)),
        ("UserMessage via PacketDecoder.feed, 64 KiB chunks", "decode", lambda: _stream(msg, args.seconds)),
        ("UserMessage, transactional, 256 B body", "encode", lambda: _encodes(msg, args.seconds)),
        ("UserMessage, transactional, 256 B body", "decode", lambda: _decodes(msg.encode(), args.seconds)),
    ]
    for name, what, measure in figures:
        rates = [measure() for _ in range(max(1, args.repeat))]
        spread = f"({min(rates):,.0f}..{max(rates):,.0f})" if len(rates) > 1 else ""
        print(f"{name:<52} {what:<14} {statistics.median(rates):>10,.0f} packets/s  {spread}")
    print(f"# load average after: {_load()}")


if __name__ == "__main__":
    main()
