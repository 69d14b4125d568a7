"""The data directory at rest: 0700, and 0600 for every file the queue manager creates, whatever
the umask. As found: the directory 0755 and the database 0644, so any local user read every
message body. A directory left looser by its operator is named in a warning, not changed."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.runtime import RUNTIME_FILE, SERVE_LOCK, take_serve_lock, write_runtime
from tests.serve_proc import ServeProcess, free_port

#: SQLite only: modes of the files in the data directory, where SQLite keeps its database.
pytestmark = pytest.mark.sqlite_only


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The loosest umask: the modes must come from the code, not from the environment."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_the_queue_manager_creates_a_private_directory_and_files(tmp_path: Path, open_umask: None) -> None:
    data = tmp_path / "a" / "data"
    with QueueManager(data) as qm:
        qm.create_queue("private$\\q")
        qm.send("private$\\q", MessageRecord(body=b"secret"))
        assert mode(data) == 0o700
        names = sorted(os.listdir(data))
        assert names == ["openmsmq.db", "openmsmq.db-shm", "openmsmq.db-wal"]
        assert {n: mode(data / n) for n in names} == dict.fromkeys(names, 0o600)


def test_the_serve_lock_and_the_runtime_file_are_private(tmp_path: Path, open_umask: None) -> None:
    data = tmp_path / "data"
    fd = take_serve_lock(data)
    assert fd is not None
    try:
        assert write_runtime(data, {"pid": os.getpid()})
        assert mode(data) == 0o700
        assert mode(data / SERVE_LOCK) == 0o600 and mode(data / RUNTIME_FILE) == 0o600
        assert write_runtime(data, {"pid": os.getpid(), "state": "stopping"})  # a rewrite too
        assert mode(data / RUNTIME_FILE) == 0o600
    finally:
        os.close(fd)


def test_a_running_serve_leaves_nothing_readable_by_others(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    port = free_port("127.0.0.1")
    proc = ServeProcess(data, "127.0.0.1", port, tmp_path / "serve.log")
    proc.start(ready="runtime")
    try:
        files = sorted(os.listdir(data))
        assert RUNTIME_FILE in files and "openmsmq.db" in files
        assert mode(data) == 0o700
        assert {n: mode(data / n) & 0o077 for n in files} == dict.fromkeys(files, 0)
    finally:
        assert proc.stop() == 0
        proc.close()


def test_a_looser_existing_directory_is_named_in_a_warning_and_left_as_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    with QueueManager(data):
        pass
    os.chmod(data / "openmsmq.db", 0o644)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="openmsmq.datadir"), QueueManager(data):
        pass
    lines = [r.getMessage() for r in caplog.records if r.name == "openmsmq.datadir"]
    assert len(lines) == 1, lines
    assert f"{data} (0755)" in lines[0] and f"{data / 'openmsmq.db'} (0644)" in lines[0]
    assert f"chmod 700 {data}" in lines[0]
    assert mode(data) == 0o755 and mode(data / "openmsmq.db") == 0o644  # the operator's choice
    caplog.clear()
    os.chmod(data, 0o700)
    os.chmod(data / "openmsmq.db", 0o600)
    with caplog.at_level(logging.WARNING, logger="openmsmq.datadir"), QueueManager(data):
        pass
    assert not [r for r in caplog.records if r.name == "openmsmq.datadir"]
