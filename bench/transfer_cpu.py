"""CPU per transferred message on each side, in process (no sockets, no asyncio).

    .venv/bin/python bench/transfer_cpu.py [--messages 10000] [--rounds 4] [--calls] [--codec]

Two queue managers (synchronous stores, durable) and their :class:`Transfer` objects are
wired in memory by the test harness (``tests/transfer/harness.py``). Each round commits
``--messages`` transactional 256-byte messages at 100 per transaction on A, then moves
them to B until A's outgoing queue is empty (the OrderAck timer is advanced, not waited
for). Printed: thread CPU time per message spent in A's and B's ``Transfer`` entry
points (poll, data_received, store work, timers), the application's send on A, the
minimum over the rounds (the machine is shared: the minimum is the least disturbed).
With ``--calls`` also the number of Python function calls of one round under cProfile,
a figure that does not depend on the machine's load, in all and per side (the
application's send, A's and B's ``Transfer`` entry points). With ``--codec`` also the codec's
share alone: A's ``packet_from_message`` + ``UserMessage.encode`` and B's
``PacketDecoder.feed`` + ``message_from_packet`` over 1,000 transfer packets (min of 30).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import timeit
import uuid

from tests.transfer.harness import Clock, Net, outgoing_count

from openmsmq.store.records import MessageRecord
from openmsmq.transfer.codec import message_from_packet, packet_from_message
from openmsmq.transfer.engine import Transfer
from openmsmq.wire import DirectQueueFormatName, PacketDecoder, TxSequenceId, encode_packets

DEST = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\bench"
ENTRY_POINTS = ("poll", "data_received", "data_to_send", "run_store_work", "store_work_done",
                "next_store_work", "handle_timer", "wanted_peers", "connections_to_close")  # fmt: skip


def _instrument(acc: collections.defaultdict[str, float], profiles: dict[str, cProfile.Profile]) -> None:
    """Time A's and B's entry points into ``acc`` (by address); while ``profiles`` holds a
    profiler per address, count their calls there, apart from the rest of the round (the
    profiler ``profiles["current"]``: the application's send, the harness)."""
    depth = [0]

    def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
        def timed(self: Transfer, *args: Any, **kw: Any) -> Any:
            if depth[0]:
                return orig(self, *args, **kw)
            depth[0] += 1
            side = profiles.get(self.config.local_addresses[0])
            outer = profiles.get("current")
            if side is not None and outer is not None:
                outer.disable()
                side.enable()
            t = time.thread_time()
            try:
                return orig(self, *args, **kw)
            finally:
                acc[self.config.local_addresses[0]] += time.thread_time() - t
                if side is not None and outer is not None:
                    side.disable()
                    outer.enable()
                depth[0] -= 1

        return timed

    for name in ENTRY_POINTS:
        setattr(Transfer, name, wrap(getattr(Transfer, name)))


def _calls(profile: cProfile.Profile) -> int:
    """The calls ``profile`` counted, without its own ``disable`` (the switches between
    the sides' profilers)."""
    stats = pstats.Stats(profile)
    own = sum(
        v[1] for k, v in stats.stats.items() if k[2] == "<method 'disable' of '_lsprof.Profiler' objects>"
    )  # type: ignore[attr-defined]
    return int(stats.total_calls) - own  # type: ignore[attr-defined]


def codec_figures() -> tuple[float, float]:
    """(A, B) µs per message of the transfer codec alone (see the module docstring)."""
    dest = DirectQueueFormatName("TCP:127.0.0.2\\PRIVATE$\\bench")
    src = uuid.UUID(int=0x5A)
    seq = TxSequenceId(1_700_000_000, 7).value
    ms = [MessageRecord(body=bytes(256), transactional=True, tx_sequence_id=seq, tx_sequence_number=i,
                  tx_previous_sequence_number=i - 1, destination_queue=DEST, id_uniquifier=i,
                  sent_time=1_700_000_000, id_lineage=src, source_machine=src, final_ack_required=True)
          for i in range(1, 1001)]  # fmt: skip
    data = encode_packets([packet_from_message(m, dest, src) for m in ms])

    def a_side() -> None:
        for m in ms:
            packet_from_message(m, dest, src).encode()

    def b_side() -> None:
        for p in PacketDecoder().feed(data):
            message_from_packet(p, DEST)  # type: ignore[arg-type]

    b_side()  # fills the decoders' memo caches, as the first packets of a session do
    a = min(timeit.repeat(a_side, number=5, repeat=30)) / 5000 * 1e6
    b = min(timeit.repeat(b_side, number=5, repeat=30)) / 5000 * 1e6
    return a, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", action="store_true", help="also count function calls of one round")
    ap.add_argument("--codec", action="store_true", help="also time the transfer codec alone")
    args = ap.parse_args()
    n = args.messages - args.messages % 100
    gc.set_threshold(50_000, 50, 100)  # as openmsmq serve (server/serve.py tune_gc)
    acc: collections.defaultdict[str, float] = collections.defaultdict(float)
    profiles: dict[str, cProfile.Profile] = {}
    _instrument(acc, profiles)
    work = tempfile.TemporaryDirectory(prefix="openmsmq-bench-cpu-")  # removed at the end
    net = Net(Path(work.name), Clock())
    a, b = net.add("127.0.0.1"), net.add("127.0.0.2")
    b.qm.create_queue("private$\\bench", transactional=True)
    body = bytes(256)
    res: dict[str, list[float]] = {"send": [], "A": [], "B": []}

    def one_round() -> None:
        if profiles:
            profiles["current"] = profiles["send"]
            profiles["send"].enable()
        t0 = time.thread_time()
        for _ in range(0, n, 100):
            tx = a.qm.begin()
            a.qm.send_many(DEST, [MessageRecord(body=body) for _ in range(100)], tx)
            tx.commit()
        res["send"].append((time.thread_time() - t0) / n * 1e6)
        if profiles:
            profiles["send"].disable()
            profiles["current"] = profiles["harness"]
            profiles["harness"].enable()
        acc.clear()
        net.settle(100_000)
        net.clock.now += 0.6  # OrderAckTimeout
        for node in net.nodes.values():
            node.transfer.handle_timer(net.clock.now)
        net.settle(100_000)
        if outgoing_count(a.qm) != 0:
            raise SystemExit("CHECK FAILED: A's outgoing queue is not empty")
        res["A"].append(acc["127.0.0.1"] / n * 1e6)
        res["B"].append(acc["127.0.0.2"] / n * 1e6)

    for _ in range(args.rounds):
        one_round()
    got = len(b.qm.peek_range("private$\\bench", 0, n * args.rounds + 1))
    check = "checked" if got == n * args.rounds else f"CHECK FAILED: {got} at B"
    flags = " --calls" * args.calls + " --codec" * args.codec
    print(f"# .venv/bin/python bench/transfer_cpu.py --messages {n} --rounds {args.rounds}{flags}")
    print(
        f"CPU us/message (min of {args.rounds}): A {min(res['A']):.1f}, B {min(res['B']):.1f},"
        f" A+B {min(res['A']) + min(res['B']):.1f}; application send on A {min(res['send']):.1f}; {check}"
    )
    if args.calls:
        for name in ("send", "harness", "127.0.0.1", "127.0.0.2"):
            profiles[name] = cProfile.Profile()
        one_round()
        profiles["harness"].disable()
        del profiles["current"]
        per = {k: _calls(p) for k, p in profiles.items()}
        calls = sum(per.values())
        profiles.clear()
        print(f"Python function calls for one round of {n}: {calls:,} ({calls / n:.1f} per message,"
              f" send included): application send {per['send'] / n:.1f}, A {per['127.0.0.1'] / n:.1f},"
              f" B {per['127.0.0.2'] / n:.1f}, the in-memory harness {per['harness'] / n:.1f}")  # fmt: skip
    if args.codec:
        ca, cb = codec_figures()
        print(f"codec us/message (min of 30 x 1,000): A packet_from_message+encode {ca:.2f},"
              f" B PacketDecoder.feed+message_from_packet {cb:.2f}")  # fmt: skip
    for node in net.nodes.values():
        node.qm.close()
    work.cleanup()


if __name__ == "__main__":
    main()
