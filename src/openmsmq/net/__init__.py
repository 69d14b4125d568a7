"""asyncio networking: the MS-MQQB listener and connectors (:mod:`openmsmq.net.mqqb`)."""

from openmsmq.net.mqqb import MQQB_PORT, MQQBNode, NetConfig, allow_networks

__all__ = ["MQQB_PORT", "MQQBNode", "NetConfig", "allow_networks"]
