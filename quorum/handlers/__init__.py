"""One module per RPC. Each exposes handle(ctx, header, request, now_ms, peer) -> Outcome."""
from kraftd.protocol import api

from . import (allocate_producer_ids, alter_partition, api_versions, begin_quorum_epoch, broker_registration,
               create_topics, delete_records, delete_topics, describe_quorum, end_quorum_epoch, fetch, fetch_snapshot,
               find_coordinator, init_producer_id, list_offsets, metadata, offset_for_leader_epoch, produce, vote)

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
    api.VOTE: vote.handle,
    api.BEGIN_QUORUM_EPOCH: begin_quorum_epoch.handle,
    api.END_QUORUM_EPOCH: end_quorum_epoch.handle,
    api.DESCRIBE_QUORUM: describe_quorum.handle,
    api.DELETE_TOPICS: delete_topics.handle,
    api.ALTER_PARTITION: alter_partition.handle,
    api.BROKER_REGISTRATION: broker_registration.handle,
    api.ALLOCATE_PRODUCER_IDS: allocate_producer_ids.handle,
}
