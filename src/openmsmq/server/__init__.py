"""The composition root: what ``openmsmq serve`` assembles (:mod:`openmsmq.server.serve`),
the configuration mapped onto option objects (:mod:`openmsmq.server.options`), and the one
factory that opens a queue manager with its acknowledgments wired
(:mod:`openmsmq.server.node`), used by ``serve`` and by the in-process client alike.

Nothing is imported here, so the in-process client pays only for the factory.
"""
