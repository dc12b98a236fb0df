"""KIP-320 on the wire: OffsetCommit stores the committed leader epoch and OffsetFetch returns
it (v5+, and per group in v8+ batches); a commit with generation -1 (assign() users) is
accepted for a group without members; DeleteGroups then removes the group and its offsets."""
from __future__ import annotations

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from tests.clients.helpers import RawClient
from tests.groups.support import make_topic
from tests.support.waiting import wait_until

pytestmark = pytest.mark.clients


def _commit(raw, group, topic, offset, epoch, version=9):
    R = m.OffsetCommitRequest
    return raw.request(api.OFFSET_COMMIT, version, R(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[R.OffsetCommitRequestTopic(
            name=topic, partitions=[R.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=offset + p, committed_leader_epoch=epoch,
                committed_metadata=f"meta-{p}") for p in range(2)])]))


def test_leader_epoch_round_trips(groups_server):
    topic, group = "epochs", "epoch-group"
    make_topic(groups_server.bootstrap, topic, 10, partitions=2)
    with RawClient(groups_server.bootstrap) as raw:
        def coordinator():
            found = raw.request(api.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
            answer = found.coordinators[0]
            # The first one creates __consumer_offsets: COORDINATOR_NOT_AVAILABLE until its logs
            # are open, as Kafka answers; clients retry.
            assert answer.error_code in (0, ErrorCode.COORDINATOR_NOT_AVAILABLE), answer
            return answer if answer.error_code == 0 else None

        assert wait_until(coordinator, 10, "the group coordinator").port == groups_server.port
        committed = _commit(raw, group, topic, 5, 7)
        assert [p.error_code for t in committed.topics for p in t.partitions] == [0, 0]

        F = m.OffsetFetchRequest
        old = raw.request(api.OFFSET_FETCH, 5, F(group_id=group, topics=[
            F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1, 2])]))
        assert old.error_code == 0
        assert [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata)
                for p in old.topics[0].partitions] == [(0, 5, 7, "meta-0"), (1, 6, 7, "meta-1"), (2, -1, -1, "")]

        batched = raw.request(api.OFFSET_FETCH, 8, F(groups=[
            F.OffsetFetchRequestGroup(group_id=group, topics=None),
            F.OffsetFetchRequestGroup(group_id="nobody", topics=None)], require_stable=False))
        first, second = batched.groups
        assert first.error_code == 0 and second.error_code == 0 and second.topics == []
        assert [(p.committed_offset, p.committed_leader_epoch) for p in first.topics[0].partitions] == [(5, 7), (6, 7)]

        # A later commit without an epoch (v5 has none) stores -1.
        _commit(raw, group, topic, 9, 0, version=5)
        again = raw.request(api.OFFSET_FETCH, 6, F(group_id=group, topics=None))
        assert [(p.committed_offset, p.committed_leader_epoch) for p in again.topics[0].partitions] == [(9, -1), (10, -1)]

        described = raw.request(api.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=[group]))
        assert described.groups[0].group_state == "Empty" and described.groups[0].members == []
        listed = raw.request(api.LIST_GROUPS, 4, m.ListGroupsRequest(states_filter=["Empty"]))
        assert group in [g.group_id for g in listed.groups]

        deleted = raw.request(api.DELETE_GROUPS, 2, m.DeleteGroupsRequest(groups_names=[group, "nobody"]))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            (group, 0), ("nobody", ErrorCode.GROUP_ID_NOT_FOUND)]
        gone = raw.request(api.OFFSET_FETCH, 6, F(group_id=group, topics=None))
        assert gone.topics == []
