"""``receive --follow`` / ``peek --follow`` against a running queue manager: messages sent
while it follows are printed as they come; a real SIGINT in the middle loses none (printed
+ still queued = sent, each once); a queue deleted meanwhile is an error naming it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.client import Access, connect
from openmsmq.errors import HResult, MQError
from tests.ctrl_c import ctrl_c_reaches_it
from tests.serve_proc import A, ServeProcess, free_port

Q = "private$\\follow"
TOTAL = 3000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data = tmp_path_factory.mktemp("follow") / "qm"
    connect(str(data)).close()  # create the QM, then serve it
    serve = ServeProcess(data, A, free_port(A), data.parent / "serve.log")
    try:
        serve.start("runtime")
        yield data
    finally:
        serve.close()


def _start(data: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "openmsmq", "--qm", str(data), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The rest of stdout and stderr once it ends (through the same buffered readers, so
    that nothing they hold is lost, as ``communicate`` would lose it)."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(30)
    return out, err


def _left(data: Path, queue: str) -> list[str]:
    with connect(str(data)) as conn, conn.open_queue(queue, Access.PEEK) as q:
        try:
            return [m.body.decode() for m in q.peek_many(TOTAL + 1, 0)]
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                raise
            return []


def _send(data: Path, queue: str, bodies: list[str], tx: bool) -> None:
    with connect(str(data)) as conn, conn.open_queue(queue, Access.SEND) as q:
        for first in range(0, len(bodies), 100):
            if tx:
                with conn.transaction() as t:
                    q.send_many(bodies[first : first + 100], tx=t)
            else:
                q.send_many(bodies[first : first + 100])


@pytest.mark.parametrize("transactional", [True, False])
def test_receive_follow_sigint_while_messages_arrive_loses_none(served: Path, transactional: bool) -> None:
    queue = Q + ("tx" if transactional else "plain")
    with connect(str(served)) as conn:
        conn.create_queue(queue, transactional=transactional)
    flags = ["--transactional"] if transactional else []
    proc = _start(served, "receive", queue, "--follow", "--format", "json", *flags)
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    bodies = [f"m-{i:05d}" for i in range(TOTAL)]
    sender = threading.Thread(target=_send, args=(served, queue, bodies, transactional))
    try:
        sender.start()  # the follower starts on an empty queue and waits for these
        assert proc.stdout is not None and proc.stderr is not None
        printed: list[str] = []
        while len(printed) < 700:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            printed.append(json.loads(line)["body"])
        proc.send_signal(signal.SIGINT)
        rest, err = _finish(proc)
        sender.join(60)
    finally:
        watchdog.cancel()
    printed += [json.loads(line)["body"] for line in rest.splitlines()]
    assert proc.returncode == 130, err
    left = _left(served, queue)
    assert sorted(printed + left) == bodies  # every message once: printed or still queued
    assert printed == bodies[: len(printed)]  # in order, from the head


def test_peek_follow_shows_arrivals_and_removes_nothing(served: Path) -> None:
    queue = Q + "peek"
    with connect(str(served)) as conn:
        conn.create_queue(queue)
    _send(served, queue, ["before"], tx=False)
    proc = _start(served, "peek", queue, "--follow", "--body-only")
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "before\n"
        _send(served, queue, ["a1", "a2"], tx=False)  # sent after the follower printed
        assert proc.stdout.readline() == "a1\n"
        assert proc.stdout.readline() == "a2\n"
        proc.send_signal(signal.SIGINT)
        _, err = _finish(proc)
    finally:
        watchdog.cancel()
    assert proc.returncode == 130, err
    assert _left(served, queue) == ["before", "a1", "a2"]


def test_follow_on_a_queue_deleted_meanwhile_is_an_error_naming_it(served: Path) -> None:
    queue = Q + "gone"
    with connect(str(served)) as conn:
        conn.create_queue(queue)
    _send(served, queue, ["x"], tx=False)
    proc = _start(served, "receive", queue, "--follow", "--body-only")
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "x\n"  # it follows: now delete what it follows
        with connect(str(served)) as conn:
            conn.delete_queue(queue)
        _, err = _finish(proc)
    finally:
        watchdog.cancel()
    assert proc.returncode == 1, err
    assert f"'{queue}'" in err and "MQ_ERROR_QUEUE_DELETED" in err, err
    assert err.startswith("error: ")
