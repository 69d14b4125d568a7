"""Ctrl-C during a long ``openmsmq receive`` loses nothing: a real SIGINT to a real
process at several moments of a receive, then counting: messages printed + messages
still in the queue = messages before, each exactly once; exit status 130. Over the
in-process store and through a running ``serve`` (remote read), transactional and not;
``peek`` too. Moments are counted in messages printed, not in time: the test reads the
receiver's output up to the K-th message and signals it then (the pipe holds the
receiver back, so it is always in the middle of its receive when the signal comes)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.client import Access, connect
from openmsmq.errors import HResult, MQError
from tests.ctrl_c import ctrl_c_reaches_it
from tests.serve_proc import A, ServeProcess, free_port

TX = "private$\\orders"
PLAIN = "private$\\plain"
#: More than every moment below takes together (each also takes up to one batch of 256
#: and what a pipe holds), so that no receive runs out of messages before its signal.
TOTAL = 6000
MOMENTS = (1, 300, 1200)


def _fill(data: Path) -> None:
    with connect(str(data)) as conn:
        conn.create_queue(TX, transactional=True)
        conn.create_queue(PLAIN)
        for name, tx in ((TX, True), (PLAIN, False)):
            with conn.open_queue(name, Access.SEND) as q:
                for first in range(0, TOTAL, 1000):
                    bodies = [f"m-{i:05d}" for i in range(first, first + 1000)]
                    if tx:
                        with conn.transaction() as t:
                            q.send_many(bodies, tx=t)
                    else:
                        q.send_many(bodies)


def _bodies_in(target: str, queue: str) -> list[str]:
    with connect(target) as conn, conn.open_queue(queue, Access.PEEK) as q:
        try:
            return [m.body.decode() for m in q.peek_many(TOTAL + 1, 0)]
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                raise
            return []


def _interrupt_after(target: str, after: int, *args: str) -> tuple[int, str, str]:
    """Run ``openmsmq --qm target ARGS``, read its stdout up to the ``after``-th message
    line, SIGINT it, and return its exit status, whole stdout and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "openmsmq", "--qm", target, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it,
    )  # fmt: skip
    watchdog = threading.Timer(120, proc.kill)  # bounded, whatever happens
    watchdog.start()
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        for line in _lines(proc.stdout):
            seen.append(line)
            if sum(1 for s in seen if _is_message(s)) >= after:
                break
        proc.send_signal(signal.SIGINT)
        rest = proc.stdout.read()  # the same buffered reader: what it holds is not lost
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.wait()
    finally:
        watchdog.cancel()
    return proc.returncode, "".join(seen) + rest, err


def _lines(stream: object) -> Iterator[str]:
    while line := stream.readline():  # type: ignore[attr-defined]
        yield line


def _is_message(line: str) -> bool:
    return line.startswith("    {") or bool(re.match(r"│ \d+ ", line))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "qm"
    _fill(path)
    return path


def _check_moments(target: str, queue: str, *flags: str) -> None:
    for after in MOMENTS:
        before = _bodies_in(target, queue)
        assert len(before) > after + 600
        code, out, err = _interrupt_after(
            target, after, "receive", queue, "--count", str(TOTAL), "--json", *flags
        )
        printed = re.findall(r'"body": "(m-\d+)"', out)  # whatever was shown, complete or not
        left = _bodies_in(target, queue)
        lost = sorted(set(before) - set(printed) - set(left))
        assert lost == [], f"{len(lost)} messages neither printed nor in the queue"
        assert len(printed) + len(left) == len(before)  # each exactly once: none twice
        assert printed == before[: len(printed)]  # the head of the queue, in order
        assert code == 130, err
        assert err.strip().splitlines()[-1] == "interrupted"
        doc = json.loads(out)  # a complete document, even interrupted
        assert doc["interrupted"] is True and doc["count"] == len(doc["messages"]) == len(printed) >= after


def test_transactional_receive_over_the_in_process_store(data: Path) -> None:
    _check_moments(str(data), TX, "--transactional")


def test_non_transactional_receive_over_the_in_process_store(data: Path) -> None:
    _check_moments(str(data), PLAIN)


def test_receive_through_a_running_queue_manager(data: Path, tmp_path: Path) -> None:
    serve = ServeProcess(data, A, free_port(A), tmp_path / "serve.log")
    try:
        serve.start("runtime")
        _check_moments(str(data), TX, "--transactional")  # --qm DIR reaches serve over gRPC
        _check_moments(str(data), PLAIN)
    finally:
        serve.close()


def test_text_output_and_peek(data: Path) -> None:
    target = str(data)
    before = _bodies_in(target, TX)
    code, out, err = _interrupt_after(target, 5, "receive", TX, "--count", str(TOTAL), "--transactional")
    assert code == 130 and err.strip().endswith("interrupted")
    printed = len(re.findall(r"^│ \d+ ", out, re.M))  # one table row per message, its first line
    assert printed >= 5 and printed + len(_bodies_in(target, TX)) == len(before)
    code, out, err = _interrupt_after(target, 5, "peek", TX, "--count", str(TOTAL), "--json")
    assert code in (0, 130)  # a peek may end before the signal; it removes nothing either way
    assert _bodies_in(target, TX) == before[printed:]


def test_interrupted_while_waiting_for_messages(tmp_path: Path) -> None:
    """Ctrl-C while the receive waits for a first message: exit 130, a complete (empty)
    JSON document, nothing taken."""
    data = tmp_path / "qm"
    with connect(str(data)) as conn:
        conn.create_queue(TX, transactional=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "openmsmq", "--qm", str(data), "receive", TX, "--transactional",
         "--timeout", "60", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )  # fmt: skip
    try:
        _wait_for_waiting(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert json.loads(out) == {"queue": TX, "messages": [], "count": 0, "interrupted": True}


def _wait_for_waiting(pid: int) -> None:
    """Until the receiver has its queue manager's store open (it is then inside the
    receive: connecting, opening the queue or waiting), bounded."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}").endswith("openmsmq.db") for fd in fds):
                return
        except OSError:
            pass  # an fd closed while we looked: look again
        time.sleep(0.02)
    raise AssertionError("the receiver never opened the store")


def test_progress_shows_on_a_terminal_stderr_only(data: Path) -> None:
    """A receive of more than one batch shows its progress on stderr when stderr is a
    terminal (and stdout is not); never in stdout, never on a stderr that is not one."""
    import pty

    args = [sys.executable, "-m", "openmsmq", "--qm", str(data), "receive", PLAIN, "--count", "600", "--json"]
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=follower, preexec_fn=ctrl_c_reaches_it)
        os.close(follower)
        outs: list[bytes] = []
        reader = threading.Thread(target=lambda: outs.append(proc.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        watchdog = threading.Timer(120, proc.kill)  # bounded, whatever happens
        watchdog.start()
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        reader.join(120)
        proc.wait(120)
        watchdog.cancel()
    finally:
        os.close(leader)
    assert proc.returncode == 0
    assert json.loads(outs[0])["count"] == 600
    assert b"receiving private$\\plain" in shown and b"/600" in shown
    quiet = subprocess.run(args, capture_output=True, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == b""
    assert json.loads(quiet.stdout)["count"] == 600
