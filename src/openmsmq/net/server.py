"""Run a queue manager with its MS-MQQB listener until told to stop (``openmsmq serve``)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from openmsmq.config import Config
from openmsmq.net.mqqb import MQQBNode, NetConfig
from openmsmq.protocol.events import SessionConfig
from openmsmq.protocol.incoming import OrderAckConfig
from openmsmq.protocol.outgoing import ResendConfig
from openmsmq.qm.manager import QueueManager
from openmsmq.qm.transfer import Transfer, TransferConfig, routes_from

__all__ = ["serve", "transfer_config"]

log = logging.getLogger("openmsmq.serve")


def transfer_config(config: Config) -> TransferConfig:
    """The :class:`TransferConfig` of a loaded configuration."""
    m, p = config.mqqb, config.protocol
    addresses = {m.listen_address.lower()}
    if m.advertised_address:
        addresses.add(m.advertised_address.lower())
    if config.qm.name:
        addresses.add(config.qm.name.lower())
    return TransferConfig(
        local_addresses=tuple(sorted(addresses)),
        routes=routes_from((r.destination, r.next_hop) for r in m.routes),
        session=SessionConfig(
            window_size=p.window_size,
            ack_wait_timeout=p.ack_wait_timeout,
            initialization_timeout=p.session_initialization_timeout,
            cleanup_interval=p.session_cleanup_interval,
        ),
        order_ack=OrderAckConfig(p.order_ack_timeout, p.maximum_order_ack_delay),
        resend=ResendConfig(
            p.resend_timeouts_short, p.resend_timeouts_medium, p.resend_timeouts_long, p.resend_timeouts_final
        ),
    )


async def serve(config: Config, *, ready: Callable[[MQQBNode, QueueManager], None] | None = None) -> None:
    """Open the QM over ``config.qm.data_dir``, listen, transfer; stop cleanly on
    SIGTERM / SIGINT (listener closed, store work flushed, sessions closed, store closed)."""
    loop = asyncio.get_running_loop()
    qm = QueueManager(config.qm.data_dir, computer_name=config.qm.name or None, expire_interval=1.0)
    try:
        transfer = Transfer(qm, transfer_config(config), loop.time())
        m = config.mqqb
        node = MQQBNode(
            transfer,
            NetConfig(
                host=m.listen_address,
                port=m.port,
                allow=m.peer_allowed,
                backoff_min=m.connect_backoff_min,
                backoff_max=m.connect_backoff_max,
            ),
        )
        await node.start()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        host, port = node.address
        log.info("queue manager %s serving %s on %s:%d", qm.guid, config.qm.data_dir, host, port)
        if ready is not None:
            ready(node, qm)
        await stop.wait()
        log.info("stopping")
        await node.stop()
    finally:
        qm.close()
    log.info("stopped")
