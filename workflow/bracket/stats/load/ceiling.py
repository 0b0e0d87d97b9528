"""The batch ceiling: what a bandwidth-bound dense model can deliver to `batch` users at once.

One decode step of a batch reads the weights once (and each sequence's KV cache), so for a bandwidth-bound step

    step_s       = bytes read per step / bandwidth
    ceiling      = batch / step_s   (tokens/s, all users together)

bracket.physics.ceiling gives the single-stream ceiling, bandwidth / bytes per token; at batch 1 the two agree. The
bytes per step grow with the batch only through the KV cache (and activations): `step_bytes` adds them.
"""

from __future__ import annotations

from bracket.physics.ceiling import ceiling_tok_s


def step_bytes(
    weight_bytes: float, kv_bytes_per_token: float = 0.0, context_tokens: float = 0.0, batch: int = 1
) -> float:
    """Bytes one decode step reads: the weights once, plus each of `batch` sequences' KV cache of `context_tokens`."""
    if weight_bytes <= 0:
        raise ValueError(f"weight bytes must be positive, got {weight_bytes}; is the weights account empty?")
    if kv_bytes_per_token < 0 or context_tokens < 0:
        raise ValueError("KV bytes per token and context tokens must be non-negative.")
    return float(weight_bytes + batch * kv_bytes_per_token * context_tokens)


def batch_ceiling_tok_s(bandwidth_gbps: float, bytes_per_step: float, batch: int) -> float:
    """Aggregate decode ceiling of `batch` users: batch x bandwidth / bytes per step (bandwidth in GB/s, 1e9 B/s)."""
    if batch < 1 or int(batch) != batch:
        raise ValueError(f"batch must be a positive whole number of sequences, got {batch}.")
    return batch * ceiling_tok_s(bandwidth_gbps, bytes_per_step)


def step_time_s(bandwidth_gbps: float, bytes_per_step: float) -> float:
    """Seconds one bandwidth-bound decode step takes: bytes per step / bandwidth."""
    return 1.0 / ceiling_tok_s(bandwidth_gbps, bytes_per_step)
