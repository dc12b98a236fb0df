"""The metadata partition's fixed names (Kafka's `__cluster_metadata`, topic id 1)."""
from __future__ import annotations

import uuid

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's fixed id for the metadata topic
METADATA_KEY = (METADATA_TOPIC, 0)
