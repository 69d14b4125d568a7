"""Bad input: every error names the thing at fault as the user typed it (backslashes not
doubled, control characters escaped), in one line; exit statuses are the same for every
command: 0 success, 1 error, 2 usage, 130 interrupted (docs/cli.md)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.qm import QueueManager
from tests.ctrl_c import ctrl_c_reaches_it

ROOT = Path(__file__).resolve().parents[2]
P = "private$\\orders"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


@pytest.fixture
def run(tmp_path: Path):
    data = str(tmp_path / "data")
    runner = CliRunner()
    QueueManager(data).close()
    assert runner.invoke(cli, ["--qm", data, "queue", "create", P]).exit_code == 0

    def invoke(*args: str, code: int) -> Result:
        base: dict[str, str | None] = {k: None for k in os.environ if k.startswith("OPENMSMQ_")}
        result = runner.invoke(cli, ["--qm", data, *args], env=base)
        assert result.exit_code == code, (result.output, result.exception)
        if code == EXIT_ERROR:  # one line, no traceback
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert result.stderr.startswith("error: ")
            assert "Traceback" not in result.output
        return result

    return invoke


def test_the_codes() -> None:
    from openmsmq.cli import main

    assert (main.EXIT_OK, main.EXIT_ERROR, main.EXIT_USAGE, main.EXIT_INTERRUPTED) == (0, 1, 2, 130)


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["queue", "show", "private$\\nope"], "no queue 'private$\\nope'"),
        (["send", "private$\\nope", "x"], "no queue 'private$\\nope'"),
        (["receive", "private$\\nope"], "no queue 'private$\\nope'"),
        (["queue", "delete", "private$\\nope"], "no queue 'private$\\nope'"),
        (
            ["queue", "purge", "DIRECT=TCP:10.0.0.9\\private$\\none", "--yes"],
            "'DIRECT=TCP:10.0.0.9\\private$\\none'",
        ),
        (
            ["send", "DIRECT=TCP:300.0.0.1\\PRIVATE$\\orders", "x", "--transactional"],
            "TCP address '300.0.0.1' is not an IPv4 or IPv6 address at position 11 in"
            " 'DIRECT=TCP:300.0.0.1\\PRIVATE$\\orders'",
        ),
        (
            ["receive", "DIRECT=TCP:127.0.0.42\\PRIVATE$\\orders"],
            "no queue 'DIRECT=TCP:127.0.0.42\\PRIVATE$\\orders'",
        ),
        (["send", "PRIVATE=abc\\1", "x"], "computer GUID 'abc' is not a GUID"),
        (
            ["queue", "create", "private$\\a;b"],
            "'private$\\a;b' names a subqueue: a subqueue is created by the first move into it",
        ),
        (
            ["queue", "create", "private$\\x", "--allow-sender", "qm-a"],
            "allowed sender 'qm-a' is not a QM GUID",
        ),
        (
            ["dlq", "show", "{00000000-0000-0000-0000-000000000000}\\5"],
            "no dead letter '{00000000-0000-0000-0000-000000000000}\\5'",
        ),
    ],
)
def test_errors_name_the_thing_as_typed(run, args: list[str], shown: str) -> None:
    result = run(*args, code=EXIT_ERROR)
    assert shown in result.stderr
    assert "\\\\" not in result.stderr  # never a doubled backslash


def test_a_bad_path_name_has_one_hresult(run) -> None:
    result = run("queue", "create", "orders", code=EXIT_ERROR)
    assert result.stderr.count("MQ_ERROR") == 1
    assert result.stderr.startswith("error: MQ_ERROR_ILLEGAL_QUEUE_PATHNAME (0xC00E0014): 'orders': expected")


def test_control_characters_are_escaped(run) -> None:
    result = run("send", "DIRECT=TCP:1.2.3.4\\private$\\q\x1b[31m\nx", "x", code=EXIT_ERROR)
    assert "\x1b" not in result.stderr
    assert "'DIRECT=TCP:1.2.3.4\\private$\\q\\x1b[31m\\nx'" in result.stderr


def test_operating_system_errors_name_the_file(run, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run("init", str(blocker / "qm"), code=EXIT_ERROR)
    assert f"cannot create a queue manager in '{blocker / 'qm'}'" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["send", P, "x", "--priority", "9"],
        ["receive", P, "--count", "0"],
        ["receive"],
        ["queue", "create"],
        ["no-such-command"],
        ["status", "--no-such-option"],
        ["queue", "purge", P],  # no terminal to ask, no --yes
        ["send", P, "x", "--file", "-"],
    ],
)
def test_usage_errors_are_2(run, args: list[str]) -> None:
    result = run(*args, code=EXIT_USAGE)
    assert "Error:" in result.stderr


def test_successes_are_0(run) -> None:
    run("send", P, "x", code=EXIT_OK)
    run("peek", P, code=EXIT_OK)
    run("receive", P, code=EXIT_OK)
    run("queue", "list", code=EXIT_OK)
    run("status", code=EXIT_OK)
    run("config", "show", code=EXIT_OK)


def test_ctrl_c_is_130_for_a_command_that_waits(tmp_path: Path) -> None:
    """``status --watch`` refreshes until Ctrl-C: that ends it with 130 like any command."""
    data = tmp_path / "data"
    QueueManager(data).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "openmsmq", "--qm", str(data), "--json", "status", "--watch", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline()  # the first refresh is out
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED
    assert proc.stderr is not None and proc.stderr.read() == "interrupted\n"


#: Runs the CLI with a clean-up that never returns, as when a Ctrl-C landed inside a
#: library's locked section and left a lock held that closing the connection waits for.
_HANGING_CLOSE = (
    "import threading, openmsmq.cli.context as c; "
    "c.CliContext.close = lambda self: threading.Event().wait(); "
    "from openmsmq.cli.main import main; main()"
)


def test_ctrl_c_ends_the_process_even_when_its_clean_up_hangs(tmp_path: Path) -> None:
    """A clean-up stuck after Ctrl-C does not keep the command alive: it still ends
    with 130 and has said "interrupted"."""
    data = tmp_path / "data"
    QueueManager(data).close()
    proc = subprocess.Popen(
        [sys.executable, "-c", _HANGING_CLOSE, "--qm", str(data), "--json", "status", "--watch", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline()  # the first refresh is out
        proc.send_signal(signal.SIGINT)
        proc.wait(120)  # a bound for the test only: the command's own wait is far shorter
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED
    assert proc.stderr is not None and proc.stderr.read() == "interrupted\n"


def test_the_docs_list_the_codes() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    rows = dict(re.findall(r"^\| (\d+) \| (\w+)", text, re.M))
    assert rows == {"0": "success", "1": "the", "2": "the", "130": "interrupted"}
