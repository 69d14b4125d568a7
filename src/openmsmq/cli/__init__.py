"""The ``openmsmq`` command (click + rich; rich is imported only inside this package).

Layout
    :mod:`openmsmq.cli.main` defines the ``openmsmq`` click group with the global
    ``--qm`` option (env ``OPENMSMQ_QM``; a data directory, ``file:///path`` or later
    ``grpc://host:port``; default ``./data``) and ``--json``, and the error handling:
    any :class:`~openmsmq.errors.OpenMSMQError` (or ``OSError``) becomes one line on
    stderr (``error: MQ_ERROR_QUEUE_NOT_FOUND (0xC00E0003): ...``) and exit status 1,
    Ctrl-C exit status 130, click's usage errors 2 (``docs/cli.md``). Name the thing at
    fault in an error with :func:`openmsmq.errors.quoted` (as typed, one line).
    :mod:`openmsmq.cli.context` gives commands the connection (which never creates a
    queue manager), the output helpers and :func:`~openmsmq.cli.context.confirm`.

Adding a command module (``serve``, ``status``, ``config``, ``dlq``, ...)
    1. Write ``src/openmsmq/cli/<name>_cmds.py`` defining click commands and::

           def register(group: click.Group) -> None:
               group.add_command(serve)

       Inside a command, ``ctx_of(click_ctx)`` (from :mod:`openmsmq.cli.context`) gives
       ``.connection()`` (opened on first use, closed at exit), ``.target``,
       ``.json`` and ``.emit(doc, human=callable)``; decorate with ``@json_option`` to
       accept ``--json`` after the subcommand too.
    2. Map each command it adds to the module in ``COMMANDS`` in :mod:`openmsmq.cli.main`
       (one line per command; the module is imported only when the command is used).

    Keep logic a library user would also need in the library (:mod:`openmsmq.client`,
    :mod:`openmsmq.config`, ...); a command parses options, calls it and prints.
"""
