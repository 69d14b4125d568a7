"""High availability: active/standby nodes of one queue manager on a shared store.

* :mod:`openmsmq.ha.lease` — the lease and fencing epoch (sans-I/O): who serves, until when.
* :mod:`openmsmq.ha.driver` — runs the lease core under asyncio against the store's lease.
"""
