"""docs/cli.md's command reference is what the commands' --help says today, every
command has an example, and every example is a command line the CLI accepts."""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import click
import pytest

from openmsmq.cli.context import CliContext
from openmsmq.cli.main import cli
from openmsmq.cli.reference import BEGIN, END, EXAMPLES, main, reference, render_into

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_docs_cli_md_is_generated_from_the_help_and_current() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert main(["--check", str(DOC)]) == 0, "docs/cli.md is stale: run make docs-cli"
    generated = reference(cli)
    assert "### `openmsmq queue set`" in generated and "--exist-ok" in generated
    # a change of an option's help would make it stale: the check can fail
    assert render_into(text, generated.replace("--exist-ok", "--exists-ok")) != text


def _parse(argv: list[str]) -> None:
    """Parse ``argv`` (after ``openmsmq``) down to its command, as click would run it."""
    cmd: click.Command = cli
    ctx = cmd.make_context("openmsmq", argv, obj=CliContext("./data", False))
    while isinstance(cmd, click.Group):
        with warnings.catch_warnings():  # click 8 keeps the subcommand there until 9.0
            warnings.simplefilter("ignore", DeprecationWarning)
            rest = [*ctx.protected_args, *ctx.args]
        name, sub, args = cmd.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        cmd, ctx = sub, sub.make_context(name, args, parent=ctx)


def test_every_example_is_accepted_by_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the files examples name (--file opens its file)
    (tmp_path / "order.xml").write_text("<order/>")
    (tmp_path / "orders.jsonl").write_text("")
    for path, lines in EXAMPLES.items():
        for line in lines:
            m = re.search(r"openmsmq ([^|)\"]*?)(?:\s*>.*)?(?:$|[|)\"])", line)
            assert m is not None, line
            argv = shlex.split(m.group(1))
            assert " ".join(a for a in argv if not a.startswith("-"))  # names a command
            _parse(argv)
            assert all(word in argv for word in path.split()), (path, line)
