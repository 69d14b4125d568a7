"""SQLite schema of the store and its migrations.

The schema version lives in ``PRAGMA user_version``; :func:`migrate` applies every
missing step in one transaction at open. ``PRAGMA application_id`` marks a file as an
openmsmq store so a foreign SQLite file is refused instead of being written into.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from openmsmq.store.props import convert_v5
from openmsmq.store.records import MESSAGE_COLUMNS

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "migrate"]

#: ``PRAGMA application_id`` of an openmsmq store: ASCII "MSMQ".
APPLICATION_ID = 0x4D534D51

_MESSAGE_TYPES = {
    "body": "BLOB NOT NULL",
    # Every attribute SQL never filters on, packed (openmsmq.store.records.message_to_row).
    "props": "BLOB NOT NULL",
}


def _message_table_sql() -> str:
    cols = []
    for name in MESSAGE_COLUMNS:
        if name == "lookup_id":
            # LookupIdentifier is the rowid: messages are stored in LookupIdentifier order.
            cols.append("lookup_id INTEGER PRIMARY KEY")
        else:
            cols.append(f"{name} {_MESSAGE_TYPES.get(name, 'INTEGER NOT NULL')}")
    cols += [
        "queue_id INTEGER NOT NULL",
        # Queue position: ((7 - priority) << 56) | lookup_id. Orders by priority (higher
        # first), then LookupIdentifier, i.e. MessagePositionList order (MS-MQDMPR 3.1.1.2).
        "order_key INTEGER NOT NULL",
        # Absolute expiry (s since 1970) or NULL; expire_class is the Nack class recorded
        # when it fires (NackReceiveTimeout / NackReachQueueTimeout).
        "expire_at INTEGER",
        "expire_class INTEGER NOT NULL DEFAULT 0",
    ]
    return "CREATE TABLE messages (\n  " + ",\n  ".join(cols) + "\n)"


_V1 = [
    """CREATE TABLE qm_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  qm_guid BLOB NOT NULL,
  sequential_id INTEGER NOT NULL,       -- QueueManager.SequentialID: last LookupIdentifier used
  message_id_ordinal INTEGER NOT NULL,  -- next reservable block of Identifier uniquifiers
  next_private_number INTEGER NOT NULL, -- next PrivateQueueNumber for user queues
  created_time INTEGER NOT NULL
)""",
    """CREATE TABLE queues (
  queue_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  display_name TEXT NOT NULL,
  queue_type INTEGER NOT NULL,
  private_number INTEGER NOT NULL,
  transactional INTEGER NOT NULL,
  label TEXT NOT NULL,
  quota_kb INTEGER NOT NULL,
  journal_quota_kb INTEGER NOT NULL,
  journal INTEGER NOT NULL,
  journal_queue_id INTEGER,
  parent_queue_id INTEGER,
  base_priority INTEGER NOT NULL,
  authenticate INTEGER NOT NULL,
  privacy_level INTEGER NOT NULL,
  created_time INTEGER NOT NULL,
  modify_time INTEGER NOT NULL,
  destination_format_name TEXT UNIQUE,
  msg_count INTEGER NOT NULL DEFAULT 0,
  total_bytes INTEGER NOT NULL DEFAULT 0
)""",
    _message_table_sql(),
    "CREATE INDEX messages_order ON messages (queue_id, order_key)",
    "CREATE INDEX messages_expiry ON messages (expire_at) WHERE expire_at IS NOT NULL",
    # MS-MQQB 3.1.1.3.1: OutgoingTxSequenceID / OutgoingTxSequenceNumber, MUST persist.
    """CREATE TABLE outgoing_sequences (
  queue_id INTEGER PRIMARY KEY,
  tx_sequence_id INTEGER NOT NULL,
  next_tx_sequence_number INTEGER NOT NULL
)""",
    # MS-MQDMPR 3.1.1.5 IncomingTransactionalTransferInfo + MS-MQQB IncomingTxSequence*.
    """CREATE TABLE incoming_sequences (
  sender_qm BLOB NOT NULL,
  destination TEXT NOT NULL,
  queue_id INTEGER,
  tx_sequence_id INTEGER NOT NULL,
  tx_sequence_number INTEGER NOT NULL,
  reject_count INTEGER NOT NULL,
  last_access_time REAL NOT NULL,
  PRIMARY KEY (sender_qm, destination)
) WITHOUT ROWID""",
]

_V2 = [
    # Idempotent send (openmsmq.store.ranges.send_idempotent): identities a queue already
    # accepted, kept for a retention window. The primary key makes the check and the
    # insert one atomic INSERT ... ON CONFLICT DO NOTHING inside the send's transaction.
    """CREATE TABLE send_identities (
  queue_id INTEGER NOT NULL,
  identity TEXT NOT NULL,
  created_time INTEGER NOT NULL,
  PRIMARY KEY (queue_id, identity)
) WITHOUT ROWID""",
    "CREATE INDEX send_identities_age ON send_identities (created_time)",
]

_V3 = [
    # Where FinalAcks for an incoming sequence go (MS-MQQB 3.1.7.17 DestinationForAck):
    # RemoteQMAddress and DirectFormatSession of the session it arrived on. Old rows
    # get '' / 0: their FinalAcks use the PRIVATE=<sender GUID>\\00000004 form.
    "ALTER TABLE incoming_sequences ADD COLUMN sender_address TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE incoming_sequences ADD COLUMN direct_format_session INTEGER NOT NULL DEFAULT 0",
]

_V4 = [
    # Queue write access for MS-MQQB senders: comma-separated source QM GUIDs allowed to
    # send into the queue; '' = every sender (the default security descriptor grants write
    # to everyone). A message from any other QM is rejected with NACK_ACCESS_DENIED.
    "ALTER TABLE queues ADD COLUMN allowed_senders TEXT NOT NULL DEFAULT ''",
]

_V5 = [
    # FinalAcks are matched on (TxSequenceID, TxSequenceNumber) among the messages waiting
    # for one (MS-MQQB 3.1.5.7; outgoing.settle_final_acks). Without an index each FinalAck
    # walked the whole awaiting queue: 20,000 waiting messages took 30 s to settle. Only
    # rows that asked for an acknowledgment are indexed (every message waiting for a
    # FinalAck did: JN / JP / FA), so the common send path pays nothing.
    "CREATE INDEX IF NOT EXISTS messages_final_ack ON messages (tx_sequence_id, tx_sequence_number)"
    " WHERE ack_wanted",
]


def _compact_props(conn: sqlite3.Connection) -> None:
    """Rewrite every stored message's ``props`` in the compact layout of
    :mod:`openmsmq.store.props` (the GUIDs a message usually repeats or leaves null, and
    a zero CorrelationId and the lengths of absent strings are left out): 63 bytes less
    for a message sent on this QM. One ``UPDATE`` runs
    :func:`openmsmq.store.props.convert_v5` over the rows."""
    conn.create_function("openmsmq_props_v6", 1, convert_v5, deterministic=True)
    try:
        conn.execute("UPDATE messages SET props = openmsmq_props_v6(props)")
    finally:
        conn.create_function("openmsmq_props_v6", 1, None)


#: A migration step: an SQL statement, or a function run on the connection.
_Step = str | Callable[[sqlite3.Connection], None]
_V6: list[_Step] = [_compact_props]


def _add_retry_policy(conn: sqlite3.Connection) -> None:
    """A queue's retry policy (openmsmq.retry_policy): '' = none. Added when missing
    (a store whose user_version was set back keeps its columns)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(queues)")}
    if "retry_policy" not in columns:
        conn.execute("ALTER TABLE queues ADD COLUMN retry_policy TEXT NOT NULL DEFAULT ''")


_V7: list[_Step] = [
    _add_retry_policy,
    # When a message parked in a ;retry subqueue returns to its queue (openmsmq.store.moves):
    # stored, so that a retry cycle survives a restart. Keyed by the message's
    # LookupIdentifier in the subqueue (never reused: a row left by a message received
    # from the subqueue meanwhile matches nothing and is dropped when due).
    """CREATE TABLE IF NOT EXISTS retry_due (
  lookup_id INTEGER PRIMARY KEY,
  queue_id INTEGER NOT NULL,
  due_at REAL NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS retry_due_at ON retry_due (due_at)",
]

#: Migration steps; index i brings the schema from version i to i + 1.
_MIGRATIONS: list[Sequence[_Step]] = [_V1, _V2, _V3, _V4, _V5, _V6, _V7]
SCHEMA_VERSION = len(_MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; return the version found at open.

    Runs inside ``BEGIN IMMEDIATE`` so two processes cannot migrate at once.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        for step in _MIGRATIONS[found:]:
            for sql in step:
                if callable(sql):
                    sql(conn)
                else:
                    conn.execute(sql)
        if found < SCHEMA_VERSION:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found
