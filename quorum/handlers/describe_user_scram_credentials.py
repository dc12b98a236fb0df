"""DescribeUserScramCredentials v0 (KIP-554): from this node's committed image, each user's
mechanisms and iteration counts (never a key). No users named (null or empty): every user. A
user named twice is DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND, as on Kafka.
Needs DESCRIBE on the cluster."""
from __future__ import annotations

from collections import Counter

from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeUserScramCredentialsResponse

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .alter_user_scram_credentials import NO_METADATA_LOG

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
Info = DescribeUserScramCredentialsResponse.CredentialInfo


def handle(ctx, header, request, now_ms, peer):
    if ctx.plane is None:
        return Respond(DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                                            error_message=NO_METADATA_LOG, results=[]))
    if not ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.CLUSTER):
        return Respond(DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, results=[]))
    scram = ctx.plane.image.scram
    wanted = [u.name for u in request.users or []] or sorted(scram)
    results = []
    counted = Counter(wanted)
    for name in counted:
        if counted[name] > 1:
            results.append(Result(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                  error_message="Cannot describe SCRAM credentials for the same user twice "
                                                "in a single request", credential_infos=[]))
        elif name not in scram:
            results.append(Result(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                  error_message="Attempt to describe a user credential that does not exist",
                                  credential_infos=[]))
        else:
            results.append(Result(user=name, error_code=ErrorCode.NONE, error_message=None, credential_infos=[
                Info(mechanism=mechanism, iterations=c.iterations) for mechanism, c in sorted(scram[name].items())]))
    return Respond(DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                        error_message=None, results=results))
