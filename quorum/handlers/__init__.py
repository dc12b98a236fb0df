"""One module per RPC. Each exposes handle(ctx, header, request, now_ms, peer) -> Outcome."""
from ...protocol import api

from . import (add_raft_voter, allocate_producer_ids, alter_partition, alter_partition_reassignments, alter_user_scram_credentials, api_versions,
               begin_quorum_epoch, broker_registration, create_acls, create_topics, delete_acls, delete_groups,
               delete_records, delete_topics, describe_acls, describe_configs, describe_groups, describe_quorum,
               describe_user_scram_credentials, end_quorum_epoch, incremental_alter_configs,
               fetch, fetch_snapshot, find_coordinator, heartbeat, init_producer_id, join_group, leave_group,
               list_groups, list_offsets, list_partition_reassignments, metadata, offset_commit, offset_delete, offset_fetch,
               offset_for_leader_epoch, produce, remove_raft_voter, sync_group, update_raft_voter, vote)

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
    # the metadata quorum's voters (KIP-853)
    api.ADD_RAFT_VOTER: add_raft_voter.handle,
    api.REMOVE_RAFT_VOTER: remove_raft_voter.handle,
    api.UPDATE_RAFT_VOTER: update_raft_voter.handle,
    api.DELETE_TOPICS: delete_topics.handle,
    # moving partitions between nodes (KIP-455)
    api.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments.handle,
    api.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments.handle,
    api.ALTER_PARTITION: alter_partition.handle,
    api.BROKER_REGISTRATION: broker_registration.handle,
    api.ALLOCATE_PRODUCER_IDS: allocate_producer_ids.handle,
    # users' SCRAM credentials in the metadata log (KIP-554)
    api.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials.handle,
    api.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials.handle,
    # ACLs in the metadata log (authorizer = "acl")
    api.DESCRIBE_ACLS: describe_acls.handle,
    api.CREATE_ACLS: create_acls.handle,
    api.DELETE_ACLS: delete_acls.handle,
    # topic configs (in the metadata log in a cluster)
    api.DESCRIBE_CONFIGS: describe_configs.handle,
    api.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs.handle,
    # the classic group protocol (quorum/groups/)
    api.JOIN_GROUP: join_group.handle,
    api.SYNC_GROUP: sync_group.handle,
    api.HEARTBEAT: heartbeat.handle,
    api.LEAVE_GROUP: leave_group.handle,
    api.OFFSET_COMMIT: offset_commit.handle,
    api.OFFSET_FETCH: offset_fetch.handle,
    api.LIST_GROUPS: list_groups.handle,
    api.DESCRIBE_GROUPS: describe_groups.handle,
    api.DELETE_GROUPS: delete_groups.handle,
    api.OFFSET_DELETE: offset_delete.handle,
}
