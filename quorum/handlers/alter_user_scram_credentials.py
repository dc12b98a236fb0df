"""AlterUserScramCredentials v0 (KIP-554): the controller turns each upsertion's salted password
into a UserScramCredentialRecord (stored and server keys: quorum/metadata/scram.py) and each
deletion into a RemoveUserScramCredentialRecord, and answers once they commit; another node
forwards the request to it. One result per user, in the order the request names them. Kafka's
checks, per user (a user with any error changes nothing): a non-empty name, a known mechanism,
4,096 to 16,384 iterations, no (user, mechanism) twice, deletions of credentials that exist.
Without a metadata log (a node started without voters) there is nowhere to keep credentials.
Needs ALTER on the cluster (checked where the request arrives)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import (AlterUserScramCredentialsResponse, RemoveUserScramCredentialRecord,
                                  UserScramCredentialRecord)

from ..metadata.acls import Operation, ResourceType
from ..metadata.scram import MAX_ITERATIONS, MECHANISM_NAMES, MIN_ITERATIONS, credential
from ..outcomes import Respond

Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
NO_METADATA_LOG = "SCRAM credentials live in the metadata log: start kraftd with voters (a one-node cluster is 1@host:port)"


def handle(ctx, header, request, now_ms, peer):
    if ctx.plane is None:
        return Respond(fail_all(request, ErrorCode.INVALID_REQUEST, NO_METADATA_LOG))
    if not ctx.authorizer.allows(peer, Operation.ALTER, ResourceType.CLUSTER):
        return Respond(fail_all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    controller = ctx.plane.active_controller()
    timeout_ms = ctx.config.request_timeout_cap_ms
    if controller is None:
        if peer.is_node:  # forwarded to us as the controller: never forward it on
            return Respond(fail_all(request, ErrorCode.NOT_CONTROLLER))
        return ctx.plane.forward(header, request, now_ms, timeout_ms, fail_all)
    errors = _check(request, controller.image)
    records: list = []
    for d in request.deletions:
        if errors.get(d.name) is None:
            records.append(RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism))
    for u in request.upsertions:
        if errors.get(u.name) is None:
            c = credential(u.mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations)
            records.append(UserScramCredentialRecord(name=u.name, mechanism=u.mechanism, salt=c.salt,
                                                     stored_key=c.stored_key, server_key=c.server_key,
                                                     iterations=c.iterations))
    results = [Result(user=user, error_code=error[0] if error else ErrorCode.NONE,
                      error_message=error[1] if error else None) for user, error in errors.items()]
    response = AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)
    return controller.commit_results(records, response, [r for r in results if r.error_code == 0],
                                     timeout_ms, now_ms)


def _check(request, image) -> dict:
    """{user: None, or (error, message) for its first problem}, users in request order."""
    errors: dict = {}
    seen: set = set()

    def note(user, problem):
        if errors.get(user) is None:
            errors[user] = problem

    changes = [(d.name, d.mechanism, None) for d in request.deletions] + \
              [(u.name, u.mechanism, u.iterations) for u in request.upsertions]
    for user, mechanism, iterations in changes:
        errors.setdefault(user, None)
        if not user:
            note(user, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
        elif mechanism not in MECHANISM_NAMES:
            note(user, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
        elif (user, mechanism) in seen:
            note(user, (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"))
        elif iterations is None and mechanism not in image.scram.get(user, {}):
            note(user, (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"))
        elif iterations is not None and iterations < MIN_ITERATIONS:
            note(user, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"))
        elif iterations is not None and iterations > MAX_ITERATIONS:
            note(user, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"))
        seen.add((user, mechanism))
    return errors


def fail_all(request, error: ErrorCode, message: str | None = None):
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        Result(user=user, error_code=error, error_message=message) for user in users])
