import pytest

from replayssm_trtllm.config import ReplayConfig


def test_defaults_are_valid():
    c = ReplayConfig()
    assert (c.window, c.max_verify, c.recurrence_dtype, c.read_dtype) == (16, 1, "fp32", "none")
    assert c.ring_capacity == 16 and c.effective_rounding is None and not c.speculative


def test_valid_dual_precision():
    c = ReplayConfig(window=16, max_verify=4, recurrence_dtype="fp16", read_dtype="nvfp4", key_dim=128)
    assert c.ring_capacity == 20 and c.effective_rounding == "sr" and c.speculative


@pytest.mark.parametrize("kwargs, field, fragment", [
    (dict(window=0), "window", "[1, 64]; got 0"),
    (dict(window=65), "window", "got 65"),
    (dict(window=-3), "window", "got -3"),
    (dict(window=4.0), "window", "must be an int"),
    (dict(max_verify=0), "max_verify", "got 0"),
    (dict(max_verify=9, window=16), "max_verify", "got 9"),
    (dict(window=4, max_verify=5), "max_verify", "<= window (4)"),
    (dict(recurrence_dtype="fp64"), "recurrence_dtype", "got 'fp64'"),
    (dict(read_dtype="int4"), "read_dtype", "got 'int4'"),
    (dict(rounding="floor", recurrence_dtype="fp16"), "rounding", "got 'floor'"),
    (dict(rounding="sr"), "rounding", "recurrence_dtype 'fp32'"),
    (dict(recurrence_dtype="fp8_e4m3", read_dtype="fp16"), "read_dtype", "more precise"),
    (dict(recurrence_dtype="fp16", read_dtype="fp16"), "read_dtype", "duplicates"),
    (dict(checkpoint_mode="both"), "checkpoint_mode", "got 'both'"),
    (dict(checkpoint_mode="shared", recurrence_dtype="fp16", read_dtype="nvfp4"), "read_dtype", "'shared'"),
    (dict(checkpoint_mode="shared"), "checkpoint_mode", "low-precision"),
    (dict(read_dtype="nvfp4", key_dim=72), "key_dim", "multiple of 16 for nvfp4"),
    (dict(read_dtype="fp8_e4m3", key_dim=64), "key_dim", "multiple of 128 for fp8_e4m3"),
    (dict(key_dim=0), "key_dim", "positive int"),
    (dict(family="rwkv"), "family", "got 'rwkv'"),
    (dict(u_dtype="fp32"), "u_dtype", "got 'fp32'"),
])
def test_every_validation_error_names_field_and_value(kwargs, field, fragment):
    with pytest.raises(ValueError) as e:
        ReplayConfig(**kwargs)
    msg = str(e.value)
    assert f"field '{field}'" in msg and fragment in msg, msg


def test_edge_windows_accepted():
    assert ReplayConfig(window=1, max_verify=1).ring_capacity == 1     # standard mode: L rows
    assert ReplayConfig(window=8, max_verify=8).ring_capacity == 16    # speculative: L + T_max
    assert ReplayConfig(window=64).ring_capacity == 64
