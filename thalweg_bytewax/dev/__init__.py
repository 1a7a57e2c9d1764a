"""What development runs on: generated sample sources (the flagship flow's sample orders).

Nothing here is needed in production; it is what makes a flow runnable with no Kafka,
registry or database.
"""
