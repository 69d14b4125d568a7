"""openmsmq.protocol"""
