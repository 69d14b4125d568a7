"""Child process of test_crash.py: runs transactions until it is SIGKILLed.

Usage: python crash_driver.py DATA_DIR LOG_PATH ROUND SEED [DSN]

With DSN the queue manager's store is that PostgreSQL database (store.backend =
"postgresql"), else the SQLite file in DATA_DIR.

Two worker threads share one QueueManager (so commits go through group commit):
worker 0 uses transactional queues a and b (sends, receives, moves a<->b, aborts);
worker 1 uses the non-transactional queue c and the transactional queue d. Before a
commit the worker appends a "begin" record naming the tokens it adds and removes;
after commit returns it appends "done" (with the LookupIdentifiers), after an abort
"abort". Each record is one JSON line, written and fsynced before going on.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import threading

from openmsmq.errors import IOTimeoutError, MQError
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.qm.options import StoreOptions

QUEUES = {"a": True, "b": True, "c": False, "d": True}


class Log:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.lock = threading.Lock()

    def write(self, **record: object) -> None:
        line = (json.dumps(record) + "\n").encode()
        with self.lock:
            os.write(self.fd, line)
            os.fsync(self.fd)


def qname(q: str) -> str:
    return "private$\\" + q


def worker(qm: QueueManager, log: Log, wid: int, rnd: int, seed: int) -> None:
    rng = random.Random(seed * 1000 + wid)
    n = 0

    def token() -> str:
        nonlocal n
        n += 1
        return f"{rnd}:{wid}:{n}"

    tx_queues = ["a", "b"] if wid == 0 else ["d"]
    while True:
        n_op = token()
        choice = rng.random()
        if wid == 1 and choice < 0.25:
            tok = token()
            log.write(op=n_op, kind="nsend", add={"c": [tok]}, remove={})
            m = qm.send(qname("c"), MessageRecord(body=tok.encode()))
            log.write(op=n_op, done=True, lookups=[m.lookup_id])
            continue
        if wid == 1 and choice < 0.45:
            log.write(op=n_op, kind="nrecv", queue="c")
            try:
                got = qm.receive(qname("c"))
            except IOTimeoutError:
                log.write(op=n_op, done=True, removed=None)
                continue
            log.write(op=n_op, done=True, removed=got.body.decode())
            continue
        tx = qm.begin()
        adds: dict[str, list[str]] = {}
        removes: dict[str, list[str]] = {}
        src = rng.choice(tx_queues)
        dst = rng.choice(tx_queues)
        if rng.random() < 0.5:
            try:
                for m in qm.receive_many(qname(src), rng.randint(1, 5), tx=tx):
                    removes.setdefault(src, []).append(m.body.decode())
            except IOTimeoutError:
                pass
        if rng.random() < 0.7 or not removes:
            # Mostly small; sometimes 8-40 messages, so rows also go in as the store's
            # multi-row INSERT chunks (64/32/16/8 rows) when a crash hits.
            count = rng.randint(1, 6) if rng.random() < 0.8 else rng.randint(8, 40)
            toks = [token() for _ in range(count)]
            qm.send_many(qname(dst), [MessageRecord(body=t.encode()) for t in toks], tx)
            adds[dst] = toks
        log.write(op=n_op, kind="tx", add=adds, remove=removes)
        if rng.random() < 0.2:
            tx.abort()
            log.write(op=n_op, abort=True)
        else:
            stored = tx.commit()
            log.write(op=n_op, done=True, lookups=stored)


def store_options(dsn: str | None) -> StoreOptions:
    """The store of the crash tests: SQLite, or the PostgreSQL database ``dsn``."""
    return StoreOptions(backend="postgresql", dsn=dsn) if dsn else StoreOptions()


def main() -> None:
    data_dir, log_path, rnd, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    qm = QueueManager(data_dir, store_options=store_options(sys.argv[5] if len(sys.argv) > 5 else None))
    for q, transactional in QUEUES.items():
        with contextlib.suppress(MQError):  # exists from an earlier round
            qm.create_queue(qname(q), transactional=transactional)
    log = Log(log_path)
    log.write(op=f"{rnd}:start", kind="start")
    threads = [threading.Thread(target=worker, args=(qm, log, w, rnd, seed), daemon=True) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
