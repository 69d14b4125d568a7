"""openmsmq.wire"""
