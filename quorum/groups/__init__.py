"""The classic consumer-group coordinator, sans-IO: groups, members, rebalances and committed
offsets, stored as records in the snapshot-policy topic `__consumer_offsets`."""
