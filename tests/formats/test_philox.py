"""Philox4x32-10 against the Random123 known-answer vectors and the SR word mapping of docs/formats.md."""
import pytest
import torch

from replayssm_trtllm.formats import PhiloxKey, philox4x32_10, sr_words

# Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter[4], key[2] -> output[4].
KAT = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr,key,expected", KAT, ids=["zeros", "ones", "pi"])
def test_known_answer(ctr, key, expected):
    out = philox4x32_10(torch.tensor(ctr, dtype=torch.int64), torch.tensor(key, dtype=torch.int64))
    assert [hex(v) for v in out.tolist()] == [hex(v) for v in expected]


def test_batched_matches_single():
    ctr = torch.tensor([k[0] for k in KAT], dtype=torch.int64)
    key = torch.tensor([k[1] for k in KAT], dtype=torch.int64)
    out = philox4x32_10(ctr, key)
    assert out.tolist() == [list(k[2]) for k in KAT]


def test_sr_words_mapping():
    key = PhiloxKey(seed=0x0123456789ABCDEF, slot=7, layer=3, flush_index=41)
    w = sr_words(key, 10)
    for e in range(10):
        out = philox4x32_10(torch.tensor([e >> 2, 7, 3, 41], dtype=torch.int64),
                            torch.tensor([0x89ABCDEF, 0x01234567], dtype=torch.int64))
        assert int(w[e]) == int(out[e & 3])


def test_words_look_uniform():
    w = sr_words(PhiloxKey(seed=1), 1 << 16).double()
    assert 0 <= w.min() and w.max() < 2**32
    mean = w.mean() / 2**32
    assert abs(mean - 0.5) < 5 * (1 / 12) ** 0.5 / 256  # 5 sigma for 2^16 uniform draws


@pytest.mark.parametrize("field,value", [("seed", -1), ("seed", 2**64), ("slot", 2**32), ("layer", -1),
                                         ("flush_index", 2**32)])
def test_key_range_checked(field, value):
    kw = dict(seed=0, slot=0, layer=0, flush_index=0)
    kw[field] = value
    with pytest.raises(ValueError, match=f"'{field}'"):
        PhiloxKey(**kw)


def test_bad_counter_rejected():
    with pytest.raises(ValueError, match="'counter' must be int64"):
        philox4x32_10(torch.zeros(3, dtype=torch.int64), torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"'key' words must be in \[0, 2\^32\)"):
        philox4x32_10(torch.zeros(4, dtype=torch.int64), torch.tensor([0, 2**32]))
