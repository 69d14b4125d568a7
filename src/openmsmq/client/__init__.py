"""openmsmq.client"""
