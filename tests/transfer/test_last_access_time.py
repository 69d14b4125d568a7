"""IncomingTransactionalTransferInfo.LastAccessTime: the protocol keeps the driver's clock
(``now``), the store keeps wall-clock seconds (the QM's clock)."""

from __future__ import annotations

from pathlib import Path

from openmsmq.transfer.engine import Transfer

from .harness import Clock, Net, send_tx

DEST_B = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders"
Q = "private$\\orders"
#: The QMs' wall clock runs this far ahead of the driver's (monotonic-like) clock.
WALL = 1_790_000_000.0


def test_last_access_time_is_persisted_as_wall_clock_and_restored_on_the_driver_clock(
    tmp_path: Path,
) -> None:
    net = Net(tmp_path, Clock(1_000.0))
    a = net.add("127.0.0.1")
    b = net.add("127.0.0.2")
    for node in (a, b):
        node.qm.clock = lambda: net.clock.now + WALL
    b.qm.create_queue(Q, transactional=True)
    send_tx(a.qm, DEST_B, [b"1", b"2", b"3"])
    net.settle()
    accepted_at = net.clock.now
    net.run_until_quiet()
    seq = next(iter(b.transfer.incoming))
    assert seq.last_access_time == accepted_at  # the protocol's clock
    [state] = b.qm.incoming_sequences()
    assert state.tx_sequence_number == 3
    assert state.last_access_time == accepted_at + WALL  # wall clock in the store
    # A restart on another driver clock (e.g. after a reboot) converts it back.
    restarted = Transfer(b.qm, b.transfer.config, 50.0)
    [restored] = list(restarted.incoming)
    assert restored.last_access_time == accepted_at + WALL - (net.clock.now + WALL - 50.0)
    for node in (a, b):
        node.qm.close()
