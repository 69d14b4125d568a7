"""Which store a queue manager opens: the SQLite file of its data directory, or the
PostgreSQL database its configuration or its data directory names.

A data directory created on PostgreSQL keeps ``openmsmq.pg.json``
(:data:`openmsmq.runtime.STORE_POINTER`: backend, DSN, QM GUID). A queue manager opened
on that directory without a DSN of its own (the command line, an application) uses that
database; one given a DSN (``store.dsn``) uses it, and the database must hold the QM the
directory names: another QM's database is refused before anything is written.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from openmsmq.errors import ConfigError
from openmsmq.qm.options import StoreOptions
from openmsmq.runtime import STORE_FILE, read_store_pointer, write_store_pointer
from openmsmq.store.backend import StoreBackend, open_store

__all__ = ["StoreChoice"]


class StoreChoice:
    """The store of the queue manager in ``data_dir`` under ``opts`` (see the module
    docstring): :meth:`open`, then :meth:`record` with the QM GUID the store holds."""

    def __init__(self, data_dir: Path, opts: StoreOptions) -> None:
        self.data_dir = data_dir
        try:
            pointer = read_store_pointer(data_dir)
        except ValueError as exc:
            raise ConfigError("store.dsn", f"{data_dir}: {exc}") from None
        self.backend = opts.backend
        self.dsn = opts.dsn
        self.expected: uuid.UUID | None = None
        if pointer is not None:
            self.expected = uuid.UUID(pointer["qm_guid"])
            if not self.dsn:
                self.backend, self.dsn = pointer["backend"], pointer["dsn"]
            elif self.backend != "postgresql":
                raise ConfigError(
                    "store.backend", f"{data_dir} keeps its store in PostgreSQL, not {self.backend}"
                )
        self.opts = opts

    def open(self, *, threaded: bool, integrity_check: bool) -> StoreBackend:
        """Open the store (ConfigError naming the setting that is wrong)."""
        o = self.opts
        return open_store(
            self.backend,
            path=self.data_dir / STORE_FILE,
            dsn=self.dsn,
            threaded=threaded,
            max_batch_ops=o.max_batch_ops,
            max_commit_wait=o.max_commit_wait,
            qm_quota=o.qm_quota_bytes,
            expected_guid=self.expected,
            sqlite_options={
                "integrity_check": integrity_check,
                "synchronous": o.synchronous,
                "disk_reserve": o.disk_reserve,
            },
        )

    def record(self, guid: uuid.UUID) -> None:
        """After the QM state is created or read: a PostgreSQL store is named in the data
        directory (with the QM GUID it holds)."""
        if self.backend == "postgresql" and self.expected != guid:
            write_store_pointer(self.data_dir, self.backend, self.dsn, str(guid))
