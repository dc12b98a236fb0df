"""This node's part in the metadata quorum (sans-IO, driven by the Node).

- follows `__cluster_metadata` like any group; its committed records are the image;
- runs the Controller while it leads that partition (and has applied everything before);
- registers itself (RegisterBrokerRecord through BrokerRegistration), re-registering when the
  image says it is fenced or out of date;
- reports leadership and ISR of the data partitions it leads (AlterPartition), so Metadata on
  every node can name leaders, epochs and ISRs of partitions it does not host;
- moves the voters of the groups it leads to the replicas a reassignment names;
- takes producer-id blocks from the controller (AllocateProducerIds);
- forwards clients' CreateTopics/DeleteTopics to the controller and parks them until answered.
"""
from __future__ import annotations

import logging
import uuid

from ...protocol import api
from ...protocol import messages as m
from ...protocol.errors import ErrorCode

from ..limits import capped_timeout
from ..node_wiring import NodeStartup
from ..outcomes import Park, Respond
from ..raft.membership import maybe_record_voters
from ..raft.progress import caught_up_until
from .bootstrap_user import bootstrap_user_records
from .controller import Controller
from .image import MetadataImage
from .names import METADATA_KEY, METADATA_TOPIC
from .partition_reports import alter
from .producer_id_blocks import allocate
from .reassignments import completion
from .replica_moves import VoterMoves
from .registration import register
from .topic_creation import create_request_for, create_topics
from .voter_listener import VoterListener

log = logging.getLogger(__name__)

REPORT_INTERVAL_MS = 200
REREGISTER_AFTER_MS = 2000
CALL_RETRY_MS = 200
ALTER_PARTITION_VERSION = 2
BROKER_REGISTRATION_VERSION = 2  # v2: LogDirs (the directory id, KIP-858)
ALLOCATE_PRODUCER_IDS_VERSION = 0


class MetadataPlane:
    def __init__(self, config, *, replication, purgatory, notify, on_append, now_ms: int,
                 startup: NodeStartup) -> None:
        self.config = config
        # An unclean recovery's lost voters (`kraftd quorum force-leader`): once controller, we
        # write their removal from every partition's replicas, then `on_forced_done()`.
        self._forced_lost = tuple(startup.forced.lost) if startup.forced is not None else ()
        self._on_forced_done = startup.on_forced_done
        self.ctx = None                       # the node's HandlerContext (set by the node)
        self._on_append = on_append           # (partition) -> None: the controller appended
        self._auto_creating: dict[str, int] = {}
        self.node_id = config.node_id
        self.replication = replication
        self._purgatory = purgatory
        self._notify = notify                 # (keys) -> None: wake parked requests
        self.partition = None                 # __cluster_metadata-0, set by the node at start
        self.controller: Controller | None = None
        self.incarnation_id = uuid.UUID(int=replication.rng.getrandbits(128), version=4)
        self._next_report_ms = 0
        self._registering = False
        self._voter_listener = VoterListener()  # our listener in the VotersRecord (UpdateRaftVoter)
        self._next_registration_ms = 0
        self._reported: dict = {}            # partition key -> (epoch, isr) last sent
        self._moves = VoterMoves()            # the led groups' voters moved to their replicas
        self._reporting = False
        self._pid_block: tuple[int, int] | None = None   # [next, end)
        self._pid_requested = False
        self._forwards: dict[int, "DelayedForward"] = {}
        self._next_forward = 0

    # -- reading -------------------------------------------------------------------------------
    @property
    def machine(self):
        return self.partition.snapshots.machine

    @property
    def image(self) -> MetadataImage:
        return self.machine.image

    @property
    def leader_id(self) -> int:
        group = self.partition.raft
        return group.leader_id if group is not None else -1

    @property
    def epoch(self) -> int:
        return self.partition.leader_epoch

    def active_controller(self) -> Controller | None:
        c = self.controller
        return c if c is not None and c.active else None

    # -- driving -------------------------------------------------------------------------------
    def poll(self, now_ms: int, led_groups) -> None:
        """`led_groups()`: the data groups this node leads (called only when a report is due)."""
        self._controller_lifecycle(now_ms)
        if self.controller is not None:
            maybe_record_voters(self.partition.raft, self.config.voters or {}, now_ms)
            self.controller.fence_silent_brokers(self._last_heard, self.node_id, now_ms)
            if self.config.bootstrap_user is not None:
                records = bootstrap_user_records(self.config.bootstrap_user, self.controller.image, self.replication.rng)
                if records:
                    self.controller.append(records, now_ms)
                    log.info("bootstrap user %s created", records[0].name)
        self._maybe_register(now_ms)
        self._voter_listener.poll(self, now_ms)
        if now_ms >= self._next_report_ms:
            self._next_report_ms = now_ms + REPORT_INTERVAL_MS
            led = list(led_groups())
            self._moves.step(self.image, led, now_ms)
            self._report_partitions(led, now_ms)
        if self._pid_block is None and not self._pid_requested and self._pid_waiters():
            self._request_producer_ids(now_ms)

    def next_deadline_ms(self) -> int:
        return self._next_report_ms

    def _controller_lifecycle(self, now_ms: int) -> None:
        group = self.partition.raft
        if self.controller is not None and not self.controller.active:
            log.info("no longer the controller (epoch %d)", self.controller.epoch)
            self.controller = None
        if self.controller is None and group.is_leader:
            start = group.role.epoch_start_offset
            if self.partition.high_watermark > start and self.machine.applied_offset >= self.partition.high_watermark:
                self.controller = Controller(self.partition, self.image, purgatory=self._purgatory, now_ms=now_ms,
                                             broker_session_timeout_ms=self.config.broker_session_timeout_ms,
                                             on_append=self._appended,
                                             wall=self.ctx.wall if self.ctx is not None else None)
                log.info("controller at epoch %d", self.controller.epoch)
                if self._forced_lost:
                    self.controller.remove_lost_replicas(self._forced_lost, now_ms, self._forced_recorded)

    def _forced_recorded(self, response, now_ms: int) -> None:
        if response is not None and getattr(response, "error_code", 0):
            return  # not committed (we lost the leadership): the next controller here tries again
        log.warning("forced recovery recorded: nodes %s removed from every partition's replicas",
                    list(self._forced_lost))
        self._forced_lost = ()
        if self._on_forced_done is not None:
            self._on_forced_done()

    def _appended(self, partition) -> None:
        self._on_append(partition)

    def auto_create_pending(self, name: str, now_ms: int) -> bool:
        """The controller was asked for `name` less than a couple of seconds ago."""
        return self._auto_creating.get(name, -1) > now_ms

    def auto_create(self, name: str, partitions: int, now_ms: int, configs: dict | None = None) -> None:
        """A client asked for an unknown topic (Metadata/Produce auto-creation, or a
        FindCoordinator for `__consumer_offsets`): have the controller create it, at most once
        per name every couple of seconds."""
        if self.image.topic(name) is not None or self._auto_creating.get(name, -1) > now_ms:
            return
        self._auto_creating = {n: t for n, t in self._auto_creating.items() if t > now_ms}
        self._auto_creating[name] = now_ms + REREGISTER_AFTER_MS
        request = create_request_for(name, partitions, configs=configs)
        controller = self.active_controller()
        if controller is not None:
            timeout_ms = capped_timeout(request.timeout_ms, self.config.request_timeout_cap_ms, self.ctx.refusals)
            create_topics(self.ctx, controller, request, timeout_ms, now_ms)  # its answer goes nowhere
        else:
            self.call_controller(api.CREATE_TOPICS, CREATE_TOPICS_VERSION, request, now_ms, lambda r, t: None)

    def _last_heard(self, node_id: int) -> int:
        return self.replication.peer_fetch_ms.get(node_id, -1)

    # -- calls to the controller ---------------------------------------------------------------
    def call_controller(self, api_key: int, version: int, request, now_ms: int, on_done, timeout_ms: int = -1) -> bool:
        """Send to the metadata leader; False if there is none known (or it is us)."""
        leader = self.leader_id
        if leader < 0 or leader == self.node_id:
            return False
        self.replication.call(leader, api_key, version, request, now_ms, on_done, timeout_ms)
        return True

    # -- broker registration --------------------------------------------------------------------
    def _maybe_register(self, now_ms: int) -> None:
        if self._registering or now_ms < self._next_registration_ms:
            return
        me = self.image.brokers.get(self.node_id)
        c = self.config
        if (me is not None and not me.fenced and me.host == c.advertised_host and me.port == c.advertised_port
                and me.incarnation_id == self.incarnation_id
                and me.directory_id == self.replication.directory_id):
            return
        request = self.registration_request()
        controller = self.active_controller()
        if controller is not None:
            register(controller, request, now_ms)
            self._next_registration_ms = now_ms + REREGISTER_AFTER_MS
            return

        def done(response, at_ms):
            self._registering = False
            ok = response is not None and response.error_code == 0
            self._next_registration_ms = at_ms + (REREGISTER_AFTER_MS if ok else CALL_RETRY_MS)

        if self.call_controller(api.BROKER_REGISTRATION, BROKER_REGISTRATION_VERSION, request, now_ms, done):
            self._registering = True

    def registration_request(self):
        c = self.config
        Listener = m.BrokerRegistrationRequest.Listener
        return m.BrokerRegistrationRequest(
            broker_id=self.node_id, cluster_id=self.replication.cluster_id, incarnation_id=self.incarnation_id,
            listeners=[Listener(name="PLAINTEXT", host=c.advertised_host, port=c.advertised_port,
                                security_protocol=0)],
            features=[], rack=None, log_dirs=[self.replication.directory_id])

    # -- leadership and ISR reports ---------------------------------------------------------------
    def _report_partitions(self, led_groups, now_ms: int) -> None:
        if self._reporting:
            return
        image = self.image
        changes = []
        for group in led_groups:
            partition = group.partition
            topic = image.topics.get(partition.topic_id)
            info = topic.partitions.get(partition.index) if topic is not None else None
            if info is None:
                continue
            isr = self.isr_of(group, now_ms)
            if (info.leader == self.node_id and info.leader_epoch == group.epoch and sorted(info.isr) == isr
                    and completion(image, info, isr) is None):
                continue  # (a report that ends a move is sent until the move has ended)
            changes.append((partition, group.epoch, isr, info.partition_epoch))
        if not changes:
            return
        controller = self.active_controller()
        request = alter_partition_request(self.node_id, self.image.brokers.get(self.node_id), changes)
        if controller is not None:
            alter(controller, request, ALTER_PARTITION_VERSION, now_ms)
            return

        def done(response, at_ms):
            self._reporting = False

        if self.call_controller(api.ALTER_PARTITION, ALTER_PARTITION_VERSION, request, now_ms, done):
            self._reporting = True

    def isr_of(self, group, now_ms: int) -> list[int]:
        """The leader and the voters caught up within replica_lag_time_max_ms."""
        lag = self.config.replica_lag_time_max_ms
        progress = group.role.progress
        log_end = group.partition.log.log_end_offset
        # A new leader inherits the ISR it finds in the image (as Kafka's does from the
        # controller): those replicas count as caught up when its leadership began.
        topic = self.image.topics.get(group.partition.topic_id)
        info = topic.partitions.get(group.partition.index) if topic is not None else None
        inherited = set(info.isr) if info is not None else set()
        isr = [self.node_id]
        for voter, p in progress.by_voter.items():
            if voter == self.node_id:
                continue
            caught_up = p.last_caught_up_ms
            if voter in inherited:
                caught_up = max(caught_up, progress.started_ms)
            # An incremental session fetch that does not name a partition says its position is
            # unchanged: level with our log end, it is caught up as of that fetch; level with the
            # end before our latest append, it was caught up until that append.
            if p.end_offset >= log_end:
                caught_up = max(caught_up, group.session_fetch_ms(voter))
            else:
                until = caught_up_until(group.partition.log, p.end_offset)
                if until >= 0:
                    caught_up = max(caught_up, min(group.session_fetch_ms(voter), until))
            if caught_up >= 0 and now_ms - caught_up <= lag:
                isr.append(voter)
        return sorted(isr)

    # -- producer ids ------------------------------------------------------------------------------
    def allocate_producer_id(self) -> int | None:
        block = self._pid_block
        if block is None:
            return None
        pid, end = block
        self._pid_block = (pid + 1, end) if pid + 1 < end else None
        return pid

    def _pid_waiters(self) -> bool:
        return self._purgatory.watched(PID_KEY)

    def _request_producer_ids(self, now_ms: int) -> None:
        request = m.AllocateProducerIdsRequest(broker_id=self.node_id, broker_epoch=self._broker_epoch())
        controller = self.active_controller()
        if controller is not None:
            self._pid_requested = True
            outcome = allocate(controller, request, now_ms, on_done=self._producer_ids_answer)
            if isinstance(outcome, Respond):
                self._producer_ids_answer(outcome.response, now_ms)
            return

        def done(response, at_ms):
            self._producer_ids_answer(response, at_ms)

        if self.call_controller(api.ALLOCATE_PRODUCER_IDS, ALLOCATE_PRODUCER_IDS_VERSION, request, now_ms, done):
            self._pid_requested = True

    def _producer_ids_answer(self, response, now_ms: int) -> None:
        self._pid_requested = False
        if response is None or response.error_code != 0:
            return
        self._pid_block = (response.producer_id_start, response.producer_id_start + response.producer_id_len)
        self._notify([PID_KEY])

    def _broker_epoch(self) -> int:
        me = self.image.brokers.get(self.node_id)
        return me.broker_epoch if me is not None else -1

    # -- forwarding clients' requests ---------------------------------------------------------------
    def forward(self, header, request, now_ms: int, timeout_ms: int, fail_all, amend=None) -> Park:
        """Park a client's request and send it to the controller (again after failures) until
        answered or `timeout_ms` passes; `fail_all(request, error)` builds an error answer.
        `amend(response)`, if given, completes the answer (results decided here, such as the
        refusals of what the caller may not do)."""
        self._next_forward += 1
        op = DelayedForward(self, self._next_forward, header.request_api_key, header.request_api_version,
                            request, fail_all, now_ms + max(timeout_ms, 1), amend)
        self._forwards[op.number] = op
        op.send(now_ms)
        return Park(self._purgatory.park(op))

    def retry_forwards(self, now_ms: int) -> None:
        for op in list(self._forwards.values()):
            if op.response is None and not op.in_flight and now_ms >= op.next_try_ms:
                op.send(now_ms)


PID_KEY = ("producer-ids",)
CREATE_TOPICS_VERSION = 5


class DelayedForward:
    cancel_on_disconnect = True  # the client is gone: stop sending it to the controller

    def __init__(self, plane: MetadataPlane, number: int, api_key: int, version: int, request, fail_all,
                 deadline_ms: int, amend=None) -> None:
        self.plane = plane
        self.number = number
        self.api_key = api_key
        self.version = version
        self.request = request
        self.fail_all = fail_all
        self.amend = amend or _as_is
        self.deadline_ms = deadline_ms
        self.response = None
        self.in_flight = False
        self.next_try_ms = 0

    def send(self, now_ms: int) -> None:
        timeout = max(1, self.deadline_ms - now_ms)
        if self.plane.call_controller(self.api_key, self.version, self.request, now_ms, self._done, timeout):
            self.in_flight = True
        else:
            self.next_try_ms = now_ms + CALL_RETRY_MS

    def _done(self, response, now_ms: int) -> None:
        self.in_flight = False
        if response is None or _all_not_controller(response):
            self.next_try_ms = now_ms + CALL_RETRY_MS
            return
        self.amend(response)
        self.response = response
        self.plane._notify([self.key])

    @property
    def key(self):
        return ("forward", self.number)

    def watch_keys(self):
        return [self.key]

    def try_complete(self, now_ms: int):
        if self.response is not None:
            self.plane._forwards.pop(self.number, None)
        return self.response

    def expire(self, now_ms: int):
        self.plane._forwards.pop(self.number, None)
        response = self.fail_all(self.request, ErrorCode.REQUEST_TIMED_OUT)
        self.amend(response)
        return response

    def cancelled(self) -> None:
        self.plane._forwards.pop(self.number, None)  # an answer still in flight finds nobody


def _all_not_controller(response) -> bool:
    codes = [getattr(r, "error_code", 0) for r in (getattr(response, "topics", None) or getattr(response, "responses", None) or [])]
    top = getattr(response, "error_code", 0)
    return top == ErrorCode.NOT_CONTROLLER or (bool(codes) and all(c == ErrorCode.NOT_CONTROLLER for c in codes))


def alter_partition_request(node_id: int, me, changes):
    by_topic: dict = {}
    for partition, epoch, isr, partition_epoch in changes:
        by_topic.setdefault(partition.topic_id, []).append(
            m.AlterPartitionRequest.PartitionData(partition_index=partition.index, leader_epoch=epoch, new_isr=isr,
                                                  leader_recovery_state=0, partition_epoch=partition_epoch))
    return m.AlterPartitionRequest(
        broker_id=node_id, broker_epoch=me.broker_epoch if me is not None else -1,
        topics=[m.AlterPartitionRequest.TopicData(topic_id=topic_id, partitions=parts)
                for topic_id, parts in by_topic.items()])


def _as_is(response) -> None:
    pass
