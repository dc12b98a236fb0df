"""KIP-630 snapshots of snapshot-policy partitions: when to take one and what follows
(partition_snapshots.py), and the key/value state their logs materialise (state_machine.py)."""
