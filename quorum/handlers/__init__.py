"""One module per RPC. Each exposes handle(ctx, header, request, now_ms, peer) -> Outcome."""
from kraftd.protocol import api

from . import (api_versions, create_topics, delete_records, fetch, fetch_snapshot, find_coordinator, init_producer_id,
               list_offsets, metadata, offset_for_leader_epoch, produce)

HANDLERS = {
    api.API_VERSIONS: api_versions.handle,
    api.METADATA: metadata.handle,
    api.PRODUCE: produce.handle,
    api.FETCH: fetch.handle,
    api.LIST_OFFSETS: list_offsets.handle,
    api.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
    api.CREATE_TOPICS: create_topics.handle,
    api.INIT_PRODUCER_ID: init_producer_id.handle,
    api.DELETE_RECORDS: delete_records.handle,
    api.FETCH_SNAPSHOT: fetch_snapshot.handle,
    api.FIND_COORDINATOR: find_coordinator.handle,
}
