"""A damaged write-ahead log at restart (issue 8, "Bad input"): the store recovers to the
last durable state — every transaction whole or absent, the survivors a prefix of the
commit order — and never opens with a partial transaction or a duplicate.

The WAL is taken from a store that is still open (a clean close checkpoints it away),
then cut at frame boundaries, inside frames and inside its header, or has one byte of a
frame flipped. SQLite checks each WAL frame's salt and cumulative checksum and ignores
the frames from the first bad one on (https://sqlite.org/fileformat2.html#walformat),
which is what makes "recover to the last durable state" hold.
"""

from __future__ import annotations

import random
import shutil
import uuid
from pathlib import Path

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.store import MessageRecord, Store, ops, queues, ranges, reads
from tests.store.support import private_queue

#: SQLite only: a damaged SQLite write-ahead log at open (PostgreSQL recovers its own WAL).
pytestmark = pytest.mark.sqlite_only

COMMITS = 120
PER_COMMIT = 3
WAL_HEADER = 32
FRAME_HEADER = 24


def _body(commit: int, i: int) -> bytes:
    return f"{commit:05d}:{i}:".encode() + bytes(300)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A copy of ``s.db`` + ``s.db-wal`` of an open store holding COMMITS transactions."""
    live = tmp_path_factory.mktemp("live")
    store = Store(live / "s.db")
    try:
        store.write(queues.init_qm_state(uuid.uuid4(), 1000))
        q = private_queue(store, transactional=True, now=1000)
        for c in range(COMMITS):
            sends = [ops.Send.of(q.queue_id, MessageRecord(body=_body(c, i))) for i in range(PER_COMMIT)]
            store.write(ops.commit_work(sends, []))
        snap = tmp_path_factory.mktemp("snap")
        # Every write above has returned, so its frames are on disk; copy before close.
        shutil.copyfile(live / "s.db", snap / "s.db")
        shutil.copyfile(live / "s.db-wal", snap / "s.db-wal")
    finally:
        store.close()
    return snap, q.queue_id


def _page_size(db: Path) -> int:
    header = db.read_bytes()[:100]
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def _restart(snapshot: tuple[Path, int], tmp: Path, wal: bytes) -> list[tuple[int, int]]:
    """Open a copy of the snapshot whose WAL is ``wal``; the (commit, i) of every message."""
    src, queue_id = snapshot
    shutil.copyfile(src / "s.db", tmp / "s.db")
    (tmp / "s.db-wal").write_bytes(wal)
    with Store(tmp / "s.db") as store:
        messages = store.read(lambda c: ranges.fetch_range_through(c, queue_id, False, 0, None, 1 << 62))
        lookup_ids = [m.lookup_id for m in messages]
        assert lookup_ids == sorted(set(lookup_ids)), "LookupIdentifiers repeat or are out of order"
        try:
            stats = store.read(lambda c: reads.get_queue(c, queue_id))
        except MQError as exc:
            # The cut fell before the queue's own creation was committed.
            assert exc.hresult == HResult.MQ_ERROR_QUEUE_DELETED
            assert messages == []
        else:
            assert stats.msg_count == len(messages), "the queue's counter disagrees with its rows"
    out = []
    for m in messages:
        commit, i, _ = m.body.split(b":", 2)
        out.append((int(commit), int(i)))
    return out


def _surviving_commits(found: list[tuple[int, int]]) -> int:
    """How many commits survived; asserts they are whole and form a prefix, in order."""
    n = len(found) // PER_COMMIT
    assert found == [(c, i) for c in range(n) for i in range(PER_COMMIT)], (
        "not a prefix of whole transactions in commit order"
    )
    return n


def test_the_snapshot_holds_its_transactions_in_the_wal(snapshot: tuple[Path, int], tmp_path: Path) -> None:
    src, _ = snapshot
    wal = (src / "s.db-wal").read_bytes()
    page = _page_size(src / "s.db")
    frames = (len(wal) - WAL_HEADER) // (FRAME_HEADER + page)
    assert frames >= COMMITS // 2, "the test needs most commits to live in the WAL"
    assert _surviving_commits(_restart(snapshot, tmp_path, wal)) == COMMITS


def test_a_truncated_wal_recovers_a_prefix_of_whole_transactions(
    snapshot: tuple[Path, int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    src, _ = snapshot
    wal = (src / "s.db-wal").read_bytes()
    frame = FRAME_HEADER + _page_size(src / "s.db")
    frames = (len(wal) - WAL_HEADER) // frame
    rng = random.Random(8)
    cuts = {0, 7, WAL_HEADER, WAL_HEADER + 5, WAL_HEADER + frame, len(wal) - 1, len(wal) - frame}
    cuts |= {WAL_HEADER + k * frame for k in rng.sample(range(frames), 6)}  # frame boundaries
    cuts |= {WAL_HEADER + k * frame + rng.randrange(1, frame) for k in rng.sample(range(frames), 6)}
    survivors = []
    for cut in sorted(cuts):
        found = _restart(snapshot, tmp_path_factory.mktemp("cut"), wal[:cut])
        survivors.append(_surviving_commits(found))
    # A longer log never holds fewer transactions; the cut log never holds them all.
    assert survivors == sorted(survivors)
    assert len(set(survivors)) >= 8, survivors
    assert survivors[-1] < COMMITS


def test_a_flipped_byte_in_a_frame_drops_that_frame_and_everything_after(
    snapshot: tuple[Path, int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    src, _ = snapshot
    wal = (src / "s.db-wal").read_bytes()
    frame = FRAME_HEADER + _page_size(src / "s.db")
    frames = (len(wal) - WAL_HEADER) // frame
    before = _surviving_commits(_restart(snapshot, tmp_path_factory.mktemp("whole"), wal))
    for k in (frames // 3, frames - 2):
        damaged = bytearray(wal)
        damaged[WAL_HEADER + k * frame + FRAME_HEADER + 100] ^= 0x40  # inside the page image
        after = _surviving_commits(_restart(snapshot, tmp_path_factory.mktemp("flip"), bytes(damaged)))
        assert after < before
        # Only what the frames before k committed survives: cutting there gives the same.
        prefix = wal[: WAL_HEADER + k * frame]
        cut = _surviving_commits(_restart(snapshot, tmp_path_factory.mktemp("cutk"), prefix))
        assert after == cut
