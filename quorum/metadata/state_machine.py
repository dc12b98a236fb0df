"""`__cluster_metadata` as a snapshot-policy partition: the committed records replayed into the
image; the snapshot machinery sees the image as a key/value map (entity key -> its record)."""
from __future__ import annotations

from kraftd.protocol.metadata_records import decode_metadata_record, encode_metadata_record
from kraftd.protocol.records import decode_records, iter_batch_headers

from ..snapshots.state_machine import KeyValueStateMachine
from .image import MetadataImage


class MetadataStateMachine(KeyValueStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.image = MetadataImage()
        self.touched: set[bytes] = set()   # entity keys changed since the node last looked
        self.reloaded = False              # the image was replaced (a snapshot was loaded)

    def load(self, items, end_offset: int, last_timestamp: int) -> None:
        image = MetadataImage()
        state = {}
        for key, value in items:
            image.replay(decode_metadata_record(value))
            state[key] = value
        self.image = image
        super().load(state.items(), end_offset, last_timestamp)
        self.reloaded = True

    def apply_batches(self, buf) -> int:
        state, baseline, changed, recent = self.state, self.baseline, self.changed, self.recent
        image, touched = self.image, self.touched
        start = self.applied_offset
        count = 0
        for pos, header in iter_batch_headers(buf):
            if header.last_offset < start:
                continue
            if not header.is_control:
                self.bytes_applied += header.size
                for record in decode_records(buf[pos:pos + header.size], header):
                    if record.offset < start or record.value is None:
                        continue
                    for key in image.replay(decode_metadata_record(record.value)):
                        entity = image.entity_record(key)
                        if entity is None:
                            state.pop(key, None)
                        else:
                            state[key] = encode_metadata_record(entity)
                        touched.add(key)
                        if baseline is not None and key in baseline:
                            changed.add(key)
                        if recent is not None:
                            recent.add(key)
                    count += 1
                self.last_timestamp = max(self.last_timestamp, header.max_timestamp)
            self.applied_offset = header.next_offset
        return count
