"""A failover of a highly available queue manager (what `make demo-ha` runs).

It starts a PostgreSQL server of its own (in a temporary directory, on loopback), creates
queue manager B in it, and runs B as two `openmsmq serve` processes on 127.0.0.2 sharing
that database: one becomes active, the other waits as a standby. Queue manager A (SQLite,
127.0.0.1) sends transactional messages to B. Meanwhile the demo kills B's active
(SIGKILL) and shows the standby take over: the lease epoch grows, the listener comes back,
A's transfer resumes. At the end every message is in B's queue exactly once and in order.
Everything it prints was measured in this run.

    .venv/bin/python examples/failover.py [--messages N] [--lease SECONDS]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test helpers that start PostgreSQL and serve processes

from tests.ha_proc import accepts, create_pg_qm, ha_node, queue_bodies, role, wait_role  # noqa: E402
from tests.pgserver import PgServer  # noqa: E402
from tests.serve_proc import A, B, ServeProcess, free_port, outgoing_count  # noqa: E402

from openmsmq.qm.manager import QueueManager  # noqa: E402
from openmsmq.store.records import MessageRecord  # noqa: E402

QUEUE = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000, help="messages A sends to B (default 5000)")
    parser.add_argument("--lease", type=float, default=3.0, help="ha.lease_duration of B's nodes (default 3)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="openmsmq-demo-ha-"))
    pg = PgServer()
    nodes: list[ServeProcess] = []
    try:
        print("starting PostgreSQL ...")
        pg.start()
        dsn = pg.new_database("qm_b")
        create_pg_qm(dsn, root / "init", QUEUE)
        port = free_port(A, B)
        lease = {
            "OPENMSMQ_HA_LEASE_DURATION": str(args.lease),
            "OPENMSMQ_HA_RENEW_INTERVAL": str(args.lease / 6),
        }
        b1 = ha_node(root, "b1", B, port, dsn, **lease)
        b2 = ha_node(root, "b2", B, port, dsn, **lease)
        a = ServeProcess(root / "a", A, port, root / "a.log")
        nodes += [b1, b2, a]
        b1.start()
        print(f"B node 1: {wait_role(b1, 'active')}")
        b2.start(ready="runtime")
        print(f"B node 2: {wait_role(b2, 'standby', epoch=1)}")
        a.start()
        sender = QueueManager(root / "a")
        sent = [0]

        def send() -> None:
            for t in range(0, args.messages, 100):
                with sender.begin() as tx:
                    k = min(100, args.messages - t)
                    sender.send_many(DEST, [MessageRecord(body=b"%d" % (t + i)) for i in range(k)], tx)
                sent[0] = t + k
                time.sleep(0.02)

        thread = threading.Thread(target=send)
        thread.start()
        time.sleep(1.0)
        print(f"A has sent {sent[0]}, B holds {len(queue_bodies(dsn, QUEUE))}: killing B's active (node 1)")
        b1.kill()
        killed = time.monotonic()
        while not (((role(b2) or {}).get("epoch") or 0) > 1 and accepts(B, port)):
            if time.monotonic() - killed > 60:
                print("no takeover within 60 s:\n" + b2.log.read_text()[-3000:])
                return 1
            time.sleep(0.01)
        print(f"node 2 took over in {time.monotonic() - killed:.2f} s: {role(b2)}")
        thread.join()
        sender.close()
        deadline = time.monotonic() + 120
        bodies: list[bytes] = []
        while time.monotonic() < deadline:
            bodies = queue_bodies(dsn, QUEUE)
            if len(bodies) >= args.messages and outgoing_count(root / "a") == 0:
                break
            time.sleep(0.2)
        numbers = [int(b) for b in bodies]
        ok = numbers == list(range(args.messages))
        print(f"B's queue: {len(numbers)} messages, {len(set(numbers))} distinct, in send order: {ok};"
              f" A's outgoing queue: {outgoing_count(root / 'a')}")  # fmt: skip
        return 0 if ok else 1
    finally:
        for n in nodes:
            n.close()
        pg.cleanup()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
