"""`__cluster_metadata` as a snapshot-policy partition: the committed records replayed into the
image; the snapshot machinery sees the image as a key/value map (entity key -> its record)."""
from __future__ import annotations

from ...protocol.metadata_records import decode_metadata_record, encode_metadata_record

from ..snapshots.state_machine import KeyValueStateMachine, PreparedState
from .image import MetadataImage


class MetadataStateMachine(KeyValueStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.image = MetadataImage()
        self.touched: set[bytes] = set()   # entity keys changed since the node last looked
        self.reloaded = False              # the image was replaced (a snapshot was loaded)

    def prepare(self, items, last_timestamp: int) -> PreparedState:
        """The records replayed into a new image, beside the key/value map (any thread)."""
        image = MetadataImage()
        state = {}
        for key, value in items:
            image.replay(decode_metadata_record(value))
            state[key] = value
        return PreparedState(state, last_timestamp, extra=image)

    def install(self, prepared: PreparedState, end_offset: int) -> None:
        self.image = prepared.extra
        super().install(prepared, end_offset)
        self.reloaded = True

    def entries_of(self, record):
        """A metadata record changes entities of the image; the state holds each changed
        entity's current record (or loses it)."""
        if record.value is None:
            return None
        image = self.image
        entries = []
        for key in image.replay(decode_metadata_record(record.value)):
            entity = image.entity_record(key)
            entries.append((key, None if entity is None else encode_metadata_record(entity)))
            self.touched.add(key)
        return entries
