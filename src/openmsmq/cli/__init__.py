"""openmsmq.cli"""
