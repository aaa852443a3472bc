"""Named GEMM shapes of LLM layers (forward), from a compact model description in a sizes config.

A sizes config with ``models:`` (one entry per model: its published config's dimensions) and
``tokens:`` expands here into one named shape per projection and token count, e.g.
``llama3_70b.mlp_down.t4096``. Convention: the GEMM of a linear layer applied to T tokens is
m = T, n = out_features, k = in_features (C = X W^T; PyTorch keeps W as (out, in), so B = W^T is
stored transposed: layout ``nt``).

Families:

- ``llama`` (Llama 3): ``attn_qkv`` (q, k and v projections fused into one GEMM: n = (heads +
  2 kv_heads) head_dim), ``attn_o``, ``mlp_gate_up`` (gate and up fused: n = 2 intermediate),
  ``mlp_down``.
- ``deepseek_v3`` (multi-head latent attention and mixture of experts): ``attn_qkv_a`` (q_a_proj and
  kv_a_proj_with_mqa fused: n = q_lora_rank + kv_lora_rank + qk_rope_head_dim), ``attn_q_b``
  (n = heads (qk_nope + qk_rope)), ``attn_kv_b`` (n = heads (qk_nope + v_head_dim)), ``attn_o``
  (k = heads v_head_dim); the dense layers' ``dense_gate_up`` / ``dense_down`` (intermediate_size);
  the MoE layers' ``moe_router`` (n = routed experts), ``shared_gate_up`` / ``shared_down`` (the
  shared experts, every token) and ``expert_gate_up`` / ``expert_down``: the routed experts as one
  strided batch, ``batch`` = experts that receive tokens and m = tokens per expert under balanced
  routing (T x experts_per_token assignments spread evenly: min(routed, T top_k) experts, each
  ceil(T top_k / experts) tokens).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional


@dataclass(frozen=True)
class NamedShape:
    name: str
    m: int
    n: int
    k: int
    batch: Optional[int] = None  # None: the run's batch axis applies


def projections(family: str, d) -> List[tuple]:
    """(projection, n, k) of one model, or (projection, n, k, "experts") for the routed experts."""
    if family == "llama":
        hd = d.head_dim or d.hidden_size // d.num_attention_heads
        return [("attn_qkv", (d.num_attention_heads + 2 * d.num_key_value_heads) * hd, d.hidden_size),
                ("attn_o", d.hidden_size, d.num_attention_heads * hd),
                ("mlp_gate_up", 2 * d.intermediate_size, d.hidden_size),
                ("mlp_down", d.hidden_size, d.intermediate_size)]
    if family == "deepseek_v3":
        h = d.num_attention_heads
        shared = d.n_shared_experts * d.moe_intermediate_size
        return [("attn_qkv_a", d.q_lora_rank + d.kv_lora_rank + d.qk_rope_head_dim, d.hidden_size),
                ("attn_q_b", h * (d.qk_nope_head_dim + d.qk_rope_head_dim), d.q_lora_rank),
                ("attn_kv_b", h * (d.qk_nope_head_dim + d.v_head_dim), d.kv_lora_rank),
                ("attn_o", d.hidden_size, h * d.v_head_dim),
                ("dense_gate_up", 2 * d.intermediate_size, d.hidden_size),
                ("dense_down", d.hidden_size, d.intermediate_size),
                ("moe_router", d.n_routed_experts, d.hidden_size),
                ("shared_gate_up", 2 * shared, d.hidden_size),
                ("shared_down", d.hidden_size, shared),
                ("expert_gate_up", 2 * d.moe_intermediate_size, d.hidden_size, "experts"),
                ("expert_down", d.hidden_size, d.moe_intermediate_size, "experts")]
    raise ValueError(f"unknown model family {family!r} (llama | deepseek_v3)")


def routed(tokens: int, routed_experts: int, per_token: int):
    """(experts that get tokens, tokens per expert) under balanced routing."""
    assignments = tokens * per_token
    experts = min(routed_experts, assignments)
    return experts, math.ceil(assignments / experts)


def expand(sizes) -> List[NamedShape]:
    """Every named shape of the sizes config's models (those in ``model_names`` if it lists any)
    at its token counts, model by model."""
    out: List[NamedShape] = []
    chosen = [str(n) for n in (sizes.get("model_names") or [])]
    unknown = [n for n in chosen if n not in sizes.models]
    if unknown:
        raise ValueError(f"model_names {unknown} are not among the models ({', '.join(sizes.models)})")
    for model, d in sizes.models.items():
        if chosen and model not in chosen:
            continue
        for proj in projections(d.family, d):
            name, n, k = proj[:3]
            for t in sizes.tokens:
                if len(proj) == 4:
                    experts, m = routed(int(t), d.n_routed_experts, d.num_experts_per_tok)
                    out.append(NamedShape(f"{model}.{name}.t{t}", m, n, k, experts))
                else:
                    out.append(NamedShape(f"{model}.{name}.t{t}", int(t), n, k))
    return out
