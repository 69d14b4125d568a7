"""openmsmq.qm"""
