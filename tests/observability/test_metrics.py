"""Prometheus metrics: hot-path counters, the scrape-time queue-depth collector, the endpoint."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import openmsmq
from openmsmq.client import SINGLE_MESSAGE
from openmsmq.config import MetricsConfig
from openmsmq.observability.metrics import (
    Metrics,
    QueueManagerCollector,
    QueueStat,
    default_metrics,
    start_metrics_from_config,
    start_metrics_server,
)
from openmsmq.protocol.events import CloseReason, Role
from openmsmq.protocol.incoming import RejectReason

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        return parse(resp.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_hot_path_counters_and_labels() -> None:
    m = Metrics()
    m.messages_sent.inc(5)
    m.messages_received.inc(2)
    m.messages_transmitted.inc(3)
    m.messages_forwarded.inc(1)
    m.messages_accepted.inc(3)
    m.messages_acknowledged.inc(3)
    m.resends.inc()
    m.rejected(RejectReason.DUPLICATE).inc(2)
    m.rejected(RejectReason.DUPLICATE).inc()
    m.dead_lettered(0xC002).inc(4)
    m.dead_lettered("NACK_REACH_QUEUE_TIMEOUT").inc()
    m.dead_lettered(0x0123).inc()
    m.session_opened(Role.INITIATOR)
    m.session_opened(Role.ACCEPTOR)
    m.session_closed(Role.ACCEPTOR, CloseReason.IDLE)
    m.session_closed(Role.INITIATOR, CloseReason.REFUSED, was_open=False)
    m.observe_commit(ops=64, seconds=0.002)
    m.observe_order_ack_rtt(0.6)
    s = parse(m.exposition().decode())
    assert value(s, "openmsmq_messages_sent_total") == 5
    assert value(s, "openmsmq_messages_received_total") == 2
    assert value(s, "openmsmq_messages_transmitted_total") == 3
    assert value(s, "openmsmq_messages_forwarded_total") == 1
    assert value(s, "openmsmq_messages_accepted_total") == 3
    assert value(s, "openmsmq_messages_acknowledged_total") == 3
    assert value(s, "openmsmq_message_resends_total") == 1
    assert value(s, "openmsmq_messages_rejected_total", reason="duplicate") == 3
    assert value(s, "openmsmq_messages_dead_lettered_total", **{"class": "NACK_RECEIVE_TIMEOUT"}) == 4
    assert value(s, "openmsmq_messages_dead_lettered_total", **{"class": "NACK_REACH_QUEUE_TIMEOUT"}) == 1
    assert value(s, "openmsmq_messages_dead_lettered_total", **{"class": "0x0123"}) == 1
    assert value(s, "openmsmq_sessions", role="initiator") == 1
    assert value(s, "openmsmq_sessions", role="acceptor") == 0
    assert value(s, "openmsmq_sessions_opened_total", role="acceptor") == 1
    assert value(s, "openmsmq_sessions_closed_total", reason="idle") == 1
    assert value(s, "openmsmq_sessions_closed_total", reason="refused") == 1
    assert value(s, "openmsmq_store_commit_batch_operations_bucket", le="64.0") == 1
    assert value(s, "openmsmq_store_commit_batch_operations_bucket", le="32.0") == 0
    assert value(s, "openmsmq_store_commit_duration_seconds_count") == 1
    assert value(s, "openmsmq_order_ack_round_trip_seconds_bucket", le="0.75") == 1
    assert value(s, "openmsmq_order_ack_round_trip_seconds_bucket", le="0.5") == 0
    assert value(s, "openmsmq_build_info", version=openmsmq.__version__) == 1
    assert default_metrics() is default_metrics()


def test_range_reader_position_only_rises() -> None:
    m = Metrics()
    m.range_removed({"private$\\a": 7, "private$\\b": 3})
    m.range_removed({"private$\\a": 5})  # a repeated, older removal
    samples = parse(m.exposition().decode())
    assert value(samples, "openmsmq_range_reader_position", queue="private$\\a") == 7
    assert value(samples, "openmsmq_range_reader_position", queue="private$\\b") == 3


def test_collector_survives_a_failing_source() -> None:
    def broken() -> list[QueueStat]:
        raise RuntimeError("closed")

    m = Metrics()
    collector = QueueManagerCollector(broken)
    m.registry.register(collector)
    s = parse(m.exposition().decode())
    collector.close()
    assert not any(name.startswith("openmsmq_queue_") for name, _ in s)
    assert ("openmsmq_build_info", (("version", openmsmq.__version__),)) in s


def test_endpoint_shows_queue_depth_and_store_commits_after_real_traffic(tmp_path: Path) -> None:
    m = Metrics()
    q = "private$\\orders"
    with openmsmq.connect(tmp_path / "data") as conn:
        conn.create_queue(q, transactional=True)
        qm = conn.transport.qm  # type: ignore[attr-defined]
        collector = m.attach_queue_manager(qm)
        with start_metrics_server(m, "127.0.0.1", 0) as server:
            assert server.address == "127.0.0.1" and server.port > 0
            before = scrape(server.url)
            assert value(before, "openmsmq_queue_messages", queue=q, kind="private") == 0
            assert value(before, "openmsmq_queue_messages", queue="system$;deadxact", kind="system") == 0
            commits0 = value(before, "openmsmq_store_commits_total")
            ops0 = value(before, "openmsmq_store_operations_total")

            queue = conn.open_queue(q)
            queue.send_many([b"a" * 10, b"b" * 20, b"c" * 30], tx=SINGLE_MESSAGE)
            mid = scrape(server.url)
            assert value(mid, "openmsmq_queue_messages", queue=q, kind="private") == 3
            assert value(mid, "openmsmq_queue_bytes", queue=q, kind="private") >= 60
            assert value(mid, "openmsmq_store_commits_total") > commits0
            assert value(mid, "openmsmq_store_operations_total") > ops0
            # How long transactions held the writer: the sum grows with the commits, the
            # longest is one of them.
            held0 = value(before, "openmsmq_store_writer_held_seconds_total")
            held = value(mid, "openmsmq_store_writer_held_seconds_total")
            longest = value(mid, "openmsmq_store_writer_longest_hold_seconds")
            assert held > held0 and 0 < longest <= held
            assert (held, longest) == (qm.store.stats.held_seconds, qm.store.stats.longest_hold)

            with conn.transaction() as tx:
                assert len(queue.receive_many(2, timeout=0, tx=tx)) == 2
            after = scrape(server.url)
            assert value(after, "openmsmq_queue_messages", queue=q, kind="private") == 1
            assert value(after, "openmsmq_store_commits_total") > value(mid, "openmsmq_store_commits_total")
            queue.close()
        m.detach(collector)
    assert not any(name.startswith("openmsmq_queue_") for name, _ in parse(m.exposition().decode()))


def test_server_stop_frees_the_port() -> None:
    server = start_metrics_server(Metrics(), "127.0.0.1", 0)
    port = server.port
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_start_from_config() -> None:
    assert start_metrics_from_config(MetricsConfig(enabled=False)) is None
    m = Metrics()
    m.messages_sent.inc(2)
    with start_metrics_from_config(MetricsConfig(port=0), m) as server:  # type: ignore[union-attr]
        assert value(scrape(server.url), "openmsmq_messages_sent_total") == 2


def test_queue_source_runs_on_one_thread_whatever_thread_scrapes() -> None:
    """The store keeps a read connection per thread: scrapes (a new thread each) must not
    open one each."""
    threads: set[int] = set()

    def source() -> list[QueueStat]:
        threads.add(threading.get_ident())
        return [QueueStat("private$\\q", "private", 1, 10)]

    m = Metrics()
    collector = QueueManagerCollector(source)
    m.registry.register(collector)
    with start_metrics_server(m, "127.0.0.1", 0) as server:
        for _ in range(3):
            assert (
                value(scrape(server.url), "openmsmq_queue_messages", queue="private$\\q", kind="private") == 1
            )
    assert len(threads) == 1 and threading.get_ident() not in threads
    m.registry.unregister(collector)
    collector.close()


def test_round_trips_of_a_postgresql_store_are_exposed_and_absent_for_sqlite(
    tmp_path: Path, pg_dsn: str
) -> None:
    """openmsmq_store_round_trips_total: the statements a PostgreSQL store's writer sent,
    the figure bench/transfer.py divides by the commits; a SQLite store has none."""
    from openmsmq.qm import QueueManager
    from openmsmq.store.pg.db import PgStore
    from openmsmq.store.records import MessageRecord

    m = Metrics()
    with QueueManager(tmp_path / "pg", store=PgStore(pg_dsn)) as qm:
        qm.create_queue("private$\\orders", transactional=True)
        collector = m.attach_queue_manager(qm)
        before = parse(m.exposition().decode())
        for _ in range(3):
            with qm.begin() as tx:
                qm.send_many("private$\\orders", [MessageRecord(body=b"x")] * 10, tx)
        after = parse(m.exposition().decode())
        m.detach(collector)
        trips = value(after, "openmsmq_store_round_trips_total") - value(
            before, "openmsmq_store_round_trips_total"
        )
        commits = value(after, "openmsmq_store_commits_total") - value(before, "openmsmq_store_commits_total")
        assert commits >= 3 and trips == qm.store.round_trips - value(
            before, "openmsmq_store_round_trips_total"
        )
        assert trips >= 2 * commits  # at least the head statement and the COMMIT of each
    with QueueManager(tmp_path / "sqlite") as qm:
        collector = m.attach_queue_manager(qm)
        samples = parse(m.exposition().decode())
        m.detach(collector)
    assert ("openmsmq_store_commits_total", ()) in samples
    assert ("openmsmq_store_round_trips_total", ()) not in samples


def test_group_commit_waits_are_exposed(tmp_path: Path) -> None:
    """openmsmq_store_commit_waits_total: the store writer's count of group commits whose
    leader waited for the previous commit's committers (eight threads committing in turn
    usually make some)."""
    from openmsmq.qm import QueueManager
    from openmsmq.store.records import MessageRecord

    m = Metrics()
    with QueueManager(tmp_path / "w") as qm:
        qm.create_queue("private$\\orders", transactional=True)
        collector = m.attach_queue_manager(qm)

        def sender() -> None:
            for _ in range(40):
                with qm.begin() as tx:
                    qm.send_many("private$\\orders", [MessageRecord(body=b"x")], tx)

        threads = [threading.Thread(target=sender) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        samples = parse(m.exposition().decode())
        m.detach(collector)
        assert ("openmsmq_store_commit_waits_total", ()) in samples
        assert value(samples, "openmsmq_store_commit_waits_total") == qm.store.stats.commit_waits
