"""openmsmq.remote"""
