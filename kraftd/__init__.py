"""kraftd: a Kafka-wire-protocol daemon with fetch sessions, leader-epoch fencing and snapshots."""
__version__ = "0.1.0"
