"""Transfer between queue managers: MS-MQQB glue between :mod:`openmsmq.protocol`,
:mod:`openmsmq.qm` and :mod:`openmsmq.store` (sans-I/O).

Start with :class:`~openmsmq.transfer.engine.Transfer`; :mod:`openmsmq.net.mqqb` drives it
over asyncio sockets and ``tests/sim`` under a deterministic simulator.
"""
