"""The cluster's metadata (KRaft-style): records in `__cluster_metadata`, replayed on every node
into a `MetadataImage`; the metadata leader (the controller) is the only writer."""
