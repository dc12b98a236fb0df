"""quorum/metadata/scram.py against scramp (an independent SCRAM implementation) as the oracle."""
from __future__ import annotations

import scramp

from kraftd.quorum.metadata.scram import (MECHANISM_IDS, SCRAM_SHA_256, SCRAM_SHA_512, credential, password_matches,
                                          salted_password)


def test_stored_and_server_keys_are_rfc_5802s():
    salt = bytes(range(16))
    for mechanism, name in ((SCRAM_SHA_256, "SCRAM-SHA-256"), (SCRAM_SHA_512, "SCRAM-SHA-512")):
        assert MECHANISM_IDS[name] == mechanism
        ours = credential(mechanism, salt, salted_password(mechanism, "pencil", salt, 4096), 4096)
        theirs = scramp.ScramMechanism(name).make_auth_info("pencil", iteration_count=4096, salt=salt)
        assert (ours.salt, ours.stored_key, ours.server_key, ours.iterations) == theirs


def test_a_plain_password_is_checked_against_the_stored_key():
    salt = b"0123456789abcdef"
    stored = credential(SCRAM_SHA_512, salt, salted_password(SCRAM_SHA_512, "s3cret", salt, 4096), 4096)
    assert password_matches(SCRAM_SHA_512, stored, "s3cret")
    assert not password_matches(SCRAM_SHA_512, stored, "s3cret ")
    assert not password_matches(SCRAM_SHA_256, stored, "s3cret")  # another mechanism's hash
