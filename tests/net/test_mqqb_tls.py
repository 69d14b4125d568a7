"""MS-MQQB over mutual TLS between two queue managers on loopback, with a certificate per
QM naming its GUID (certificates made here with ``cryptography``): messages travel once
and in order; a peer whose certificate names another QM than it claims, a client without
a certificate and a plain session from a TLS peer's address are refused."""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
import uuid
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from openmsmq.net import MQQBNode, NetConfig
from openmsmq.net.tls import certified_qm, client_context, peer_matcher, server_context
from openmsmq.observability.metrics import Metrics
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import Transfer, TransferConfig
from openmsmq.wire.ids import TxSequenceId
from tests.net.peer_socket import SocketPeer
from tests.serve_proc import free_port

A, B, M = "127.0.0.1", "127.0.0.2", "127.0.0.3"
Q = "private$\\orders"
DEST_B = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"


class CA:
    """A certificate authority for the test, and certificates it signs."""

    def __init__(self, root: Path, name: str = "openmsmq test CA") -> None:
        self.root = root
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )  # fmt: skip
        self.path = root / f"{name.replace(' ', '-')}.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, guid: uuid.UUID | None, *, uri: bool = False) -> tuple[Path, Path]:
        """(certificate, key) files for a QM: its GUID as the subject CN (or a URI SAN)."""
        key = ec.generate_private_key(ec.SECP256R1())
        cn = str(guid) if guid is not None and not uri else name
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(self.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )  # fmt: skip
        if uri and guid is not None:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.UniformResourceIdentifier(f"urn:uuid:{guid}")]),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path, key_path = self.root / f"{name}.crt", self.root / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cert_path, key_path


class TlsQM:
    """A queue manager whose links to ``tls_peers`` are MS-MQQB over TLS."""

    def __init__(
        self, root: Path, address: str, port: int, tls_port: int, ca: CA, tls_peers: list[str]
    ) -> None:
        self.root, self.address, self.port, self.tls_port = root, address, port, tls_port
        self.data = root / address
        with QueueManager(self.data, integrity_check=False) as qm:
            self.guid = qm.guid
        self.cert, self.key = ca.issue(f"qm-{address}", self.guid, uri=address == B)
        self.ca = ca
        self.tls_peers = tls_peers
        self.metrics = Metrics()
        self.qm: QueueManager | None = None
        self.node: MQQBNode | None = None

    async def start(self) -> TlsQM:
        self.qm = QueueManager(self.data, integrity_check=False, metrics=self.metrics)
        loop = asyncio.get_running_loop()
        transfer = Transfer(self.qm, TransferConfig(local_addresses=(self.address,)), loop.time())
        cfg = NetConfig(
            host=self.address, port=self.port, backoff_min=0.05, backoff_max=0.2, poll_interval=0.02,
            tls_server=server_context(self.cert, self.key, self.ca.path),
            tls_client=client_context(self.cert, self.key, self.ca.path),
            tls_port=self.tls_port, tls_peers=peer_matcher(self.tls_peers),
        )  # fmt: skip
        self.node = MQQBNode(transfer, cfg)
        await self.node.start()
        return self

    async def stop(self) -> None:
        assert self.node is not None and self.qm is not None
        await self.node.stop()
        self.qm.close()


async def _wait_for(pred, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


def _outgoing(qm: QueueManager) -> int:
    return sum(r.msg_count for r in qm.list_queues(include_system=True) if r.queue_type == 4)


def _refusals(qm: TlsQM, rule: str) -> float:
    value = qm.metrics.registry.get_sample_value("openmsmq_refusals_total", {"rule": rule})
    return value or 0.0


def test_certified_qm_reads_the_guid_from_the_cn_or_a_uri_san() -> None:
    guid = uuid.uuid4()
    assert certified_qm({"subject": ((("commonName", str(guid)),),)}) == guid
    assert certified_qm({"subject": ((("commonName", f"{{{guid}}}"),),)}) == guid
    assert certified_qm({"subjectAltName": (("URI", f"urn:uuid:{guid}"),), "subject": ()}) == guid
    assert certified_qm({"subject": ((("commonName", "qm.example.com"),),)}) is None
    assert certified_qm(None) is None and certified_qm({}) is None


def test_transfer_over_mutual_tls_and_what_it_refuses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port, tls_port = free_port(A, B, M), free_port(A, B, M)
    ca = CA(tmp_path)

    async def main() -> None:
        b = TlsQM(tmp_path, B, port, tls_port, ca, [A])
        with QueueManager(b.data, integrity_check=False) as qb:
            qb.create_queue(Q, transactional=True)
        await b.start()
        a = await TlsQM(tmp_path, A, port, tls_port, ca, [B]).start()
        assert a.qm is not None and b.qm is not None
        try:
            tx = a.qm.begin()
            a.qm.send_many(DEST_B, [MessageRecord(body=f"m{i}".encode()) for i in range(50)], tx)
            tx.commit()
            await _wait_for(lambda: _outgoing(a.qm) == 0)  # type: ignore[arg-type]
            assert [m.body for m in b.qm.peek_range(Q, 0, 100)] == [f"m{i}".encode() for i in range(50)]
            # Every session between them went over TLS: B let no plain session of A in.
            assert _refusals(b, "tls-required") == 0
            assert b.node is not None and b.node.transports
            assert all(p.tls for p in b.node.transports.values())
            loop = asyncio.get_running_loop()

            def forger_claiming_b() -> bool:
                # A valid certificate of the CA for another QM, claiming B's GUID: refused.
                cert, key = ca.issue("forger", uuid.uuid4())
                ctx = client_context(cert, key, ca.path)
                peer = SocketPeer(A, tls_port, M, guid=b.guid, tls=ctx)
                peer.pump(0.5)
                is_open = peer.open
                peer.close()
                return is_open

            assert await loop.run_in_executor(None, forger_claiming_b) is False
            assert _refusals(a, "identity") == 1

            def without_certificate() -> bool:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.load_verify_locations(str(ca.path))
                try:
                    peer = SocketPeer(A, tls_port, M, tls=ctx)
                    peer.pump(0.5)
                    return peer.open
                except (ssl.SSLError, OSError, TimeoutError):
                    return False

            assert await loop.run_in_executor(None, without_certificate) is False

            def plain_from_a_tls_peer() -> bool:
                # B takes A's sessions over TLS only: a plain session from A's address is refused.
                peer = SocketPeer(B, port, A, guid=a.guid)
                peer.pump(0.5)
                return peer.open

            with caplog.at_level(logging.WARNING, "openmsmq.transfer"):
                assert await loop.run_in_executor(None, plain_from_a_tls_peer) is False
            assert _refusals(b, "tls-required") == 1
            assert any("tls-required" in r.getMessage() for r in caplog.records)

            def a_plain_sender_is_still_served() -> int:
                # Everyone else keeps being served: a plain peer from M (no TLS) sends to B.
                peer = SocketPeer(B, port, M)
                sid = TxSequenceId.from_int((int(b.qm.clock()) << 32) | 1)  # type: ignore[union-attr]
                peer.send(peer.transactional(Q, b"plain", sid, 1, 0), settle=0.5)
                peer.close()
                return 0

            await loop.run_in_executor(None, a_plain_sender_is_still_served)
            await _wait_for(lambda: len(b.qm.peek_range(Q, 0, 100)) == 51)  # type: ignore[union-attr]
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(asyncio.wait_for(main(), 90))
