"""The metrics endpoints of two real ``openmsmq serve`` processes (QM A on 127.0.0.1, QM B
on 127.0.0.2) move by the right amounts when N messages go A -> B and are received on B.

Scraped over HTTP from the URLs the processes publish in ``runtime.json``.
"""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import openmsmq
from openmsmq.client import Access
from openmsmq.runtime import live_runtime
from tests.serve_proc import A, B, ServeProcess, free_port

Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
TXS, PER_TX = 4, 125  # N = 500

pytestmark = pytest.mark.slow

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _serve(data_dir: Path, address: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start ``openmsmq serve``; return once its runtime.json is published."""
    serve = ServeProcess(data_dir, address, port, log)
    serve.start(ready="runtime")
    assert serve.proc is not None
    return serve.proc


def scrape(url: str) -> Samples:
    """Every sample of the endpoint: (name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when the endpoint does not show it yet)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _wait(cond: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_counters_move_with_a_transfer_between_two_serve_processes(tmp_path: Path) -> None:
    n = TXS * PER_TX
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    qb = _serve(b_dir, B, port, tmp_path / "b.log")
    qa = _serve(a_dir, A, port, tmp_path / "a.log")
    try:
        a_url = str(live_runtime(a_dir)["metrics"])  # type: ignore[index]
        b_url = str(live_runtime(b_dir)["metrics"])  # type: ignore[index]
        a0, b0 = scrape(a_url), scrape(b_url)
        assert value(a0, "openmsmq_messages_sent_total") == 0

        with openmsmq.connect(b_dir) as conn:
            conn.create_queue(Q, transactional=True)
        with openmsmq.connect(a_dir) as conn:
            q = conn.open_queue(DEST, Access.SEND)
            for t in range(TXS):
                with conn.transaction() as tx:
                    q.send_many([f"{t}-{i}".encode() for i in range(PER_TX)], tx=tx)

        def drained() -> bool:
            return value(scrape(a_url), "openmsmq_messages_acknowledged_total") >= n

        _wait(drained, "every message OrderAck'ed")
        with openmsmq.connect(b_dir) as conn:
            q = conn.open_queue(Q)
            got: list[bytes] = []
            for _ in range(n):  # bounded
                with conn.transaction() as tx:
                    batch = q.receive_many(n - len(got), tx=tx, timeout=5)
                got += [m.body for m in batch]
                if len(got) >= n or not batch:
                    break
        assert got == [f"{t}-{i}".encode() for t in range(TXS) for i in range(PER_TX)]

        a1, b1 = scrape(a_url), scrape(b_url)
    finally:
        for p in (qa, qb):
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(30) for p in (qa, qb)]
    assert codes == [0, 0]

    def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # Sender A: N sent by its application, N first transmissions, N released by OrderAcks;
    # its outgoing queue's deletions are not application receives.
    assert moved(a0, a1, "openmsmq_messages_sent_total") == n
    assert moved(a0, a1, "openmsmq_messages_transmitted_total") == n
    assert moved(a0, a1, "openmsmq_messages_acknowledged_total") == n
    assert moved(a0, a1, "openmsmq_messages_received_total") == 0
    assert moved(a0, a1, "openmsmq_messages_accepted_total") == 0
    assert moved(a0, a1, "openmsmq_messages_forwarded_total") == 0
    assert value(a1, "openmsmq_sessions_opened_total", role="initiator") == 1
    assert value(a1, "openmsmq_sessions", role="initiator") == 1
    rtt = value(a1, "openmsmq_order_ack_round_trip_seconds_count")
    assert 1 <= rtt <= n
    assert sum(v for (name, labels), v in a1.items()
               if name == "openmsmq_queue_messages" and ("kind", "outgoing") in labels) == 0  # fmt: skip

    # Receiver B: N accepted from A (duplicates would be rejected, not accepted), N received
    # by its application, nothing sent by an application; what it transmitted is its
    # OrderAcks, each a message of its outgoing queue to A's order queue (MS-MQQB 3.1.7.17),
    # and one FinalAck per message its application received: sends in a transaction ask for
    # negative source journaling by default, and such a message is settled by its FinalAck.
    assert moved(b0, b1, "openmsmq_messages_accepted_total") == n
    assert moved(b0, b1, "openmsmq_messages_received_total") == n
    assert moved(b0, b1, "openmsmq_messages_sent_total") == 0
    assert n + 1 <= moved(b0, b1, "openmsmq_messages_transmitted_total") <= 2 * n
    assert value(b1, "openmsmq_sessions_opened_total", role="acceptor") == 1
    assert value(b1, "openmsmq_sessions", role="acceptor") == 1

    # Store commits: one histogram observation per group commit, its operations summed;
    # they agree with the store's own counters (no failed operation here).
    for before, after in ((a0, a1), (b0, b1)):
        commits = moved(before, after, "openmsmq_store_commits_total")
        assert commits > 0
        assert moved(before, after, "openmsmq_store_commit_duration_seconds_count") == commits
        assert moved(before, after, "openmsmq_store_commit_batch_operations_count") == commits
        assert moved(before, after, "openmsmq_store_commit_batch_operations_sum") == moved(
            before, after, "openmsmq_store_operations_total"
        )
        assert value(after, "openmsmq_store_failed_operations_total") == 0
