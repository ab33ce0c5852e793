"""The ``kvright`` CLI: the JSON keys of the five commands, human output, and bad input (one line, exit 2).

Commands run in-process through ``kvright.cli.main`` (stdout/stderr captured); one test runs the real
``python -m kvright`` process to check the exit code and that no traceback reaches the user.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import capacity as cap
from capacity.architecture import THINKER_WRAPPERS, engine_vocabulary
from kvright import crdgen
from kvright.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_catalog_json_lists_every_model_and_gpu_with_its_source(capsys):
    data = run_json(capsys, "catalog")
    assert [m["id"] for m in data["models"]] == cap.catalog_ids()
    llama = next(m for m in data["models"] if m["id"] == "llama-3.1-8b")
    assert llama == {
        "id": "llama-3.1-8b",
        "source": "meta-llama/Llama-3.1-8B-Instruct",
        "published_parameters": "8.03 B",
        "config_reader": "engine",
    }
    nas = next(m for m in data["models"] if m["id"] == "llama-3.3-nemotron-super-49b")
    assert nas["config_reader"] == "checkpoint"  # model_type nemotron-nas: its repository's code reads it
    assert [g["id"] for g in data["gpus"]] == cap.gpu_ids()
    h100 = next(g for g in data["gpus"] if g["id"] == "h100-sxm")
    assert h100["product_labels"] == ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-SXM5-80GB"]
    assert (h100["memory_bytes"], h100["hbm_bytes_per_second"], h100["supports_fp8"]) == (
        85520809984,
        3.35e12,
        True,
    )


def test_catalog_human_view(capsys):
    code, out, err = run(capsys, "catalog")
    assert (code, err) == (0, "")
    assert re.search(r"\n  llama-3\.1-70b +70\.55 B +meta-llama/Llama-3\.1-70B-Instruct\n", out)
    assert re.search(r"\n  llama-3\.3-nemotron-super-49b .* needs model\.trustRemoteCode\n", out)
    assert "  a100-80gb  NVIDIA A100 SXM4 80GB " in out and "fp8 KV only" in out


#: Dense classes whose files a Llama's fields are read as only under the config class they read.
OWN_CONFIG_TYPES = {"Rnj1ForCausalLM": "gemma3_text", "HrmTextForCausalLM": "hrm_text"}


def test_a_refused_architecture_points_to_the_catalog_that_lists_what_is_read(capsys, tmp_path):
    """The refusal names the command, not 69 class names on one line; that command lists every one of them
    by family, and each listed class is read (a standard config of it plans without the unknown warning)."""
    config = tmp_path / "config.json"
    nested = {"architectures": ["NestedForCausalLM"], "ffn_config": {"moe_num_experts": 16}}
    config.write_text(json.dumps(nested))
    code, out, err = run(capsys, "inspect", str(config))
    assert (code, out) == (2, "")
    assert err.rstrip().endswith(
        f"expected one of the {len(cap.FAMILIES)} architectures that `kvright catalog` lists"
    )
    assert len(err) < 400 and "LlamaForCausalLM" not in err, err
    listed = run_json(capsys, "catalog")["architectures"]
    assert {a["architecture"]: a["family"] for a in listed} == cap.FAMILIES
    code, out, err = run(capsys, "catalog")
    shown = out.split("\narchitectures (")[1]
    assert all(re.search(rf"\b{name}\b", shown) for name in cap.FAMILIES)
    assert re.search(r"\n  dense +ApertusForCausalLM, ", shown)
    assert re.search(r"\n  mla +(\w+,\s+)*DeepseekV2ForCausalLM,\s", shown)  # the list wraps
    llama = cap.catalog_entry("llama-3.1-8b")["config"]
    multimodal = engine_vocabulary().multimodal_architectures
    for name in (a["architecture"] for a in listed if a["family"] == "dense"):
        # a thinker wrapper's file nests the model it builds (Qwen2.5-Omni's); Rnj-1's class reads Gemma 3's
        # config, HRM-Text's its own (its recurrence's cycles)
        config = {"thinker_config": llama} if name in THINKER_WRAPPERS else llama
        if name in OWN_CONFIG_TYPES:
            config = llama | {"model_type": OWN_CONFIG_TYPES[name]}
        if name in multimodal and name not in THINKER_WRAPPERS:
            # a multimodal wrapper over a Llama's file alone: known, and refused for the tower it lacks
            with pytest.raises(cap.ConfigError, match="a multimodal wrapper, but the file's 'llama' config"):
                cap.architecture_from_config(config | {"architectures": [name]})
            continue
        assert "not an architecture kvright knows" not in " ".join(
            cap.architecture_from_config(config | {"architectures": [name]}).warnings
        )


def test_kv_of_a_model_without_attention_is_its_states_alone(capsys, tmp_path):
    """A Mamba-2 model (no attention layer): nothing grows per token, no KV head is replicated over TP,
    and each sequence holds its layers' states (this divided by zero once)."""
    config = tmp_path / "config.json"
    mamba2 = {
        "architectures": ["Mamba2ForCausalLM"],
        "model_type": "mamba2",
        "hidden_size": 1024,
        "num_hidden_layers": 8,
        "num_heads": 32,
        "head_dim": 64,
        "n_groups": 2,
        "state_size": 64,
        "expand": 2,
        "vocab_size": 4096,
        "torch_dtype": "bfloat16",
    }
    config.write_text(json.dumps(mamba2))
    args = ("--context", "2048", "--batch", "4", "--tensor-parallel-size", "2")
    data = run_json(capsys, "kv", str(config), *args)
    assert (data["growth_bytes_per_token"], data["replication"]) == (0, 1)
    assert [k["kind"] for k in data["by_layer_kind"]] == ["mamba"]
    state = ((2048 + 2 * 2 * 64) // 2 * 3 + 32 // 2 * 64 * 64) * 2 * 8  # per rank, 8 layers
    assert data["kv_cache_bytes_per_sequence"] == 2 * state


def test_commands_named_in_the_crd_exist(capsys):
    """Every `kvright COMMAND` a CRD field description names is a command the CLI has."""
    named = set(re.findall(r"`kvright ([a-z-]+)", crdgen.render()))
    assert named == {"catalog", "inspect"}
    for command in named:
        code, _, err = run(capsys, command, "--help")
        assert (code, err) == (0, ""), command


def test_inspect_json_keys_and_values(capsys):
    data = run_json(capsys, "inspect", "llama-3-70b")
    assert {
        "parameters",
        "active_parameters",
        "attention",
        "kv_cache_bytes_per_token",
        "valid_tensor_parallel_sizes",
    } <= data.keys()
    assert data["attention"] == "GQA"
    assert data["kv_cache_bytes_per_token"] == {"bfloat16": 327680, "fp8": 163840}
    assert data["valid_tensor_parallel_sizes"] == [1, 2, 4, 8]


def test_inspect_counts_a_hybrids_attention_layers_apart_from_its_others(capsys):
    """Nemotron-H 56B's attention heads are on 10 of its 118 layers; a dense model's on all of them."""
    code, out, _ = run(capsys, "inspect", "nemotron-h-56b")
    arch = cap.load_architecture("nemotron-h-56b")
    assert code == 0 and 0 < arch.num_attention_layers < arch.num_layers
    assert f"KV heads x 128, {arch.num_attention_layers} of {arch.num_layers} layers\n" in out
    code, out, _ = run(capsys, "inspect", "llama-3.1-8b")
    assert code == 0 and "KV heads x 128, 32 layers\n" in out


def test_inspect_says_why_each_tp_of_a_node_is_refused(capsys):
    """A TP degree missing from the valid list is named with the rule that refuses it, and whether expert
    parallelism (experts whole) makes it acceptable: Qwen2.5-VL-7B's 28 heads refuse TP 8; an FP8 MoE whose
    experts split into partial weight blocks takes TP 8 with expert parallelism."""
    data = run_json(capsys, "inspect", str(CONFIGS / "qwen2.5-vl-7b-instruct"))
    assert data["valid_tensor_parallel_sizes"] == [1, 2, 4]
    assert data["refused_tensor_parallel_sizes"] == {
        "8": {"reason": "does not divide the 28 attention heads of qwen2.5-vl-7b-instruct",
              "accepted_with_expert_parallel": False},
    }  # fmt: skip
    blocked = cap.load_architecture("qwen3-30b-a3b-fp8")
    code, out, _ = run(capsys, "inspect", "qwen3-30b-a3b-fp8")
    refused = {tp for tp in (2, 4, 8) if tp not in cap.valid_tensor_parallel_sizes(blocked, 8)}
    assert code == 0 and refused, "the fixture no longer has a TP its FP8 blocks refuse"
    for tp in refused:
        line = next(row for row in out.splitlines() if row.strip().startswith(f"TP {tp} refused"))
        assert "FP8 weight blocks" in line and line.endswith("with expert parallelism it is accepted")
    assert run_json(capsys, "inspect", "llama-3-70b")["refused_tensor_parallel_sizes"] == {}


def test_inspect_names_the_mtp_layers_its_counts_leave_out(capsys):
    """GLM-4.5's file carries one multi-token-prediction layer (num_nextn_predict_layers), MiniMax-M2.7's
    three (num_mtp_modules): vLLM loads them only as a draft, so the counts leave them out and say so."""
    for slug, layers in (("glm-4.5", 1), ("minimax-m2.7", 3)):
        data = run_json(capsys, "inspect", str(CONFIGS / slug))
        assert data["mtp_layers"] == layers
        assert data["parameters"] == cap.load_architecture(str(CONFIGS / slug)).parameters
        code, out, _ = run(capsys, "inspect", str(CONFIGS / slug))
        assert code == 0 and f"MTP layers         {layers} in the checkpoint, not counted above" in out
    code, out, _ = run(capsys, "inspect", "llama-3.1-8b")
    assert "MTP" not in out and run_json(capsys, "inspect", "llama-3.1-8b")["mtp_layers"] == 0
    odd = cap.catalog_entry("llama-3.1-8b")["config"] | {"num_nextn_predict_layers": "one"}
    assert cap.architecture_from_config(odd).mtp_layers == 0  # vLLM ignores it without a draft


def test_inspect_json_says_what_the_state_layers_run(capsys, tmp_path):
    """layer_kinds counts mixers by kvright's kinds (a state layer is "mamba" or "linear"); state_kind says
    what they run, so a short-convolution model is not read as a Mamba one."""
    lfm2 = {"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "hidden_size": 2048,
            "num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 8, "block_dim": 2048,
            "block_ff_dim": 8192, "conv_dim": 2048, "conv_L_cache": 3, "vocab_size": 65536,
            "max_position_embeddings": 128000, "torch_dtype": "bfloat16", "full_attn_idxs": [1]}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(lfm2))
    data = run_json(capsys, "inspect", str(tmp_path))
    assert (data["layer_kinds"], data["state_kind"]) == ({"full": 1, "mamba": 3}, "short_conv")
    assert run_json(capsys, "inspect", "qwen3-next-80b-a3b")["state_kind"] == "gated_deltanet"
    assert run_json(capsys, "inspect", "llama-3.1-8b")["state_kind"] is None


def test_inspect_gpus_per_node_widens_tp(capsys):
    data = run_json(capsys, "inspect", "llama-3-70b", "--gpus-per-node", "16")
    assert data["valid_tensor_parallel_sizes"] == [1, 2, 4, 8, 16]


def test_inspect_mla(capsys):
    data = run_json(capsys, "inspect", "deepseek-v3")
    assert data["attention"] == "MLA"
    assert data["kv_cache_bytes_per_token"]["bfloat16"] == 61 * 576 * 2


def test_kv_json(capsys):
    data = run_json(capsys, "kv", "llama-3.1-70b", "--context", "32768", "--batch", "16")
    assert {
        "kv_cache_bytes",
        "kv_cache_bytes_per_sequence",
        "weight_bytes",
        "kv_to_weight_ratio",
    } <= data.keys()
    assert round(data["kv_cache_bytes"] / 1e9, 1) == 171.8
    assert round(data["kv_to_weight_ratio"], 2) == 1.22
    assert data["held_bytes_per_sequence"] == data["kv_cache_bytes_per_sequence"]  # full attention alone


def test_kv_takes_the_gpus_layout_where_vllm_keeps_one_per_gpu(capsys):
    """DeepSeek-V4.1's records and block depend on the GPU (capacity.v41_records): without --gpu and on an
    H200 Hopper's, on a B200 Blackwell's, whose 32K request vLLM 0.32's engine core sizes at 2,842 blocks of
    135,168 bytes reserved and 282 held (measured with a capability stand-in: test_deepseek_v41_blackwell.py);
    a model whose layout is the same everywhere reads the same with or without it."""
    v41 = str(Path(__file__).resolve().parents[1] / "data" / "configs" / "deepseek-v4.1-flash")
    args = ("--context", "32768", "--batch", "1", "--max-num-batched-tokens", "8192")
    plain, h200, b200 = (
        run_json(capsys, "kv", v41, *args, *gpu) for gpu in ((), ("--gpu", "h200"), ("--gpu", "b200"))
    )
    assert (plain["gpu"], h200["gpu"], b200["gpu"]) == (None, "h200", "b200")
    assert plain["kv_cache_bytes_per_sequence"] == h200["kv_cache_bytes_per_sequence"]
    assert (b200["block_size"], b200["kv_cache_bytes_per_sequence"]) == (128, 2_842 * 135_168)
    assert b200["held_bytes_per_sequence"] == 282 * 135_168
    llama = [
        run_json(capsys, "kv", "llama-3.1-8b", "--context", "8192", "--batch", "4", *g)
        for g in ((), ("--gpu", "b200"))
    ]
    assert llama[0]["kv_cache_bytes"] == llama[1]["kv_cache_bytes"]


def test_kv_json_a_sliding_request_holds_less_than_it_reserves(capsys):
    """gpt-oss alternates 128-token windows with full attention: a running request keeps its windows, not
    the 16,384 in-flight tokens each sliding group reserves for the request being admitted."""
    data = run_json(capsys, "kv", "gpt-oss-120b", "--context", "8192", "--batch", "1")
    reserved, held = data["kv_cache_bytes_per_sequence"], data["held_bytes_per_sequence"]
    layout = cap.kv_cache_layout(cap.catalog_architecture("gpt-oss-120b"))
    per_block = reserved // layout.blocks_per_sequence(8192)
    sliding = [k for k in data["by_layer_kind"] if k["kind"] == "sliding"]
    assert sliding and held < reserved
    # A sliding group reserves the context's blocks plus one (window + in-flight tokens exceed it) and holds
    # cdiv(127, 16) + 1.
    assert reserved - held == sum(k["groups"] for k in sliding) * (8192 // 16 + 1 - 9) * per_block


def test_kv_json_replication_and_sliding_window(capsys):
    tp16 = run_json(
        capsys, "kv", "llama-3-70b", "--context", "8192", "--batch", "32", "--tensor-parallel-size", "16"
    )
    assert round(tp16["kv_cache_bytes"] / 1e9, 1) == 171.8
    small_budget = ("--batch", "1", "--max-num-batched-tokens", "1024")
    gemma_short = run_json(capsys, "kv", "gemma-2-27b", "--context", "4096", *small_budget)
    gemma_long = run_json(capsys, "kv", "gemma-2-27b", "--context", "8192", *small_budget)
    # doubling the context doubles only the 23 global layers; the 23 sliding layers reserve vLLM's
    # cdiv(min(4095 + 2 x 1024, 8192), 16) + 1 = 385 blocks = 6160 tokens, not 8192 (and at 4096 tokens
    # the sequence's 256 blocks plus the one a window may straddle)
    assert gemma_long["kv_cache_bytes"] * (4096 + 4112) == gemma_short["kv_cache_bytes"] * (8192 + 6160)
    growth = (gemma_long["kv_cache_bytes"] - gemma_short["kv_cache_bytes"]) - (6160 - 4112) * (
        gemma_long["growth_bytes_per_token"]
    )
    assert growth == gemma_long["growth_bytes_per_token"] * 4096
    assert gemma_long["growth_bytes_per_token"] == 23 * 2 * 16 * 128 * 2
    kinds = {k["kind"]: k for k in gemma_long["by_layer_kind"]}
    assert (kinds["full"]["layers"], kinds["sliding"]["layers"], kinds["sliding"]["bound_tokens"]) == (
        23,
        23,
        4096,
    )
    assert (
        kinds["full"]["bytes_per_sequence"] + kinds["sliding"]["bytes_per_sequence"]
        == gemma_long["kv_cache_bytes"]
    )


def test_tpot_json(capsys):
    data = run_json(
        capsys,
        "tpot",
        "llama-3-70b",
        "--gpu",
        "h100-sxm",
        "--tensor-parallel-size",
        "1",
        "--batch",
        "1",
        "--context",
        "8192",
    )
    assert {
        "roofline_floor_seconds",
        "predicted_seconds",
        "weight_read_seconds",
        "kv_read_seconds",
        "compute_seconds",
        "communication_seconds",
        "bottleneck",
        "crossover_batch",
    } <= data.keys()
    assert round(data["roofline_floor_seconds"] * 1e3, 1) == 42.3
    assert data["bottleneck"] == "weights"
    assert data["predicted_seconds"] > data["roofline_floor_seconds"]
    # 141 GB of weights on one 80 GB GPU: priced, and said to be impossible.
    assert data["memory_bytes_per_gpu"] > 140e9
    (warning,) = data["warnings"]
    assert "holds 0 of these 1 sequences" in warning and "vLLM cannot run this batch" in warning


def test_tpot_of_a_setup_that_fits_carries_no_warning(capsys):
    args = ("llama-3-70b", "--gpu", "h100-sxm", "--tensor-parallel-size", "4", "--batch", "8")
    data = run_json(capsys, "tpot", *args, "--context", "8192")
    assert data["warnings"] == []


def test_plan_json_keys(capsys):
    data = run_json(
        capsys,
        "plan",
        "llama-3.1-70b",
        "--gpu",
        "NVIDIA-H100-80GB-HBM3",
        "--max-model-len",
        "8192",
        "--tpot-ms",
        "50",
        "--concurrency",
        "64",
    )
    assert {
        "feasible",
        "reason",
        "plan",
        "memory_per_gpu_bytes",
        "kv_cache_tokens_per_replica",
        "max_concurrency_at_max_model_len",
        "predicted",
        "vllm_args",
        "vllm_args_by_role",
        "candidates",
    } <= data.keys()
    assert data["feasible"] is True
    assert set(data["plan"]) == {
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "expert_parallel",
        "gpus_per_node",
        "gpus_per_replica",
        "nodes_per_replica",
        "max_num_seqs",
        "kv_cache_dtype",
        "max_model_len",
        "gpu_memory_utilization",
        "max_num_batched_tokens",
        "replicas",
        "quantization",
        "mm_encoder_tp_mode",
        "allow_deprecated_quantization",
        "attention_backend",
        "gpu",
        "gpu_product",
        "usd_per_hour",
    }
    assert (data["plan"]["gpu"], data["plan"]["gpu_product"]) == ("h100-sxm", "NVIDIA-H100-80GB-HBM3")
    assert data["plan"]["mm_encoder_tp_mode"] == "weights" and "--mm-encoder-tp-mode" not in data["vllm_args"]
    assert "alternatives" not in data  # one product: nothing to choose between
    assert data["plan"]["quantization"] is None and "--quantization" not in data["vllm_args"]
    assert data["plan"]["allow_deprecated_quantization"] is False
    assert data["plan"]["attention_backend"] is None and "--attention-backend" not in data["vllm_args"]
    assert "--allow-deprecated-quantization" not in data["vllm_args"]
    assert {"total", "budget", "weights", "kv_cache", "activation", "other"} <= data[
        "memory_per_gpu_bytes"
    ].keys()
    assert {"tpot_seconds", "ttft_seconds", "output_tokens_per_second"} <= data["predicted"].keys()
    assert data["predicted"]["tpot_seconds"] <= 0.050
    assert data["vllm_args"][:2] == ["--tensor-parallel-size", str(data["plan"]["tensor_parallel_size"])]
    assert data["vllm_args_by_role"] == {"server": data["vllm_args"]}
    assert data["plan"]["nodes_per_replica"] == 1


def test_plan_human_view_shows_memory_and_decode_breakdown(capsys):
    code, out, _ = run(capsys, "plan", "llama-3.1-70b", "--gpu", "h100-sxm", "--max-model-len", "8192")
    assert code == 0
    for words in ("memory per GPU", "weights", "KV cache", "weight reads", "KV reads", "vllm args"):
        assert words in out


def test_plan_infeasible_exits_1_with_reason(capsys):
    code, out, _ = run(
        capsys, "plan", "llama-3.1-405b", "--gpu", "a100-40gb", "--max-model-len", "8192", "--json"
    )
    assert code == 1
    data = json.loads(out)
    assert data["feasible"] is False and "GPU with more memory" in data["reason"]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["inspect", "no-such-model"], "unknown model"),
        (
            [
                "tpot",
                "llama-3-8b",
                "--gpu",
                "tpu-v5",
                "--tensor-parallel-size",
                "1",
                "--batch",
                "1",
                "--context",
                "10",
            ],
            "unknown GPU",
        ),
        (["kv", "llama-3-8b", "--context", "0", "--batch", "1"], "expected an integer >= 1"),
        (["kv", "llama-3-8b", "--context", "-5", "--batch", "1"], "expected an integer >= 1"),
        (
            ["kv", "llama-3-8b", "--context", "9000", "--batch", "1"],
            "longer than the 8192 tokens vLLM accepts for llama-3-8b (8192 positions)",
        ),
        (
            ["kv", "llama-3-70b", "--context", "10", "--batch", "1", "--tensor-parallel-size", "3"],
            "does not divide",
        ),
        (["plan", "llama-3-8b", "--gpu", "h100"], "GPU 'h100' could be h100-sxm or h100-pcie; name one"),
        (["plan", "llama-3-8b", "--gpu", "h100-sxm", "--max-model-len", "100000"], "longer than"),
        (["plan", "llama-3-8b", "--gpu", "h100-sxm", "--gpu-memory-utilization", "1.5"], "fraction"),
        (["plan", "llama-3-8b"], "--gpu"),
        (["frobnicate"], "invalid choice"),
        (["catalog", "llama-3-8b"], "unrecognized arguments: llama-3-8b"),
        (["plan", "llama-3-8b", "--gpu", "h100-sxm", "--expert-parallel"], "needs a mixture-of-experts"),
        (["plan", "llama-3-8b", "--gpu", "h100-sxm", "--pipeline-parallel-size", "64"], "exceeds the 32"),
        (["plan", "llama-3-8b", "--gpu", "h100-sxm", "--data-parallel-size", "2"], "is dense and scales"),
    ],
    ids=[
        "unknown-model",
        "unknown-gpu",
        "zero-context",
        "negative-context",
        "context-past-positions",
        "bad-tp",
        "ambiguous-gpu",
        "max-len-past-positions",
        "utilization-above-1",
        "missing-gpu",
        "unknown-command",
        "catalog-takes-no-model",
        "expert-parallel-on-a-dense-model",
        "more-stages-than-layers",
        "data-parallel-on-a-dense-model",
    ],
)
def test_bad_input_one_line_exit_2(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("kvright: error: ")
    assert fragment in err


def test_a_folder_without_a_config_says_so(capsys, tmp_path):
    code, _, err = run(capsys, "inspect", str(tmp_path))
    assert code == 2 and err.count("\n") == 1
    assert f"folder '{tmp_path}' holds no config.json" in err


def test_truncated_config_file(capsys, tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama", "hidden_size": 40')
    code, _, err = run(capsys, "inspect", str(tmp_path))
    assert code == 2 and "not valid JSON" in err and err.count("\n") == 1


def test_unknown_architecture_in_config(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "rwkv", "hidden_size": 64}))
    code, _, err = run(capsys, "inspect", str(tmp_path / "config.json"))
    # an unknown architecture is read as a standard decoder, and refused naming the standard facts it lacks
    assert code == 2 and err.count("\n") == 1
    assert "model_type 'rwkv' is not one kvright knows" in err
    assert "has no num_hidden_layers or num_attention_heads or intermediate_size to read it as" in err


def test_real_process_exit_code_and_no_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "kvright", "kv", "llama-3-8b", "--context", "-1", "--batch", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvright",
            "plan",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--max-model-len",
            "8192",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["feasible"] is True


def test_inspect_shows_the_context_vllm_derives_from_a_scaled_rope(capsys, tmp_path):
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
        "rope_scaling": {"type": "linear", "factor": 4.0},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    data = run_json(capsys, "inspect", str(tmp_path))
    assert (data["max_position_embeddings"], data["rope_scaling_factor"], data["max_model_len"]) == (
        4096,
        4.0,
        16384,
    )
    code, out, _ = run(capsys, "inspect", str(tmp_path))
    assert code == 0 and "16,384 tokens (4,096 positions x RoPE factor 4)" in out
    code, _, err = run(capsys, "kv", str(tmp_path), "--context", "16385", "--batch", "1")
    assert code == 2 and "longer than the 16384 tokens vLLM accepts" in err


def test_an_embedding_checkpoint_is_refused_in_one_line(capsys, tmp_path):
    """Qwen3-Embedding names a CausalLM, but its sentence-transformers pooling module (modules.json, read
    beside config.json) makes vLLM serve it with its pooling runner: no output tokens to size."""
    config = json.loads((CONFIGS / "qwen3-32b" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, _, _ = run(capsys, "inspect", str(tmp_path))
    assert code == 0
    pooling = [{"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (tmp_path / "modules.json").write_text(json.dumps(pooling))
    code, out, err = run(capsys, "plan", str(tmp_path), "--gpu", "h100-sxm")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "modules.json lists a sentence-transformers Pooling module" in err and "--runner pooling" in err
    # A modules.json that is not a list is refused as the operator refuses it, not read as absent.
    (tmp_path / "modules.json").write_text(json.dumps({"0": pooling[0]}))
    code, out, err = run(capsys, "plan", str(tmp_path), "--gpu", "h100-sxm")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "modules.json holds a JSON dict; expected a sentence-transformers modules.json: a list" in err


def test_a_legacy_gptq_folder_is_planned_with_the_flag_vllm_needs(capsys, tmp_path):
    """A TheBloke-era GPTQ folder: config.json without quantization_config, quantize_config.json beside it.
    vLLM reads that file only with --quantization gptq, so the plan's arguments carry it."""
    config = {**cap.catalog_entry("llama-2-7b")["config"], "torch_dtype": "float16"}
    config.pop("quantization_config", None)
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, _ = run(capsys, "plan", str(tmp_path), "--gpu", "l4", "--max-model-len", "2048", "--json")
    assert code == 0 and "--quantization" not in json.loads(out)["vllm_args"]
    fp16 = json.loads(out)["memory_per_gpu_bytes"]["weights"]
    gptq = {"bits": 4, "group_size": 128, "desc_act": False, "sym": True}
    (tmp_path / "quantize_config.json").write_text(json.dumps(gptq))
    code, out, _ = run(capsys, "plan", str(tmp_path), "--gpu", "l4", "--max-model-len", "2048", "--json")
    data = json.loads(out)
    assert code == 0 and data["vllm_args"][-2:] == ["--quantization", "gptq"]
    assert data["memory_per_gpu_bytes"]["weights"] < 0.35 * fp16
    assert any("quantize_config.json" in w for w in data["warnings"])
