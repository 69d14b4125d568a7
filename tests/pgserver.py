"""A real PostgreSQL server for the tests: initdb into a temporary directory, pg_ctl on
a Unix socket in that directory and a free loopback port, a fresh database per test.

Debian's ``postgresql`` package (``make`` installs it when missing) puts its binaries in
``/usr/lib/postgresql/<major>/bin``; ``OPENMSMQ_PG_BIN`` names another directory.
initdb and the server refuse to run as root: when the tests run as root, the cluster
belongs to the ``postgres`` user (created by the Debian package) or, failing that,
``nobody``, and every server command runs as that user. Clients connect over TCP on
127.0.0.1 with SCRAM and a random password, so a DSN carries a secret as a real one does.

Every wait is bounded; :meth:`PgServer.stop` (and an ``atexit`` hook) leaves no process.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["PgServer", "pg_bin_dir"]

#: Server settings of a test cluster. ``fsync=off`` is safe for what the tests do (they
#: kill processes, PostgreSQL's included, never the machine: what reached the kernel
#: survives); benchmarks pass ``fsync=True`` for a server that syncs as production does.
_TEST_SETTINGS = {
    "shared_buffers": "32MB",
    "max_connections": "100",
    "max_wal_size": "256MB",
    "log_min_messages": "warning",
    "log_line_prefix": "%m [%p] ",
    "dynamic_shared_memory_type": "posix",
}


def pg_bin_dir() -> Path | None:
    """The directory of PostgreSQL's server binaries (initdb, pg_ctl), or None."""
    env = os.environ.get("OPENMSMQ_PG_BIN")
    if env:
        return Path(env) if (Path(env) / "pg_ctl").exists() else None
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parent.parent.name)
    )
    if found:
        return Path(found[-1]).parent
    which = shutil.which("pg_ctl")
    return Path(which).parent if which else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One PostgreSQL cluster in a temporary directory.

    ``start()`` runs initdb once and starts the server; ``stop()`` shuts it down
    (fast), ``stop_immediate()`` kills it as a crash would (``pg_ctl stop -m
    immediate``: no checkpoint, crash recovery at the next start), ``restart()``
    starts it again on the same port. ``dsn(dbname)`` is a libpq URI; ``new_database()``
    creates an empty database and returns its DSN. ``cleanup()`` stops the server and
    removes the directory.
    """

    def __init__(self, *, fsync: bool = False, settings: Mapping[str, str] | None = None) -> None:
        bindir = pg_bin_dir()
        if bindir is None:
            raise RuntimeError(
                "PostgreSQL's server binaries were not found (initdb, pg_ctl): `make` installs Debian's"
                " postgresql package, or set OPENMSMQ_PG_BIN"
            )
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="openmsmq-pg-"))
        self.datadir = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.logfile = self.root / "server.log"
        self.user = "openmsmq"
        self.password = secrets.token_urlsafe(18)
        self.port = 0
        self.settings = {**_TEST_SETTINGS, "fsync": "on" if fsync else "off", **(settings or {})}
        self._run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            # PostgreSQL refuses to run as root: the cluster belongs to an unprivileged user.
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                owner = pwd.getpwnam("nobody")
            self._run_as = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.root.chmod(0o700)
        self._initialised = False
        self._running = False
        self._databases = 0
        atexit.register(self.cleanup)

    # ---- server commands -------------------------------------------------------------

    def _run(self, *args: str, timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            capture_output=True, text=True, timeout=timeout, check=check, env=env, cwd=self.root,
            **self._run_as,
        )  # fmt: skip

    def _initdb(self) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self._run_as:
            os.chown(pwfile, self._run_as["user"], self._run_as["group"])
        pwfile.chmod(0o600)
        try:
            self._run(
                "initdb", "-D", str(self.datadir), "-U", self.user, "--pwfile", str(pwfile),
                "-A", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync", timeout=120.0,
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"initdb failed: {exc.stderr or exc.stdout}") from exc
        finally:
            pwfile.unlink()
        with open(self.datadir / "postgresql.conf", "a") as conf:
            conf.write("".join(f"{k} = '{v}'\n" for k, v in self.settings.items()))
            conf.write(f"listen_addresses = '127.0.0.1'\nunix_socket_directories = '{self.socket_dir}'\n")
        self.socket_dir.mkdir()
        if self._run_as:
            os.chown(self.socket_dir, self._run_as["user"], self._run_as["group"])
        self._initialised = True

    def start(self, timeout: float = 60.0) -> None:
        """Start the server (initdb at the first start); wait until it accepts connections."""
        if not self._initialised:
            self._initdb()
        if self._running:
            return
        tries = 1 if self.port else 5
        last = ""
        for _ in range(tries):
            port = self.port or _free_port()
            got = self._run(
                "pg_ctl", "start", "-D", str(self.datadir), "-l", str(self.logfile), "-w",
                "-t", str(int(timeout)), "-o", f"-p {port}", timeout=timeout + 10, check=False,
            )  # fmt: skip
            if got.returncode == 0:
                self.port = port
                self._running = True
                return
            last = got.stderr + got.stdout + self.log_tail()
        raise RuntimeError(f"PostgreSQL did not start: {last}")

    def stop(self, mode: str = "fast", timeout: float = 60.0) -> None:
        """Shut the server down (``fast``: roll back open transactions, checkpoint)."""
        if not self._running:
            return
        self._run("pg_ctl", "stop", "-D", str(self.datadir), "-m", mode, "-w", "-t", str(int(timeout)),
                  timeout=timeout + 10, check=False)  # fmt: skip
        self._running = False

    def stop_immediate(self) -> None:
        """Kill the server as a crash would: no checkpoint; crash recovery at the next start."""
        self.stop("immediate")

    def restart(self) -> None:
        """Start the server again (on the same port) after a stop."""
        self.start()

    @property
    def running(self) -> bool:
        return self._running

    def cleanup(self) -> None:
        """Stop the server (if it runs) and remove its directory."""
        with contextlib.suppress(Exception):
            self.stop("immediate" if self._running else "fast")
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server log (for failure messages)."""
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ---- clients ---------------------------------------------------------------------

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq URI for ``dbname`` over TCP on 127.0.0.1 (with the password)."""
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{dbname}"

    def new_database(self, name: str | None = None) -> str:
        """Create an empty database; return its DSN."""
        import psycopg

        self._databases += 1
        name = name or f"t{os.getpid()}_{self._databases}_{secrets.token_hex(3)}"
        with psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def drop_database(self, dsn: str) -> None:
        """Drop the database of ``dsn`` (ending its sessions)."""
        import psycopg

        name = dsn.rsplit("/", 1)[1]
        with psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def wait_gone(self, timeout: float = 10.0) -> bool:
        """Wait until nothing listens on the port any more (after a stop)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    return True
            time.sleep(0.05)
        return False
