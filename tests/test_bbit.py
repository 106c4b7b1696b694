"""b-bit sketch values: the estimate, its threshold count and the stored bytes agree with each other."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_simhash.fingerprint.bbit import VALUE_BITS, ValueBits


@pytest.mark.parametrize("bits", VALUE_BITS)
@pytest.mark.parametrize("num_values", [7, 64, 128])
def test_array_and_scalar_estimates_are_the_same_floats(bits: int, num_values: int) -> None:
    """A batch's answers (one array operation) and a single lookup's (one count) must not differ by a
    rounding, or a pair could pass the threshold one way and not the other."""
    value_bits = ValueBits(bits)
    counts = np.arange(num_values + 1, dtype=np.int32)
    batch = value_bits.similarity(counts, num_values).tolist()
    assert batch == [value_bits.similarity(c, num_values) for c in range(num_values + 1)]
    assert min(batch) == 0.0 and batch[-1] == 1.0


@pytest.mark.parametrize("bits", VALUE_BITS)
@pytest.mark.parametrize("threshold", [0.01, 0.3, 0.5, 0.7, 0.8, 1.0])
def test_min_equal_is_the_fewest_counts_reaching_the_threshold(bits: int, threshold: float) -> None:
    value_bits = ValueBits(bits)
    m = value_bits.min_equal(threshold, 128)
    assert value_bits.similarity(m, 128) >= threshold
    assert m == 0 or value_bits.similarity(m - 1, 128) < threshold


@pytest.mark.parametrize("bits", VALUE_BITS)
def test_encode_keeps_a_whole_number_of_bytes_a_value_and_decodes_back(bits: int) -> None:
    value_bits = ValueBits(bits)
    values = value_bits.reduce(np.arange(256, dtype=np.uint32).reshape(2, 128) * np.uint32(0x01010101))
    data = value_bits.encode(values)
    assert len(data) == 256 * bits // 8
    assert np.array_equal(value_bits.decode(data, 128), values)
