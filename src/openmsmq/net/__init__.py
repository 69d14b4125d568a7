"""openmsmq.net"""
