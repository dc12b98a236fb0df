"""`bootstrap_user = "name:password"`: the first user of a SASL listener (Redpanda's
RP_BOOTSTRAP_USER). Nobody can log in to create a user before one exists, so the controller
gives this user SCRAM-SHA-256 and SCRAM-SHA-512 credentials when the image has none for it: once
per cluster, on whichever node with the setting becomes controller first. A user that already has
a credential is left as it is (an admin may have changed or removed one on purpose)."""
from __future__ import annotations

from ...protocol.messages import UserScramCredentialRecord

from .scram import MIN_ITERATIONS, SCRAM_SHA_256, SCRAM_SHA_512, credential, salted_password

SALT_BYTES = 32


def bootstrap_user_records(spec: str, image, rng) -> list:
    """The records that create the user, or [] if the image knows it already."""
    name, _, password = spec.partition(":")
    if name in image.scram:
        return []
    records = []
    for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        salt = rng.randbytes(SALT_BYTES)
        c = credential(mechanism, salt, salted_password(mechanism, password, salt, MIN_ITERATIONS), MIN_ITERATIONS)
        records.append(UserScramCredentialRecord(name=name, mechanism=mechanism, salt=c.salt, stored_key=c.stored_key,
                                                 server_key=c.server_key, iterations=c.iterations))
    return records
