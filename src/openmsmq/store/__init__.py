"""openmsmq.store"""
