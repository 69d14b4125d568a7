"""A TCP fault proxy for chaos tests between two real queue managers.

Every accepted connection is forwarded to ``--target``; while faults are on, the proxy,
at random from a seeded generator:

* ``cut``: closes both directions of a connection (abort: no FIN handshake), sometimes
  after forwarding only a prefix of the bytes just read, so that the peer holds half a
  packet (``cut-mid-packet``); a timer also cuts a random live connection now and then
  (``cut-timer``) so that idle sessions are cut too;
* ``refuse``: accepts a connection and closes it at once;
* ``stall``: holds one direction for a while (the other keeps flowing);
* ``split``: forwards what it read as several small writes with short delays between
  them, so that packets arrive in pieces across reads.

Run it as a program (``python -m tests.chaos.proxy --listen H:P --target H:P --seed S``;
it logs each fault and prints the counts on SIGINT/SIGTERM) or in-process on its own
thread with :class:`ProxyThread`. Faults are switched on and off with
:meth:`FaultProxy.set_faults`; with faults off it is a plain forwarder, so a test can let
everything drain.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import signal
import threading
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass

__all__ = ["FaultConfig", "FaultProxy", "ProxyThread", "main"]

log = logging.getLogger("openmsmq.chaos.proxy")

READ_SIZE = 65536


@dataclass(frozen=True)
class FaultConfig:
    """Fault probabilities and sizes.

    ``p_cut`` / ``p_stall`` / ``p_split``: probability per forwarded read of cutting the
    connection, stalling the direction, or splitting the bytes into small writes;
    ``p_refuse``: probability per accepted connection of closing it at once;
    ``cut_interval``: mean seconds between timer cuts of a random live connection
    (0 = none); ``stall_max``: longest stall in seconds; ``split_max_pieces`` and
    ``split_delay_max``: how many pieces at most and the longest pause between them.
    """

    p_cut: float = 0.02
    p_stall: float = 0.01
    p_split: float = 0.15
    p_refuse: float = 0.1
    cut_interval: float = 1.0
    stall_max: float = 1.5
    split_max_pieces: int = 12
    split_delay_max: float = 0.01


class _Pair:
    """The two halves of one proxied connection."""

    def __init__(self, n: int, down: asyncio.StreamWriter) -> None:
        self.n = n
        self.writers: list[asyncio.StreamWriter] = [down]
        self.closed = False

    def abort(self) -> None:
        """Close both directions now (RST, pending bytes dropped)."""
        self.closed = True
        for w in self.writers:
            w.transport.abort()


class FaultProxy:
    """The proxy on the running event loop: ``await proxy.start()``, ``await proxy.stop()``."""

    def __init__(
        self,
        listen: tuple[str, int],
        target: tuple[str, int],
        seed: int,
        config: FaultConfig | None = None,
        source: str | None = None,
    ) -> None:
        self.listen = listen
        self.target = target
        self.source = source
        self.config = config or FaultConfig()
        self.rng = random.Random(seed)
        self.counts: Counter[str] = Counter()
        self.faults = True
        self._pairs: dict[int, _Pair] = {}
        self._next = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ control

    def set_faults(self, on: bool) -> None:
        """Switch fault injection on or off (call on the proxy's loop; see ProxyThread)."""
        self.faults = on

    async def start(self) -> None:
        """Listen; the timer cutter runs until :meth:`stop`."""
        host, port = self.listen
        self._server = await asyncio.start_server(self._accept, host, port, reuse_address=True)
        self._spawn(self._cutter())
        log.info("proxy %s:%d -> %s:%d", *self.listen, *self.target)

    async def stop(self) -> None:
        """Stop listening, close every connection and wait for the pumps."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for pair in list(self._pairs.values()):
            pair.abort()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _fault(self, kind: str, pair: _Pair, detail: str = "") -> None:
        self.counts[kind] += 1
        log.info("fault %s on connection %d%s", kind, pair.n, detail)

    # ------------------------------------------------------------------ connections

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._next += 1
        pair = _Pair(self._next, writer)
        self.counts["connections"] += 1
        if self.faults and self.rng.random() < self.config.p_refuse:
            self._fault("refuse", pair)
            pair.abort()
            return
        try:
            local = (self.source, 0) if self.source else None
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(self.target[0], self.target[1], local_addr=local), 10.0
            )
        except (OSError, TimeoutError):
            self.counts["target-unreachable"] += 1
            pair.abort()
            return
        pair.writers.append(up_writer)
        self._pairs[pair.n] = pair
        try:
            await asyncio.gather(self._pump(pair, reader, up_writer), self._pump(pair, up_reader, writer))
        finally:
            self._pairs.pop(pair.n, None)
            pair.abort()

    async def _pump(self, pair: _Pair, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward one direction until EOF or a cut, injecting faults while they are on."""
        cfg = self.config
        try:
            while not pair.closed:
                data = await reader.read(READ_SIZE)
                if not data:
                    # Half-close: pass the EOF on, the other direction keeps going.
                    if not pair.closed and writer.can_write_eof():
                        writer.write_eof()
                    return
                if self.faults:
                    r = self.rng.random()
                    if r < cfg.p_cut:
                        cut_at = self.rng.randrange(len(data) + 1)
                        if 0 < cut_at < len(data):
                            writer.write(data[:cut_at])
                            await writer.drain()
                            self._fault("cut-mid-packet", pair, f" after {cut_at} of {len(data)} bytes")
                        else:
                            self._fault("cut", pair)
                        pair.abort()
                        return
                    if r < cfg.p_cut + cfg.p_stall:
                        pause = self.rng.uniform(0.05, cfg.stall_max)
                        self._fault("stall", pair, f" for {pause:.2f} s")
                        await asyncio.sleep(pause)
                    elif r < cfg.p_cut + cfg.p_stall + cfg.p_split and len(data) > 1:
                        pieces = self.rng.randint(2, min(cfg.split_max_pieces, len(data)))
                        cuts = sorted(self.rng.sample(range(1, len(data)), pieces - 1))
                        self.counts["split"] += 1
                        start = 0
                        for end in [*cuts, len(data)]:
                            writer.write(data[start:end])
                            await writer.drain()
                            start = end
                            if end < len(data):
                                await asyncio.sleep(self.rng.uniform(0.0, cfg.split_delay_max))
                            if pair.closed:
                                return
                        continue
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pair.abort()

    async def _cutter(self) -> None:
        """Cut a random live connection every ``cut_interval`` seconds on average."""
        if self.config.cut_interval <= 0:
            return
        while True:
            await asyncio.sleep(self.rng.expovariate(1.0 / self.config.cut_interval))
            if self.faults and self._pairs:
                pair = self._pairs[self.rng.choice(sorted(self._pairs))]
                self._fault("cut-timer", pair)
                pair.abort()


class ProxyThread:
    """A :class:`FaultProxy` on its own event loop thread, for tests in another thread."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)

    def start(self) -> None:
        """Start the loop thread and the proxy; returns once it listens."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(10)

    def set_faults(self, on: bool) -> None:
        """Switch faults on or off from any thread."""
        self._loop.call_soon_threadsafe(self.proxy.set_faults, on)

    def counts(self) -> dict[str, int]:
        """A copy of the fault and connection counts."""
        return asyncio.run_coroutine_threadsafe(self._counts(), self._loop).result(10)

    async def _counts(self) -> dict[str, int]:
        return dict(self.proxy.counts)

    def stop(self) -> None:
        """Stop the proxy and its thread (bounded)."""
        with contextlib.suppress(TimeoutError):
            asyncio.run_coroutine_threadsafe(self.proxy.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.chaos.proxy --listen H:P --target H:P --seed S [--no-faults]``."""
    p = argparse.ArgumentParser(prog="python -m tests.chaos.proxy", description=__doc__.split("\n")[0])
    p.add_argument("--listen", required=True, type=_hostport, help="HOST:PORT to listen on")
    p.add_argument("--target", required=True, type=_hostport, help="HOST:PORT to forward to")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source", help="source address of the connections to the target")
    p.add_argument("--no-faults", action="store_true", help="forward only")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    async def run() -> None:
        proxy = FaultProxy(args.listen, args.target, args.seed, source=args.source)
        proxy.set_faults(not args.no_faults)
        await proxy.start()
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, done.set)
        await done.wait()
        await proxy.stop()
        print("faults:", ", ".join(f"{k} {v}" for k, v in sorted(proxy.counts.items())), flush=True)

    asyncio.run(run())


if __name__ == "__main__":
    main()
