"""openmsmq: transactional MSMQ-style queue manager."""
__version__ = "0.1.0"
