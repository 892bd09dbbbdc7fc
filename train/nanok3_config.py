"""nanoK3's config.json: K3's keys (as in tests/fixtures/k3-tiny/model/config.json), small values."""

SHAPE = dict(
    n_bpe=8192,           # BPE ranks; 256 reserved specials follow
    hidden=256,
    layers=13,            # MLA at 1-based 4, 8, 12, 13 (K3's (KKKM)*n + M pattern)
    heads=4,              # KDA heads = MLA heads, as in K3
    kda_dim=64,
    dense_inter=768,      # layer 0's dense FFN
    experts=64,
    top_k=8,
    latent=96,            # routed experts work in this latent width (< hidden)
    moe_inter=96,
    block=3,              # AttnRes seals at layers 0, 3, 6, 9, 12
    q_lora=96,
    kv_lora=64,
    nope=32,
    rope=16,
    v_head=64,
)


def make_config(s=SHAPE):
    L = s["layers"]
    mla = [l for l in range(1, L + 1) if l % 4 == 0 or l == L]
    kda = [l for l in range(1, L + 1) if l not in mla]
    n = s["n_bpe"]
    vocab = n + 256
    bos, eos, pad, media = n + 0, n + 2, n + 255, n + 21
    tc = {
        "activation_situ_beta": 4.0,
        "activation_situ_linear_beta": 25.0,
        "architectures": ["KimiLinearForCausalLM"],
        "attn_res_block_size": s["block"],
        "bos_token_id": bos,
        "dtype": "bfloat16",
        "eos_token_id": eos,
        "first_k_dense_replace": 1,
        "hidden_act": "situ",
        "hidden_size": s["hidden"],
        "intermediate_size": s["dense_inter"],
        "kv_lora_rank": s["kv_lora"],
        "latent_moe_use_norm": True,
        "linear_attn_config": {
            "full_attn_layers": mla,
            "gate_lower_bound": -5.0,
            "head_dim": s["kda_dim"],
            "kda_layers": kda,
            "num_heads": s["heads"],
            "short_conv_kernel_size": 4,
            "use_full_rank_gate": True,
        },
        "max_position_embeddings": 1048576,
        "mla_use_nope": True,
        "mla_use_output_gate": True,
        "model_type": "kimi_linear",
        "moe_intermediate_size": s["moe_inter"],
        "moe_layer_freq": 1,
        "moe_renormalize": True,
        "moe_router_activation_func": "sigmoid",
        "num_attention_heads": s["heads"],
        "num_expert_group": 1,
        "num_experts": s["experts"],
        "num_experts_per_token": s["top_k"],
        "num_hidden_layers": L,
        "num_key_value_heads": s["heads"],
        "num_nextn_predict_layers": 0,
        "num_shared_experts": 2,
        "pad_token_id": pad,
        "q_lora_rank": s["q_lora"],
        "qk_nope_head_dim": s["nope"],
        "qk_rope_head_dim": s["rope"],
        "rms_norm_eps": 1e-05,
        "routed_expert_hidden_size": s["latent"],
        "routed_scaling_factor": 1.0,
        "tie_word_embeddings": False,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "use_cache": True,
        "use_grouped_topk": True,
        "v_head_dim": s["v_head"],
        "vocab_size": vocab,
        "quantization_config": {
            "config_groups": {
                "group_0": {
                    "format": "mxfp4-pack-quantized",
                    "input_activations": None,
                    "output_activations": None,
                    "targets": ["Linear"],
                    "weights": {
                        "actorder": None, "block_structure": None, "dynamic": False,
                        "group_size": 32, "num_bits": 4, "observer": "minmax",
                        "observer_kwargs": {}, "scale_dtype": "torch.uint8",
                        "strategy": "group", "symmetric": True, "type": "float",
                        "zp_dtype": None,
                    },
                }
            },
            "format": "mxfp4-pack-quantized",
            "ignore": [
                "language_model.lm_head",
                "re:.*self_attn.*",
                "re:.*mlp\\.(gate|up|down)_proj$",
                "re:.*block_sparse_moe\\.gate$",
                "re:.*shared_experts.*",
                "re:.*routed_expert_(down|up)_proj$",
            ],
            "kv_cache_scheme": None,
            "quant_method": "compressed-tensors",
            "quantization_status": "compressed",
        },
    }
    return {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "bos_token_id": bos,
        "dtype": "bfloat16",
        "eos_token_id": eos,
        "media_placeholder_token_id": media,
        "model_type": "kimi_k3",
        "pad_token_id": pad,
        "text_config": tc,
        "tie_word_embeddings": False,
    }


def disk_bytes(model):
    """Bytes of tensor data the exporter writes for this model."""
    total = 0
    for n, t in model.state_dict().items():
        last = n.split(".")[-1]
        if last in ("w1", "w2", "w3"):
            total += t.numel() // 2 + t.numel() // 32
        elif last == "A_log":
            total += 4 * model.cfg.kda_dim
        elif last in ("dt_bias", "q_conv1d", "k_conv1d", "v_conv1d", "o_norm", "e_score_correction_bias"):
            total += 4 * t.numel()
        else:
            total += 2 * t.numel()
    return total
