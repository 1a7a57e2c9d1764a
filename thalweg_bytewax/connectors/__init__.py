"""Bytewax inputs and outputs of thalweg-bytewax.

Import the connector you need from its module, e.g.
``from thalweg_bytewax.connectors.kafka import KafkaSource``; this package imports
nothing so that optional clients stay unloaded.
"""
