"""Built-in model catalog, and loading an architecture by reference.

Each entry is a data file, ``capacity/models/<id>.json``: the model's published Hugging Face ``config.json``
(whole for the newer entries, the fields the converter reads for the older ones; same names, same values),
the ``hf_quant_config.json`` of NVIDIA ModelOpt checkpoints, the repository it comes from, where the file was
read and the published parameter total (the tests hold every entry to it). The catalog goes through the same
parser as a user's file.
"""

from __future__ import annotations

import json
import os
from functools import cache
from importlib import resources
from typing import Any

from capacity.architecture import Architecture, architecture_from_config
from capacity.errors import CapacityError, ConfigError
from capacity.quantization import LEGACY_QUANT_FILES

__all__ = ["CatalogEntry", "catalog_architecture", "catalog_entry", "catalog_ids", "load_architecture"]

CatalogEntry = dict[str, Any]
"""``repo``, ``source``, ``published_parameters`` (and optionally ``published_active_parameters``,
``notes``), ``config`` and optionally ``hf_quant_config``."""

_SUFFIX = ".json"


def _folder() -> Any:
    return resources.files("capacity") / "models"


@cache
def _ids() -> frozenset[str]:
    """The catalog's ids: its file names (each file is read only when its model is asked for)."""
    return frozenset(
        item.name.removesuffix(_SUFFIX) for item in _folder().iterdir() if item.name.endswith(_SUFFIX)
    )


def catalog_ids() -> list[str]:
    """Ids of the built-in models, sorted."""
    return sorted(_ids())


@cache
def _read_entry(model_id: str) -> CatalogEntry:
    entry: CatalogEntry = json.loads((_folder() / f"{model_id}{_SUFFIX}").read_text(encoding="utf-8"))
    return entry


def catalog_entry(model_id: str) -> CatalogEntry:
    """The data of one catalog entry (see :data:`CatalogEntry`)."""
    key = model_id.lower() if isinstance(model_id, str) else None
    if key is None or key not in _ids():
        raise CapacityError(
            f"unknown model {model_id!r}; expected a catalog id ({', '.join(catalog_ids())}), "
            "a path to a config.json or a folder holding one"
        )
    return _read_entry(key)


def catalog_source(model_id: str) -> tuple[str, str]:
    """(Hugging Face repository the facts come from, published parameter total) for a catalog id."""
    entry = catalog_entry(model_id)
    billions = f"{entry['published_parameters'] / 1e9:.2f}".rstrip("0").rstrip(".")
    return str(entry["repo"]), f"{billions} B"


@cache
def catalog_architecture(model_id: str) -> Architecture:
    """The architecture of a built-in model (parsed once, then cached)."""
    entry = catalog_entry(model_id)
    return architecture_from_config(
        entry["config"], name=model_id.lower(), hf_quant_config=entry.get("hf_quant_config")
    )


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, UnicodeDecodeError) as exc:
        raise CapacityError(
            f"cannot read {path}: {exc.__class__.__name__}; expected {what} this process can read"
        ) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            "<root>",
            f"{path} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); expected {what}",
        ) from exc


def load_architecture(ref: str) -> Architecture:
    """A catalog id, a path to a ``config.json``, or a folder holding one (the only IO in ``capacity``).

    An ``hf_quant_config.json`` beside the config (NVIDIA ModelOpt checkpoints) is read too, as vLLM does, a
    legacy GPTQ / AWQ ``quantize_config.json`` or ``quant_config.json`` (:data:`LEGACY_QUANT_FILES`), and a
    ``modules.json`` (sentence-transformers: a pooling module makes vLLM pool, not generate).
    """
    if not isinstance(ref, str) or not ref:
        raise CapacityError(f"model {ref!r} is empty; expected a catalog id or a path to a config.json")
    if ref.lower() in _ids():
        return catalog_architecture(ref.lower())
    path = os.path.join(ref, "config.json") if os.path.isdir(ref) else ref
    if os.path.isdir(ref) and not os.path.exists(path):
        raise CapacityError(
            f"folder {ref!r} holds no config.json; expected a checkpoint folder with the model's config.json"
        )
    if not os.path.exists(path):
        raise CapacityError(
            f"unknown model {ref!r}: not a catalog id and no such file; expected one of "
            f"{', '.join(catalog_ids())}, a path to a config.json or a folder holding one"
        )
    config = _read_json(path, "a config.json")
    folder = os.path.dirname(os.path.abspath(path))
    quant = _beside(folder, "hf_quant_config.json")
    legacy = next(
        ((name, found) for name in LEGACY_QUANT_FILES if (found := _beside(folder, name)) is not None), None
    )
    modules = _beside(folder, "modules.json")
    if modules is not None and not isinstance(modules, list):
        raise CapacityError(
            f"{os.path.join(folder, 'modules.json')} holds a JSON {type(modules).__name__}; expected a "
            "sentence-transformers modules.json: a list of its modules"
        )
    return architecture_from_config(
        config,
        name=os.path.basename(folder) or path,
        hf_quant_config=quant,
        modules=modules,
        legacy_quant_config=legacy,
    )


def _beside(folder: str, name: str) -> Any:
    """The JSON file ``name`` beside a checkpoint's config.json, or None when there is none."""
    path = os.path.join(folder, name)
    return _read_json(path, f"a {name}") if os.path.exists(path) else None
