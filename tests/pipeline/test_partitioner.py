"""The writer's partitioner is the Java producer's: vectors from Kafka's UtilsTest.testMurmur2."""
from kraftd.pipeline.partitioner import murmur2, partition_for_key

JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}


def test_murmur2_matches_the_java_client():
    for data, expected in JAVA_MURMUR2.items():
        assert murmur2(data) == expected, data


def test_partition_is_the_positive_hash_modulo_the_count():
    # toPositive(-790332482) = 1357151166
    assert partition_for_key(b"foobar", 50) == 1357151166 % 50 == 16
    assert partition_for_key(b"foobar", 10) == 6
    for data, h in JAVA_MURMUR2.items():
        for n in (1, 3, 12, 1000):
            assert partition_for_key(data, n) == (h & 0x7FFFFFFF) % n
