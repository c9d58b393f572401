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
