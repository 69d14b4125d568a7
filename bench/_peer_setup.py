"""Private RabbitMQ and Redis instances for the peer benchmarks, and an fsync counter.

Used by ``bench/peers.py`` (and by ``bench/transfer.py``, which measures openmsmq beside
the peers in the same run). Everything here is bounded in time and stays on 127.0.0.1:

* :func:`ensure_debian_packages` installs ``rabbitmq-server`` / ``redis-server`` /
  ``strace`` / ``perf`` with apt-get when a binary is missing (the script says so before it does).
* :class:`RabbitMQServer` and :class:`RedisServer` start a private instance on free
  ports with its own data directory under a temporary directory, wait until it
  answers, and stop it afterwards (also on error and Ctrl-C). A system-wide instance,
  if one runs, is not touched: every port is chosen free, RabbitMQ gets its own node
  name, Erlang cookie (``HOME``) and its own epmd port.
* Every process a server starts (shell wrappers, ``beam.smp``, ``epmd``) inherits the
  environment variable :data:`TOKEN_ENV` with a value unique to that server; stopping
  a server ends exactly the processes carrying its token, by pid.
* :func:`fsync_counter` counts the fsync/fdatasync/syncfs system calls of a server's
  whole process tree (every thread and child) inside the measured window. Preferred:
  :class:`PerfFsyncCounter`, kernel counters on the syscall tracepoints (``perf stat``,
  switched on and off through its control FIFO): the server is never stopped, the
  kernel increments a counter per call. Fallback: :class:`StraceFsyncCounter`
  (``strace -f --seccomp-bpf``), exact too, but it stops the server on each fsync and
  so slows a server that fsyncs from many threads (RabbitMQ markedly so), which is why
  perf is preferred.
* :func:`raw_fsync_rate` measures the machine's own write+fsync rate on the same
  filesystem, and :func:`device_flushes` reads the block layer's flush counter
  (whole machine) as a cross-check.
* :func:`run_on_slow_disk` re-executes a benchmark with ``bench/_slow_disk.c`` preloaded
  (``--disk-flushes N``): every fsync, fdatasync and syncfs of the benchmark and of every
  process it starts (the QMs, the peers' servers) then takes at least 1/N s, one at a
  time machine-wide, as on a device that completes N cache flushes per second. The
  project's aims are stated for a disk doing about 1,500 fsyncs/s; a development
  machine's may be faster, and this is how to compare there.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

#: Environment variable carried by every process a benchmark server starts.
TOKEN_ENV = "OPENMSMQ_BENCH_PEER"

#: System calls counted as fsyncs: all three make written data durable.
FSYNC_CALLS = ("fsync", "fdatasync", "syncfs")

#: Debian package providing each binary the peer benchmarks need.
DEBIAN_PACKAGES = {
    "rabbitmq-server": "rabbitmq-server",
    "redis-server": "redis-server",
    "strace": "strace",
    "perf": "linux-perf",
}

RABBITMQ_SBIN = Path("/usr/lib/rabbitmq/bin")

Log = Callable[[str], None]


def _print(msg: str) -> None:
    print(msg, flush=True)


def ensure_debian_packages(binaries: list[str], log: Log = _print, timeout: float = 900.0) -> None:
    """Install the Debian packages of the ``binaries`` that are not on PATH (needs root)."""
    missing = [b for b in binaries if _which(b) is None]
    if not missing:
        return
    packages = sorted({DEBIAN_PACKAGES[b] for b in missing})
    log(f"# {', '.join(missing)} not found: installing Debian packages {' '.join(packages)} with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update"], check=True, env=env, timeout=timeout, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", *packages],
        check=True,
        env=env,
        timeout=timeout,
        stdout=subprocess.DEVNULL,
    )
    still = [b for b in binaries if _which(b) is None]
    if still:
        raise RuntimeError(f"still missing after apt-get install: {', '.join(still)}")


def _which(binary: str) -> str | None:
    if binary == "rabbitmq-server" and (RABBITMQ_SBIN / binary).exists():
        return str(RABBITMQ_SBIN / binary)
    return shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/sbin")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of the call."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def token_pids(token: str) -> list[int]:
    """Pids of the live processes whose environment carries ``TOKEN_ENV=token``."""
    needle = f"{TOKEN_ENV}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry.name))
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the live processes ``pids`` used so far (their threads
    included; a process that has exited counts no more)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def process_tree(root: int) -> list[int]:
    """``root`` and its live descendants (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


# --------------------------------------------------------------------------- fsync counting

TRACEFS = Path("/sys/kernel/tracing")


def _probe(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, timeout=30, capture_output=True)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _perf_probe() -> bool:
    events = ",".join(f"syscalls:sys_enter_{c}" for c in FSYNC_CALLS)
    return _probe(["perf", "stat", "-x,", "-e", events, "-o", "/dev/null", "--", "true"])


def perf_usable(log: Log = _print) -> bool:
    """True when ``perf stat`` can count the syscall tracepoints here.

    The tracepoints are looked up in tracefs; when it is not mounted (common in
    containers) and we are root, it is mounted on /sys/kernel/tracing, as systemd does.
    """
    if _which("perf") is None:
        return False
    if _perf_probe():
        return True
    if os.geteuid() == 0 and TRACEFS.is_dir() and not (TRACEFS / "events").exists():
        log(f"# mounting tracefs on {TRACEFS} so that perf can count fsync system calls")
        if _probe(["mount", "-t", "tracefs", "nodev", str(TRACEFS)]):
            return _perf_probe()
    return False


def strace_usable() -> bool:
    """True when strace exists and may trace here (ptrace can be forbidden in containers)."""
    if _which("strace") is None:
        return False
    return _probe(["strace", "-f", "--seccomp-bpf", "-e", "trace=fsync", "-o", "/dev/null", "true"])


class FsyncCounter:
    """Counts the fsync calls of one process tree inside a window; see the subclasses."""

    #: How the count is obtained, for the report.
    method = ""

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` prefixed so that the process tree it starts is counted."""
        raise NotImplementedError

    def begin(self) -> None:
        """Open a window (call just before the measured work starts); windows add up."""
        raise NotImplementedError

    def end(self) -> None:
        """Close the window (call as soon as the measured work has finished)."""
        raise NotImplementedError

    def count(self) -> int:
        """Calls in all windows together; read after the counted tree has exited."""
        raise NotImplementedError


class PerfFsyncCounter(FsyncCounter):
    """Kernel counters on the syscall tracepoints: ``perf stat`` (inherited by every thread
    and child), started disabled (``-D -1``) and switched on and off through its control
    FIFO. Nothing stops the counted process: the kernel increments a counter per call.
    """

    method = "perf stat on syscalls:sys_enter_{fsync,fdatasync,syncfs}, server process tree"

    def __init__(self, directory: Path, timeout: float = 10.0) -> None:
        self.out = directory / "fsync.perf"
        self.ctl = directory / "perf.ctl"
        self.ack = directory / "perf.ack"
        os.mkfifo(self.ctl)
        os.mkfifo(self.ack)
        self.timeout = timeout

    def wrap(self, argv: list[str]) -> list[str]:
        events = ",".join(f"syscalls:sys_enter_{c}" for c in FSYNC_CALLS)
        control = f"fifo:{self.ctl},{self.ack}"
        return [
            "perf",
            "stat",
            "-x,",
            "-D",
            "-1",
            "--control",
            control,
            "-e",
            events,
            "-o",
            str(self.out),
            "--",
            *argv,
        ]

    def _command(self, word: str) -> None:
        # O_RDWR opens a FIFO without waiting for the other end (Linux).
        ctl = os.open(self.ctl, os.O_RDWR)
        ack = os.open(self.ack, os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(ctl, f"{word}\n".encode())
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                r, _, _ = select.select([ack], [], [], 0.1)
                if r and b"ack" in os.read(ack, 64):
                    return
            raise TimeoutError(f"perf did not acknowledge '{word}' within {self.timeout:.0f} s")
        finally:
            os.close(ctl)
            os.close(ack)

    def begin(self) -> None:
        self._command("enable")

    def end(self) -> None:
        self._command("disable")

    def count(self) -> int:
        # perf -x, lines: "<count>,<unit>,<event>,..." (comments start with '#').
        total = 0
        for line in self.out.read_text().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2].startswith("syscalls:") and fields[0].isdigit():
                total += int(fields[0])
        return total


# "1234  1795321746.759616 fsync(3)        = 0" or "... fdatasync(7 <unfinished ...>"
_TRACE_LINE = re.compile(r"^(?:\[pid\s+)?\d+\]?\s+(\d+\.\d+)\s+(" + "|".join(FSYNC_CALLS) + r")\(")


class StraceFsyncCounter(FsyncCounter):
    """``strace -f --seccomp-bpf -ttt -e trace=fsync,fdatasync,syncfs``: the seccomp filter
    stops the traced process on those calls only (one ptrace round trip each); each call
    is logged with its wall-clock start, and the calls inside the window are counted. The
    fallback when perf cannot be used: it slows a server that fsyncs from many threads.
    """

    method = "strace -f --seccomp-bpf on fsync/fdatasync/syncfs, server process tree"

    def __init__(self, directory: Path) -> None:
        self.log_path = directory / "fsync.strace"
        self.windows: list[tuple[float, float]] = []

    def wrap(self, argv: list[str]) -> list[str]:
        trace = "trace=" + ",".join(FSYNC_CALLS)
        return [
            "strace",
            "-f",
            "--seccomp-bpf",
            "-qq",
            "-ttt",
            "-e",
            trace,
            "-e",
            "signal=none",
            "-o",
            str(self.log_path),
            *argv,
        ]

    def begin(self) -> None:
        self.windows.append((time.time(), float("inf")))

    def end(self) -> None:
        self.windows[-1] = (self.windows[-1][0], time.time())

    def count(self) -> int:
        n = 0
        with self.log_path.open(errors="replace") as f:
            for line in f:
                m = _TRACE_LINE.match(line)
                if m:
                    t = float(m.group(1))
                    n += any(start <= t <= end for start, end in self.windows)
        return n


def fsync_counter(directory: Path, method: str, log: Log = _print) -> FsyncCounter | None:
    """A counter for ``method`` ('perf', 'strace', 'auto': perf, else strace; 'none')."""
    if method in ("auto", "perf") and perf_usable(log):
        return PerfFsyncCounter(directory)
    if method in ("auto", "strace") and strace_usable():
        return StraceFsyncCounter(directory)
    if method != "none":
        log(f"# fsync counting with {method!r} is not possible here: fsyncs will not be counted")
    return None


def raw_fsync_rate(directory: Path, seconds: float = 2.0, block: int = 256) -> float:
    """write(``block`` bytes)+fsync per second appending to one file in ``directory``."""
    path = directory / "raw-fsync.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    data = bytes(block)
    try:
        n = 0
        start = time.monotonic()
        deadline = start + seconds
        while True:
            os.write(fd, data)
            os.fsync(fd)
            n += 1
            now = time.monotonic()
            if now >= deadline:
                return n / (now - start)
    finally:
        os.close(fd)
        path.unlink()


#: Environment of the slow-disk library (bench/_slow_disk.c): the least duration of one
#: flush in nanoseconds, and the lock file that makes flushes take turns machine-wide.
FLUSH_NS_ENV = "OPENMSMQ_BENCH_FLUSH_NS"
FLUSH_LOCK_ENV = "OPENMSMQ_BENCH_FLUSH_LOCK"

#: ``--disk-flushes`` help of the benchmarks that take it.
DISK_FLUSHES_HELP = (
    "emulate a disk completing N flushes/s: every fsync of every process takes at least 1/N s,"
    " one at a time (built with gcc, preloaded)"
)


def run_on_slow_disk(flushes_per_s: float, argv: list[str] | None = None) -> None:
    """Re-execute this script with every flush padded to ``1 / flushes_per_s`` seconds.

    Builds ``bench/_slow_disk.c`` with gcc into a directory of the system's temporary
    directory, then re-executes the same command line with ``LD_PRELOAD`` and the
    library's variables set (``argv``: the arguments, when not ``sys.argv``'s); every
    process the benchmark starts inherits them. Returns without doing anything when they
    are already set (in the re-executed process).
    Raises SystemExit with the reason when the library cannot be built.
    """
    if os.environ.get(FLUSH_NS_ENV):
        return
    if flushes_per_s <= 0:
        raise SystemExit("--disk-flushes must be positive")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise SystemExit("--disk-flushes needs a C compiler (gcc) to build bench/_slow_disk.c")
    out = Path(tempfile.gettempdir()) / f"openmsmq-bench-slow-disk-{os.getuid()}"
    out.mkdir(mode=0o700, exist_ok=True)
    lib = out / "libslowdisk.so"
    src = Path(__file__).resolve().parent / "_slow_disk.c"
    build = [cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src), "-ldl", "-lpthread"]
    done = subprocess.run(build, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"cannot build {src.name}: {done.stderr.strip()[:1000]}")
    preload = " ".join(p for p in (str(lib), os.environ.get("LD_PRELOAD", "")) if p)
    env = dict(os.environ, LD_PRELOAD=preload)
    env[FLUSH_NS_ENV] = str(round(1e9 / flushes_per_s))
    env[FLUSH_LOCK_ENV] = str(out / "flush.lock")
    sys.stdout.flush()
    args = sys.argv[1:] if argv is None else argv
    os.execve(sys.executable, [sys.executable, sys.argv[0], *args], env)


def slow_disk_header() -> str | None:
    """A header line describing the slow-disk emulation in effect, or None."""
    ns = os.environ.get(FLUSH_NS_ENV)
    if not ns:
        return None
    ms = int(ns) / 1e6
    return (
        f"# slow disk emulated (--disk-flushes {1e3 / ms:,.0f}): every fsync/fdatasync/syncfs takes"
        f" at least {ms:.3f} ms, one at a time machine-wide (bench/_slow_disk.c)"
    )


def device_flushes() -> int | None:
    """Flush requests completed by all whole block devices (machine-wide), or None.

    Field 15 of ``/sys/block/<dev>/stat`` (Linux >= 5.5). Counts every process's flushes,
    so it is a cross-check only; a journaling filesystem may issue more than one device
    flush per fsync, or fold several fsyncs into one journal commit.
    """
    total = 0
    seen = False
    for dev in Path("/sys/block").iterdir():
        if dev.name.startswith(("loop", "ram", "zram")):
            continue
        try:
            fields = (dev / "stat").read_text().split()
        except OSError:
            continue
        if len(fields) >= 17:
            total += int(fields[15])
            seen = True
    return total if seen else None


def load_average() -> str:
    """The 1/5/15-minute load averages, as /proc/loadavg shows them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# --------------------------------------------------------------------------- servers


class _Server:
    """A server process tree started under an optional :class:`FsyncTrace`."""

    name = "server"
    #: Processes that outlive the server by design and are ended after it.
    helpers: tuple[str, ...] = ()

    def __init__(self, workdir: Path | None, fsyncs: str, log: Log) -> None:
        self._own_dir = workdir is None
        self.dir = (
            Path(tempfile.mkdtemp(prefix=f"openmsmq-bench-{self.name}-")) if workdir is None else workdir
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        self.token = uuid.uuid4().hex[:16]
        #: Counts the server tree's fsyncs ('auto', 'perf', 'strace' or 'none': see fsync_counter).
        self.fsyncs = fsync_counter(self.dir, fsyncs, log)
        self.log = log
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdout = self.dir / "server.out"

    def _spawn(self, argv: list[str], env: dict[str, str]) -> None:
        env = dict(env, **{TOKEN_ENV: self.token})
        if self.fsyncs is not None:
            argv = self.fsyncs.wrap(argv)
        with self._stdout.open("wb") as out:
            # A session of its own: Ctrl-C in the terminal reaches only this script,
            # which then stops the server itself (in stop()).
            self._proc = subprocess.Popen(
                argv, env=env, cwd=self.dir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            tail = self._stdout.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} exited with {self._proc.returncode} while starting:\n{tail}")

    def _graceful(self) -> None:
        """Ask the server to stop; overridden per server."""

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the server, then every process still carrying its token (TERM, then KILL).

        Helpers that outlive the server (epmd daemonises) are ended after it; strace, the
        spawned process when tracing, exits on its own once its last tracee has, having
        written its whole log.
        """
        if self._proc is None:
            return
        with contextlib.suppress(Exception):
            self._graceful()
        own = self._proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(
            _comm(p) not in self.helpers for p in token_pids(self.token) if p != own
        ):
            time.sleep(0.05)
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            pids = [p for p in token_pids(self.token) if p != own]
            if not pids:
                break
            _signal_pids(pids, sig)
            until = time.monotonic() + grace
            while time.monotonic() < until and any(p != own for p in token_pids(self.token)):
                time.sleep(0.05)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.log(f"# {self.name}: process {self._proc.pid} still running: SIGKILL")
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._proc = None

    def cpu_seconds(self) -> float:
        """CPU seconds the server's processes used so far (user + system): those carrying
        its token and the descendants of the process spawned (Redis rewrites its process
        title over its environment, so its token is no longer found there); not the fsync
        counter's own process (perf or strace) when one was spawned."""
        if self._proc is None:
            return 0.0
        own = self._proc.pid
        pids = set(token_pids(self.token)) | set(process_tree(own))
        if self.fsyncs is not None:
            pids.discard(own)
        return cpu_seconds(sorted(pids))

    def cleanup(self) -> None:
        """Remove the data directory if this object created it."""
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer(_Server):
    """A private ``redis-server`` with ``appendonly yes``, ``appendfsync always``, no RDB."""

    name = "redis"

    def start(self, timeout: float = 30.0) -> None:
        """Start and wait until PING answers."""
        data = self.dir / "data"
        data.mkdir(exist_ok=True)
        options = {
            "bind": "127.0.0.1",
            "port": str(self.port),
            "dir": str(data),
            "appendonly": "yes",
            "appendfsync": "always",
            "save": "",
            "daemonize": "no",
            "protected-mode": "yes",
            "logfile": "",
        }
        argv = [_which("redis-server") or "redis-server"]
        for key, value in options.items():
            argv += [f"--{key}", value]
        self._spawn(argv, dict(os.environ))
        import redis

        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2).ping()
                return
            except redis.exceptions.RedisError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"redis-server not answering on 127.0.0.1:{self.port}") from None
                time.sleep(0.1)

    def version(self) -> str:
        """The server's version, as INFO reports it."""
        import redis

        return str(redis.Redis(host="127.0.0.1", port=self.port).info("server")["redis_version"])

    def _graceful(self) -> None:
        import redis

        with contextlib.suppress(redis.exceptions.ConnectionError):
            redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10).shutdown(nosave=True)


class RabbitMQServer(_Server):
    """A private single-node RabbitMQ broker (no plugins) on free ports of 127.0.0.1."""

    name = "rabbitmq"
    helpers = ("epmd",)

    def start(self, timeout: float = 180.0) -> None:
        """Start and wait until an AMQP connection opens."""
        home = self.dir / "home"
        home.mkdir(exist_ok=True)
        cookie = home / ".erlang.cookie"
        cookie.write_text(uuid.uuid4().hex.upper())
        cookie.chmod(0o400)
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq-env.conf").write_text("")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nlog.console = false\nlog.file.level = warning\n"
        )
        self.dist_port = free_port()
        self.epmd_port = free_port()
        env = dict(
            os.environ,
            HOME=str(home),
            RABBITMQ_NODENAME=f"bench{self.token[:8]}@localhost",
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_BASE=str(self.dir),
            RABBITMQ_MNESIA_BASE=str(self.dir / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.dir / "log"),
            RABBITMQ_PID_FILE=str(self.dir / "rabbitmq.pid"),
            RABBITMQ_CONFIG_FILE=str(self.dir / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(self.dir / "advanced.config"),
            RABBITMQ_CONF_ENV_FILE=str(self.dir / "rabbitmq-env.conf"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.dir / "enabled_plugins"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
            ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
        )
        for key in ("RABBITMQ_USE_LONGNAME", "NOTIFY_SOCKET"):
            env.pop(key, None)
        self._spawn([_which("rabbitmq-server") or "rabbitmq-server"], env)
        import pika

        params = pika.ConnectionParameters(
            host="127.0.0.1",
            port=self.port,
            connection_attempts=1,
            socket_timeout=5,
            blocked_connection_timeout=5,
        )
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                pika.BlockingConnection(params).close()
                return
            except pika.exceptions.AMQPError:
                if time.monotonic() > deadline:
                    tail = self._stdout.read_text(errors="replace")[-3000:]
                    raise TimeoutError(f"RabbitMQ not answering on 127.0.0.1:{self.port}:\n{tail}") from None
                time.sleep(0.5)

    def _graceful(self) -> None:
        # beam.smp stops cleanly on SIGTERM (the wrapper script's own handler does the same).
        _signal_pids([p for p in token_pids(self.token) if _comm(p).startswith("beam")], signal.SIGTERM)


def ensure_python_clients(log: Log = _print, timeout: float = 600.0) -> None:
    """Install the ``bench`` extra (pika, redis) into this interpreter if an import fails."""
    try:
        import pika  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        root = Path(__file__).resolve().parent.parent
        log(f"# pika/redis missing: {Path(sys.executable).name} -m pip install -e '{root}[bench]'")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "-e", f"{root}[bench]"],
            check=True,
            timeout=timeout,
        )


def debian_version(package: str) -> str:
    """The installed version of a Debian package ('?' if dpkg does not know it)."""
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return done.stdout.strip() or "?"
