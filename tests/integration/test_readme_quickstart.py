"""The README's quick start, run as written: the commands between ``<!-- quickstart:begin -->``
and ``<!-- quickstart:end -->`` in README.md, so that this test breaks when the README drifts
from what works.

How each line runs: ``. .venv/bin/activate`` is skipped (the ``openmsmq`` beside this
interpreter is used); ``openmsmq serve ... &`` starts a background process (``2> FILE``
honoured) with ``--port P --remote-port 0 --metrics-port 0`` added, because CI machines are
shared and the default ports may be taken; the ``timeout N sh -c 'until ...'`` line must
wait for the ``runtime.json`` of every started queue manager, and the test waits for
those files as it would (at most N seconds); ``kill %N ...`` sends SIGTERM to those
jobs and expects exit status 0; any other ``openmsmq ...`` line must exit 0. A line of any
other kind fails the test: extend the runner together with the README.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openmsmq.runtime import RUNTIME_FILE

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"

pytestmark = pytest.mark.slow


def quickstart_lines(text: str) -> list[str]:
    """The shell lines of the quick start block (fences and blank lines dropped)."""
    m = re.search(r"<!-- quickstart:begin -->(.*?)<!-- quickstart:end -->", text, re.S)
    assert m, "README.md has no quick start markers"
    return [ln for ln in m.group(1).splitlines() if ln.strip() and not ln.startswith("```")]


def _free_port() -> int:
    """A TCP port free on 127.0.0.1 and 127.0.0.2 (the two QMs share the MS-MQQB port)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        try:
            with socket.socket() as s2:
                s2.bind(("127.0.0.2", port))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port")


def _data_dir(args: list[str]) -> str:
    return args[args.index("--data-dir") + 1]


def test_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    lines = quickstart_lines(README.read_text())
    exe = Path(sys.executable).with_name("openmsmq")
    assert exe.exists(), exe
    env = dict(os.environ, COLUMNS="200")  # rich tables unwrapped, for the output checks
    port = _free_port()
    jobs: list[tuple[subprocess.Popen[bytes], str]] = []
    outputs: list[tuple[list[str], str]] = []
    try:
        for line in lines:
            words = shlex.split(line, comments=True)
            if not words:
                continue
            if words[0] in (".", "source"):
                continue
            if words[0] == "timeout":
                # The README's wait for the started queue managers: it must name each
                # one's runtime.json (a fixed sleep races a slow start on a busy machine).
                assert words[2:4] == ["sh", "-c"] and words[4].startswith("until "), line
                for _, data in jobs:
                    assert f"-f {data}/{RUNTIME_FILE} " in words[4], f"{line!r} does not wait for {data}"
                deadline = time.monotonic() + float(words[1])
                for proc, data in jobs:
                    while not (tmp_path / data / RUNTIME_FILE).exists():
                        assert proc.poll() is None, f"{line!r}: serve exited"
                        assert time.monotonic() < deadline, f"serve over {data} did not start"
                        time.sleep(0.05)
                continue
            if words[0] == "kill":
                assert all(w.startswith("%") for w in words[1:]), line
                for w in words[1:]:
                    proc, data = jobs[int(w[1:]) - 1]
                    proc.send_signal(signal.SIGTERM)
                    assert proc.wait(30) == 0, f"{data}: exit status {proc.returncode}"
                    assert not (tmp_path / data / RUNTIME_FILE).exists()
                continue
            assert words[0] == "openmsmq", f"the test does not know how to run {line!r}"
            args = words[1:]
            if args and args[0] == "serve":
                assert args[-1] == "&", f"serve runs in the background: {line!r}"
                args = args[:-1]
                log = tmp_path / f"serve-{len(jobs) + 1}.log"
                if "2>" in args:
                    i = args.index("2>")
                    log = tmp_path / args[i + 1]
                    del args[i : i + 2]
                args += ["--port", str(port), "--remote-port", "0", "--metrics-port", "0"]
                with open(log, "wb") as err:
                    proc = subprocess.Popen([str(exe), *args], cwd=tmp_path, env=env, stderr=err)
                jobs.append((proc, _data_dir(args)))
                continue
            result = subprocess.run(
                [str(exe), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
            )
            assert result.returncode == 0, f"{line!r}:\n{result.stdout}\n{result.stderr}"
            outputs.append((args, result.stdout))
    finally:
        for proc, _ in jobs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert len(jobs) == 2 and all(p.returncode == 0 for p, _ in jobs)
    by_command = {" ".join(a[2:3]): out for a, out in outputs}  # "--qm DIR <command> ..."
    assert "sent 1 message(s)" in by_command["send"]
    assert "hello from A" in by_command["receive"]


def test_getting_started_shows_the_same_commands() -> None:
    """docs/getting-started.md walks through the README's commands (same spelling)."""
    guide = GETTING_STARTED.read_text()
    for line in quickstart_lines(README.read_text()):
        command = line.split("#")[0].strip()
        if command.startswith("openmsmq") or command.startswith("kill"):
            assert command in guide, f"{command!r} is not in docs/getting-started.md"
