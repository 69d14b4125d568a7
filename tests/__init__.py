"""The test suite of openmsmq (a package, so that shared helpers import as ``tests.X``)."""
