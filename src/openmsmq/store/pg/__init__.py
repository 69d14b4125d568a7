"""The PostgreSQL backend of the store (``store.backend = "postgresql"``).

:class:`~openmsmq.store.pg.db.PgStore` runs the store's operations in PostgreSQL
(psycopg 3): one transaction per group commit, fenced writes for high availability,
reconnection. :mod:`~openmsmq.store.pg.schema` owns its schema and version;
:mod:`~openmsmq.store.pg.dialect` runs the operations' statements on a psycopg
connection. psycopg is imported only when this package is.
"""
