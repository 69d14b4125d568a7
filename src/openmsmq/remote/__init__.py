"""Remote read: MS-MQRR semantics served over gRPC (see ``docs/remote.md``).

* :mod:`openmsmq.remote.core` — :class:`~openmsmq.remote.core.RemoteReadCore`, the server
  state (handles, cursors, PendingRequestTable and cleanup timers, sessions, remote
  transactions) over a QueueManager, without gRPC.
* :mod:`openmsmq.remote.server` — :class:`~openmsmq.remote.server.RemoteServer` and
  :func:`~openmsmq.remote.server.start_remote_server`, the gRPC service.
* :mod:`openmsmq.remote.read_calls` — read primitives over a QueueManager that need no server
  state: parameter checks of R_StartReceive, the cancellable sliced wait, cursor batches.
* :mod:`openmsmq.remote.session` — sessions and what they own (handles, transactions,
  waiting calls).
* :mod:`openmsmq.remote.packed` — the packed message form of batched replies.
* :mod:`openmsmq.remote.auth` — bearer tokens and per-queue permissions.
* ``openmsmq_remote.proto`` and its generated modules. Regenerate after editing it::

      .venv/bin/python -m grpc_tools.protoc -I src --python_out=src --pyi_out=src \\
          --grpc_python_out=src src/openmsmq/remote/openmsmq_remote.proto

Nothing is imported here, so ``import openmsmq.remote.auth`` does not load gRPC.
"""
