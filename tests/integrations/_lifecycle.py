"""Shared by the drop-in tests: a new request replacing a slot's state in the drop-in's pools and in the
conventional reference's copies."""
import torch


def start_fresh_request(op, pools, ref, slot: int, row_shape, device) -> None:
    """Both pools get the same fresh row at ``slot`` (a prefill wrote it); the drop-in empties its ring."""
    fresh = 0.1 * torch.randn((len(pools),) + tuple(row_shape), device=device)
    for layer in range(len(pools)):
        pools[layer][slot] = fresh[layer]
        ref[layer][slot] = fresh[layer]
    op.start_requests([slot])


def rel_err(got: torch.Tensor, want: torch.Tensor, valid: torch.Tensor) -> float:
    """Max abs difference over the rows with a slot, relative to the reference's max."""
    return float((got[valid].float() - want[valid].float()).abs().max() / want[valid].float().abs().max())


def materialize_and_compare(op, pools, ref, slots, device, tol: float) -> None:
    """End of a run: no invariant broken on the device, and after materialize every pool row of ``slots``
    equals the conventional state."""
    if device == "cuda":
        torch.cuda.synchronize()
    op.check_errors()
    op.materialize()
    for layer in range(len(pools)):
        for s in slots:
            torch.testing.assert_close(pools[layer][s], ref[layer][s], rtol=tol, atol=tol)


def under_cpu_emulation(run, *args) -> None:
    """``run(*args, "cpu")`` with the CUDA ops emulated on the CPU by the float64 reference (ops/emulation.py)."""
    from replayssm_trtllm.ops.emulation import cpu_emulation
    with cpu_emulation():
        run(*args, "cpu")
