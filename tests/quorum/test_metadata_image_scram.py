"""Users' SCRAM credentials in the metadata image (issue 24, item 3): Kafka's
UserScramCredentialRecord and RemoveUserScramCredentialRecord replayed, and written back as one
record per (user, mechanism) for a KIP-630 snapshot of the image."""
from __future__ import annotations

from kraftd.protocol import messages as m
from kraftd.protocol.metadata_records import decode_metadata_record, encode_metadata_record
from kraftd.quorum.metadata.image import MetadataImage, ScramCredential, scram_key


def _upsert(name: str, mechanism: int, iterations: int = 4096):
    return m.UserScramCredentialRecord(name=name, mechanism=mechanism, salt=b"salt-" + name.encode(),
                                       stored_key=b"stored-%d" % mechanism, server_key=b"server-%d" % mechanism,
                                       iterations=iterations)


def test_credentials_are_replayed_per_user_and_mechanism():
    image = MetadataImage()
    assert image.replay(_upsert("alice", 2)) == [scram_key("alice", 2)]
    image.replay(_upsert("alice", 1))
    image.replay(_upsert("team/bob", 2))
    image.replay(_upsert("alice", 2, iterations=8192))  # an upsert replaces
    assert image.scram["alice"][2] == ScramCredential(b"salt-alice", b"stored-2", b"server-2", 8192)
    assert set(image.scram) == {"alice", "team/bob"} and set(image.scram["alice"]) == {1, 2}
    assert image.replay(m.RemoveUserScramCredentialRecord(name="alice", mechanism=2)) == [scram_key("alice", 2)]
    assert set(image.scram["alice"]) == {1}
    image.replay(m.RemoveUserScramCredentialRecord(name="alice", mechanism=1))
    assert "alice" not in image.scram  # its last mechanism gone: the user is gone
    image.replay(m.RemoveUserScramCredentialRecord(name="nobody", mechanism=1))  # nothing to remove
    assert set(image.scram) == {"team/bob"}


def test_a_snapshot_of_the_image_recreates_every_credential():
    image = MetadataImage()
    touched: set = set()
    for record in [_upsert("alice", 1), _upsert("alice", 2), _upsert("team/bob", 2),
                   m.RemoveUserScramCredentialRecord(name="alice", mechanism=1)]:
        touched.update(image.replay(record))
    snapshot = [image.entity_record(key) for key in sorted(touched)]
    assert snapshot.count(None) == 1  # alice's SCRAM-SHA-256 is gone: no record for it
    restored = MetadataImage()
    for record in snapshot:
        if record is not None:
            restored.replay(decode_metadata_record(encode_metadata_record(record)))
    assert restored.scram == image.scram
