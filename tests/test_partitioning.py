"""Our partitioner must agree bit for bit with Kafka's Java client and aiokafka."""

from __future__ import annotations

import pytest
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.partitioning import murmur2, partition_for

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS, ids=lambda v: repr(v)[:20])
def test_murmur2_matches_kafkas_published_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@settings(max_examples=2000)
@given(st.binary(max_size=200))
def test_murmur2_agrees_with_aiokafka_on_any_bytes(key: bytes) -> None:
    assert murmur2(key) & 0xFFFFFFFF == aiokafka_murmur2(key)


@settings(max_examples=500)
@given(st.binary(max_size=64), st.integers(1, 10_000))
def test_partition_is_the_positive_hash_modulo_the_partition_count(
    key: bytes, partitions: int
) -> None:
    partition = partition_for(key, partitions)
    assert partition == (aiokafka_murmur2(key) & 0x7FFFFFFF) % partitions
    assert 0 <= partition < partitions


def test_sign_bit_is_masked_not_negated() -> None:
    # given a key whose hash is negative: Java's toPositive masks, abs() would differ
    key, hashed = KAFKA_VECTORS[0]
    assert hashed < 0
    assert partition_for(key, 1000) == (hashed & 0x7FFFFFFF) % 1000 == 340
    assert partition_for(key, 1000) != abs(hashed) % 1000


def test_empty_key_has_a_partition_too() -> None:
    assert murmur2(b"") == 275646681
    assert partition_for(b"", 12) == 275646681 % 12


@pytest.mark.parametrize("partitions", [0, -3])
def test_no_partitions_is_refused(partitions: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        partition_for(b"k", partitions)
