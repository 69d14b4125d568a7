"""A Spark standalone cluster on loopback for the tests: a master and workers started
with ``bin/spark-class`` of the pip-installed pyspark (its package has no
``sbin/start-master.sh``), jobs submitted with its ``bin/spark-submit``.

Every process is started in a new session and stopped by its process group (SIGTERM,
then SIGKILL after a bounded wait): a worker's executors are its children, so stopping
the worker stops them too. Every address is 127.0.0.1 (``SPARK_LOCAL_IP``,
``--host``, ``spark.driver.bindAddress``): a host whose name resolves to loopback would
otherwise make Spark bind to the first other interface it finds.

Executors run the Python of :func:`executor_python`: the test environment's
dependencies without openmsmq, which reaches them only through ``--py-files`` (the
wheel built by ``make wheel``), as it would reach hosts that do not have it installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def spark_home() -> Path:
    """The pip-installed pyspark package directory (Spark's home in that layout)."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def spark_env(root: Path) -> dict[str, str]:
    """Environment of every Spark process of the cluster."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_LOG_DIR=str(root / "logs"),
        # The master's REST submission server takes a fixed port (6066): not needed here.
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=false",
    )
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH"):
        env.pop(name, None)
    return env


def stop_group(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL it if it is still there after ``grace`` s."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # children left behind (Python workers)
    if proc.poll() is None:
        proc.wait(10)


def _wait_for(log: Path, text: str, count: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{log.name} ended: " + log.read_text()[-3000:])
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} x{count} in {log} after {timeout} s: " + log.read_text()[-3000:])


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(entry.name))
    return out


def _cmdline(pid: int) -> str:
    try:
        return (
            (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


@dataclass
class Cluster:
    """A running standalone cluster: its master URL and processes."""

    root: Path
    master_url: str
    master: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def executor_pids(self) -> list[int]:
        """PIDs of the executor JVMs the workers run now (children of the worker JVMs)."""
        pids = []
        for worker in self.workers:
            # spark-class execs java: the worker's process is the JVM itself.
            for child in _children(worker.pid):
                if "CoarseGrainedExecutorBackend" in _cmdline(child):
                    pids.append(child)
        return pids

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            stop_group(proc)


def start_cluster(root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Cluster:
    """Start a master and ``workers`` workers on 127.0.0.1; returns once all registered."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    env = spark_env(root)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port = free_port()
    master_log = root / "master.log"
    with open(master_log, "wb") as out:
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", "0"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    cluster = Cluster(root, f"spark://127.0.0.1:{port}", master)
    try:
        _wait_for(master_log, "I have been elected leader", 1, master, 120)
        for i in range(workers):
            work = root / f"worker{i}"
            work.mkdir(exist_ok=True)
            with open(root / f"worker{i}.log", "wb") as out:
                cluster.workers.append(
                    subprocess.Popen(
                        [
                            spark_class,
                            "org.apache.spark.deploy.worker.Worker",
                            cluster.master_url,
                            "--host",
                            "127.0.0.1",
                            "--webui-port",
                            "0",
                            "--cores",
                            str(cores),
                            "--memory",
                            memory,
                            "--work-dir",
                            str(work),
                        ],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
        _wait_for(master_log, "Registering worker", workers, master, 120)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def build_wheel() -> Path:
    """``make wheel``: the openmsmq wheel in ``dist/`` (pure Python, no dependencies)."""
    subprocess.run(["make", "-s", "wheel"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    wheels = sorted((ROOT / "dist").glob("openmsmq-*.whl"), key=lambda p: p.stat().st_mtime)
    assert wheels, "make wheel made no wheel"
    return wheels[-1]


def executor_python(root: Path) -> Path:
    """A Python whose path has this environment's packages (pyspark, pyarrow, grpc, ...)
    but not openmsmq: a venv whose only ``.pth`` names the test environment's
    site-packages as a plain path entry, so that the ``.pth`` files there (the editable
    install of openmsmq among them) are not run."""
    env_dir = root / "exec-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    purelib = Path(sysconfig.get_paths(vars={"base": str(env_dir), "platbase": str(env_dir)})["purelib"])
    (purelib / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = env_dir / "bin" / "python"
    code = "import pyarrow, grpc, pyspark\ntry:\n import openmsmq\nexcept ImportError:\n print('ok')"
    probe = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "ok", probe
    return python


def submit(
    cluster: Cluster,
    script: Path,
    args: list[str],
    *,
    py_files: Path,
    python: Path,
    log: Path,
    confs: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``spark-submit`` ``script`` in client mode to ``cluster`` (a new process group).

    The driver and the executors run ``python``, which does not have openmsmq:
    ``py_files`` (``--py-files``) reaches the driver's path and the executors; the
    streaming source runner, a Python process Spark starts beside the driver without
    ``--py-files`` on its path, finds it on the ``PYTHONPATH`` given to spark-submit (on
    a driver host with openmsmq installed, neither is needed there)."""
    conf = {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.memory": "768m",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": str(python),
        "spark.pyspark.driver.python": str(python),
        **(confs or {}),
    }
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url,
           "--deploy-mode", "client", "--py-files", str(py_files)]  # fmt: skip
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(script), *args]
    env = spark_env(cluster.root)
    env["PYTHONPATH"] = str(py_files)
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=cluster.root, start_new_session=True,
        )  # fmt: skip


def copy_wheel_as_zip(wheel: Path, dest_dir: Path) -> Path:
    """The wheel under a ``.zip`` name: PySpark puts only ``.zip``/``.egg``/``.jar`` files
    of ``--py-files`` on its Python processes' path (``SparkContext.PACKAGE_EXTENSIONS``)."""
    dest = dest_dir / (wheel.stem + ".zip")
    shutil.copyfile(wheel, dest)
    return dest
