"""openmsmq.spark"""
