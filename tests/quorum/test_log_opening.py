"""A new topic's logs opened off the loop (quorum/log_opening.py), as the server does: the
request that creates a topic does no file I/O; a job opens the logs; the topic is served once
the node hears the job is done."""
from __future__ import annotations

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.quorum.log_opening import OpenLogsJob
from kraftd.quorum.outcomes import Park, Respond
from kraftd.storage.background_writes import background_writes

from .node_context import NodeTestContext


def _context(tmp_path) -> NodeTestContext:
    return NodeTestContext.builder(tmp_path).with_logs_opened_off_loop().build()


def _create(ctx, name: str, partitions: int = 2, timeout_ms: int = 5000):
    return ctx.deliver(m.CreateTopicsRequest(timeout_ms=timeout_ms, validate_only=False, topics=[
        m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                              assignments=[], configs=[])]), 7)


def _metadata_error(ctx, name: str, allow_create: bool = False) -> int:
    response = ctx.respond(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)],
                                             allow_auto_topic_creation=allow_create), 12)
    return response.topics[0].error_code


def _answer(ctx, outcome):
    assert isinstance(outcome, Park), outcome
    return ctx.completions.get(outcome.token)


def test_create_topics_waits_for_the_job_that_opens_its_logs(tmp_path):
    ctx = _context(tmp_path)
    outcome = _create(ctx, "t")
    assert _answer(ctx, outcome) is None  # parked: nothing is served yet
    assert not (tmp_path / "t-0").exists() and not (tmp_path / "t-1").exists()  # no file made on the loop
    assert _metadata_error(ctx, "t") == ErrorCode.LEADER_NOT_AVAILABLE
    assert _metadata_error(ctx, "t", allow_create=True) == ErrorCode.LEADER_NOT_AVAILABLE
    produced = ctx.produce("t", 0, b"")
    assert isinstance(produced, Respond)
    assert produced.response.responses[0].partition_responses[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    again = _create(ctx, "t")  # a second CreateTopics for the name: it exists
    assert again.response.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS

    jobs = ctx.run_jobs()
    assert [type(j) for j in jobs] == [OpenLogsJob]
    answer = _answer(ctx, outcome)
    assert answer is not None and answer.topics[0].error_code == 0, answer
    assert answer.topics[0].topic_id == ctx.node.topics.get("t").topic_id
    assert (tmp_path / "t-0").is_dir() and (tmp_path / "t-1").is_dir()
    assert _metadata_error(ctx, "t") == 0
    assert ctx.produce_ok("t", 1, ["a", "b"]).base_offset == 1  # after the epoch's LeaderChange


def test_a_topic_deleted_while_its_logs_open_is_never_served(tmp_path):
    ctx = _context(tmp_path)
    outcome = _create(ctx, "gone")
    deleted = ctx.respond(m.DeleteTopicsRequest(topic_names=["gone"], timeout_ms=1000), 4)
    assert deleted.responses[0].error_code == 0
    assert ctx.node.topics.pending("gone") is None and "gone" not in ctx.node._hosting._catalog
    answer = _answer(ctx, outcome)
    assert answer is not None and answer.topics[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert [type(j) for j in ctx.run_jobs()] == []  # never handed out: nothing opens its logs
    background_writes().barrier()  # the directory is renamed and removed in the background
    assert ctx.node.topics.get("gone") is None and not (tmp_path / "gone-0").exists()


def test_the_logs_a_cancelled_job_opened_are_discarded(tmp_path):
    ctx = _context(tmp_path)
    outcome = _create(ctx, "late", partitions=1)
    jobs = ctx.node.jobs()  # handed out: a worker thread opens the logs
    jobs[0].run()
    assert (tmp_path / "late-0").is_dir()
    ctx.respond(m.DeleteTopicsRequest(topic_names=["late"], timeout_ms=1000), 4)
    ctx.node.on_job_done(jobs[0], ctx.now_ms)
    assert ctx.node.topics.get("late") is None
    background_writes().barrier()  # the directory is renamed and removed in the background
    assert not (tmp_path / "late-0").exists()  # renamed away (and removed in the background)
    assert _answer(ctx, outcome).topics[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert isinstance(_create(ctx, "late", partitions=1), Park)  # the name is free again
    ctx.run_jobs()
    assert ctx.produce_ok("late", 0, ["x"]).base_offset == 1


def test_a_failed_job_frees_the_name_and_the_creation_fails(tmp_path):
    ctx = _context(tmp_path)
    outcome = _create(ctx, "bad", partitions=1)
    ctx.run_jobs(error=OSError(28, "No space left on device"))
    assert _answer(ctx, outcome).topics[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert ctx.node.topics.get("bad") is None and ctx.node.topics.pending("bad") is None
    assert "bad" not in ctx.node._hosting._catalog
    retry = _create(ctx, "bad", partitions=1)
    ctx.run_jobs()
    assert _answer(ctx, retry).topics[0].error_code == 0


def test_a_restart_before_the_job_ran_opens_the_catalogued_topic(tmp_path):
    ctx = _context(tmp_path)
    _create(ctx, "kept", partitions=1)
    ctx = ctx.restart()  # the reservation was in the catalog: startup opens its logs inline
    assert ctx.node.topics.get("kept") is not None
    assert ctx.produce_ok("kept", 0, ["v"]).base_offset >= 1


def test_timeout_zero_starts_the_creation_without_waiting(tmp_path):
    ctx = _context(tmp_path)
    outcome = _create(ctx, "quick", timeout_ms=0)
    assert isinstance(outcome, Respond) and outcome.response.topics[0].error_code == 0
    assert ctx.node.topics.pending("quick") is not None
    ctx.run_jobs()
    assert ctx.node.topics.get("quick") is not None


def test_a_parked_create_times_out_and_the_creation_goes_on(tmp_path):
    ctx = _context(tmp_path)
    outcome = _create(ctx, "slow", timeout_ms=100)
    ctx.advance(200)
    assert _answer(ctx, outcome).topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    ctx.run_jobs()
    assert ctx.node.topics.get("slow") is not None


def test_an_auto_creation_opens_inline_and_answers_with_the_topic(tmp_path):
    """Metadata (and Produce) auto-creation keeps answering with the topic at once."""
    ctx = _context(tmp_path)
    response = ctx.respond(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="auto")],
                                             allow_auto_topic_creation=True), 12)
    assert response.topics[0].error_code == 0 and len(response.topics[0].partitions) == 1
    assert ctx.run_jobs() == []
    assert ctx.produce_ok("auto", 0, ["x"]).base_offset == 1


def test_the_name_of_a_cancelled_job_still_out_is_not_reused_until_it_returns(tmp_path):
    """Its logs sit in the directories a new topic of that name would open: the new topic
    waits (TOPIC_ALREADY_EXISTS, "marked for deletion", as Kafka answers), then succeeds."""
    ctx = _context(tmp_path)
    _create(ctx, "again", partitions=1)
    jobs = ctx.node.jobs()  # handed out, not back yet
    ctx.respond(m.DeleteTopicsRequest(topic_names=["again"], timeout_ms=1000), 4)
    refused = _create(ctx, "again", partitions=1)
    assert isinstance(refused, Respond)
    assert refused.response.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert "marked for deletion" in refused.response.topics[0].error_message
    produced = ctx.produce("again", 0, b"")  # nor may an auto-creation open it meanwhile
    assert produced.response.responses[0].partition_responses[0].error_code != 0
    jobs[0].run()
    ctx.node.on_job_done(jobs[0], ctx.now_ms)  # cancelled: its logs are discarded
    outcome = _create(ctx, "again", partitions=1)
    ctx.run_jobs()
    assert _answer(ctx, outcome).topics[0].error_code == 0
    assert ctx.produce_ok("again", 0, ["x"]).base_offset == 1
    assert (tmp_path / "again-0").is_dir()


def test_a_create_of_many_topics_checks_each_pending_topic_a_bounded_number_of_times(tmp_path, monkeypatch):
    """Woken once per topic served, the parked CreateTopics must not rescan every topic each
    time (200 topics: 20,499 checks before; 1,000 topics in one CreateTopics spent 1.2 s of loop
    time there, over their 1,000 callbacks)."""
    ctx = _context(tmp_path)
    n = 200
    outcome = ctx.deliver(m.CreateTopicsRequest(timeout_ms=30_000, validate_only=False, topics=[
        m.CreateTopicsRequest.CreatableTopic(name=f"many-{i}", num_partitions=1, replication_factor=1,
                                              assignments=[], configs=[]) for i in range(n)]), 7)
    topics = ctx.node.topics
    checks = []
    real = type(topics).pending
    monkeypatch.setattr(type(topics), "pending", lambda self, name: checks.append(name) or real(self, name))

    ctx.run_jobs()

    answer = _answer(ctx, outcome)
    assert answer is not None and [t.error_code for t in answer.topics] == [0] * n
    assert len(checks) <= 3 * n, len(checks)


def _settle(ctx, rounds: int, until=lambda: False) -> None:
    for _ in range(rounds):
        ctx.advance(20)
        ctx.flush()
        if until():
            return


def test_a_config_change_committed_while_the_logs_open_is_applied_once_they_are(tmp_path):
    """A one-voter cluster: IncrementalAlterConfigs commits a ConfigRecord while the new topic's
    logs are still being opened (reconciliation skips a topic it does not serve yet); the topic
    takes the image's configs when the job comes back."""
    ctx = (NodeTestContext.builder(tmp_path).with_logs_opened_off_loop()
           .with_config(voters={1: ("localhost", 9092)}).build())
    _settle(ctx, 100, lambda: ctx.node.plane.image.live_brokers())  # elected, registered
    ctx.run_jobs()
    _create(ctx, "t", partitions=1)
    _settle(ctx, 50, lambda: ctx.node.topics.pending("t") is not None)
    assert ctx.node.topics.pending("t") is not None and ctx.node.topics.get("t") is None
    A = m.IncrementalAlterConfigsRequest
    ctx.deliver(A(resources=[A.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
        A.AlterableConfig(name="retention.ms", config_operation=0, value="12345")])], validate_only=False), 1)
    _settle(ctx, 50, lambda: ctx.node.plane.image.configs.get("t"))
    assert ctx.node.plane.image.configs.get("t") == {"retention.ms": "12345"}
    assert ctx.node.topics.pending("t") is not None  # still opening
    ctx.run_jobs()
    assert ctx.node.topics.get("t").config.retention_ms == 12345
    assert ctx.node.topics.explicit_configs("t") == {"retention.ms": "12345"}
