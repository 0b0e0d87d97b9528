"""Tensor headers of a checkpoint: names, dtypes, shapes and byte sizes, never the weights.

A safetensors file starts with an 8-byte little-endian length N and N bytes of JSON that give,
per tensor, its dtype, shape and ``data_offsets`` [begin, end) into the data section. The byte
size of a tensor is ``end - begin``; that is all the weights account needs, so a 20 GB checkpoint
costs a few hundred kilobytes of reading. We parse the header ourselves rather than through
``safetensors.safe_open`` because that maps the whole file and rejects a file whose data is
absent, and a header must be readable on its own (a partial download, a header-only fixture).

GGUF files (llama.cpp) are read with the ``gguf`` package, whose reader maps the file lazily and
touches only the metadata and tensor-info sections.
"""

from __future__ import annotations

import json
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

INDEX_NAME = "model.safetensors.index.json"
# Largest header we accept: real ones are well under 10 MB even with 100k tensors.
MAX_HEADER_BYTES = 256 * 1024 * 1024
_SPLIT_GGUF = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


@dataclass(frozen=True)
class TensorHeader:
    """One tensor as its header describes it.

    ``dtype`` is the safetensors dtype name (``BF16``, ``F8_E4M3``, ``U8`` ...) or, for GGUF,
    the GGML type name (``Q4_K``, ``BF16`` ...). ``shape`` is in row-major order for both (GGUF's
    ne[0]-first order is reversed on reading so that an embedding is [vocab, hidden] in both).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Checkpoint:
    """All tensor headers of a model, where they came from, and its config.json (if any)."""

    path: str
    format: str  # "safetensors" or "gguf"
    files: tuple[str, ...]
    tensors: tuple[TensorHeader, ...]
    config: dict
    notes: tuple[str, ...] = ()


def read_safetensors_header(path: str | Path) -> tuple[list[TensorHeader], int]:
    """Tensor headers of one safetensors file and the byte length its header implies.

    Returns the tensors and ``8 + N + max(end offset)``, the size the file must have if its data
    is complete (the caller compares it with the real size only to warn).
    """
    path = Path(path)
    with path.open("rb") as fh:
        prefix = fh.read(8)
        if len(prefix) != 8:
            raise ValueError(f"{path} is not a safetensors file: it is shorter than the 8-byte header length.")
        (n,) = struct.unpack("<Q", prefix)
        if n == 0 or n > MAX_HEADER_BYTES:
            raise ValueError(
                f"{path} is not a safetensors file: its header length reads as {n} bytes. "
                "Check that the file is a complete safetensors file and not a Git LFS pointer."
            )
        raw = fh.read(n)
    if len(raw) != n:
        raise ValueError(f"{path}: the header claims {n} bytes but the file ends after {len(raw)}; re-download it.")
    try:
        header = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: the safetensors header is not valid JSON ({exc}); re-download the file.") from exc
    tensors = []
    data_end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = info["data_offsets"]
            tensors.append(
                TensorHeader(name, info["dtype"], tuple(int(d) for d in info["shape"]), end - begin, path.name)
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: tensor {name!r} has a malformed header entry {info!r}.") from exc
        data_end = max(data_end, end)
    return tensors, 8 + n + data_end


def safetensors_files(model_dir: Path) -> tuple[list[Path], list[str]]:
    """The safetensors files that make up the model in ``model_dir``, and notes about the rest.

    With ``model.safetensors.index.json`` the files are those its ``weight_map`` names; other
    ``.safetensors`` files in the directory are reported, not read (an engine loading through
    the index never sees them). Without an index, every ``*.safetensors`` file is read, except
    that Mistral's ``consolidated.safetensors`` is skipped when HF-style shards sit beside it
    (it holds the same weights in another naming).
    """
    notes: list[str] = []
    index = model_dir / INDEX_NAME
    present = sorted(model_dir.glob("*.safetensors"))
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map") or {}
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not (model_dir / n).is_file()]
        if missing:
            raise FileNotFoundError(
                f"{index} names {len(missing)} shard(s) that are not in {model_dir}: {', '.join(missing[:3])}"
                f"{' ...' if len(missing) > 3 else ''}. Finish the download or point at the complete directory."
            )
        extra = [p.name for p in present if p.name not in set(names)]
        if extra:
            notes.append(f"not in {INDEX_NAME}, not counted: {', '.join(extra)}")
        return [model_dir / n for n in names], notes
    if not present:
        raise FileNotFoundError(
            f"{model_dir} holds no .safetensors or .gguf files. Point at the directory that contains the "
            "model weights (the one with config.json and model*.safetensors), or at a .gguf file."
        )
    consolidated = [p for p in present if p.name.startswith("consolidated")]
    if consolidated and len(consolidated) < len(present):
        notes.append(
            f"skipped {', '.join(p.name for p in consolidated)}: same weights as the HF-style shards beside it"
        )
        present = [p for p in present if p not in consolidated]
    return present, notes


def read_config(model_dir: Path) -> dict:
    """``config.json`` of a HF-style model directory, or ``{}`` when there is none."""
    cfg = model_dir / "config.json"
    if not cfg.is_file():
        return {}
    try:
        return json.loads(cfg.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cfg} is not valid JSON ({exc}).") from exc


def gguf_files(path: Path) -> list[Path]:
    """The GGUF files of a model: the file itself, all parts of a split model, or those in a directory.

    A directory's ``mmproj*.gguf`` (the vision projector llama.cpp loads beside the model) is
    included so that its bytes appear under the vision component.
    """
    if path.is_file():
        m = _SPLIT_GGUF.search(path.name)
        if not m:
            return [path]
        stem = path.name[: m.start()]
        return sorted(path.parent.glob(f"{glob_escape(stem)}-*-of-{m.group(2)}.gguf"))
    return sorted(path.glob("*.gguf"))


def glob_escape(text: str) -> str:
    return re.sub(r"([\[\]*?])", r"[\1]", text)


def read_gguf(files: list[Path]) -> tuple[list[TensorHeader], dict]:
    """Tensor headers and metadata of GGUF files, through ``gguf.GGUFReader``.

    Metadata keys come back as plain values (strings, numbers, lists of those) for the scalar
    keys needed here; array keys other than short ones are left out.
    """
    try:
        from gguf import GGUFReader
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ImportError("reading GGUF needs the `gguf` package: pip install gguf") from exc
    tensors: list[TensorHeader] = []
    meta: dict = {}
    for f in files:
        reader = GGUFReader(f, "r")
        for key, field in reader.fields.items():
            if key.startswith("GGUF.") or key in meta:
                continue
            value = _gguf_scalar(field)
            if value is not None:
                meta[key] = value
            elif key == "tokenizer.ggml.tokens":
                meta["tokenizer.ggml.tokens.count"] = len(field.data)
        for t in reader.tensors:
            shape = tuple(int(d) for d in reversed(list(t.shape)))
            tensors.append(TensorHeader(t.name, t.tensor_type.name, shape, int(t.n_bytes), f.name))
    return tensors, meta


def _gguf_scalar(field) -> object | None:
    from gguf import GGUFValueType

    if not field.types or field.types[0] == GGUFValueType.ARRAY:
        return None
    return field.contents()


def read_checkpoint(model_path: str | Path) -> Checkpoint:
    """Every tensor header of the model at ``model_path`` (a directory, a .safetensors or a .gguf)."""
    path = Path(model_path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"model path {path} does not exist; give the directory that holds the weights.")
    if (path.is_file() and path.suffix == ".gguf") or (
        path.is_dir() and not any(path.glob("*.safetensors")) and any(path.glob("*.gguf"))
    ):
        files = gguf_files(path)
        tensors, meta = read_gguf(files)
        return Checkpoint(str(path), "gguf", tuple(f.name for f in files), tuple(tensors), meta)
    if path.is_file():
        files, notes, config = [path], [], read_config(path.parent)
    else:
        files, notes = safetensors_files(path)
        config = read_config(path)
    tensors: list[TensorHeader] = []
    short = []
    for f in files:
        found, expected = read_safetensors_header(f)
        tensors.extend(found)
        if f.stat().st_size < expected:
            short.append(f.name)
    if short:
        notes.append(
            f"{len(short)} file(s) are shorter than their headers say ({', '.join(short[:3])}"
            f"{' ...' if len(short) > 3 else ''}): the account uses the headers; an engine could not load them"
        )
    counts = Counter(t.name for t in tensors)
    if len(counts) != len(tensors):
        dup = sorted(n for n, c in counts.items() if c > 1)[:3]
        raise ValueError(f"{path}: tensor(s) {', '.join(dup)} appear in more than one file; remove the stray copy.")
    return Checkpoint(str(path), "safetensors", tuple(f.name for f in files), tuple(tensors), config, tuple(notes))


def read_hub_checkpoint(repo_id: str, revision: str | None = None, timeout_s: float = 10.0) -> Checkpoint:
    """Every tensor header of a hub model, read remotely: range requests for the safetensors
    headers (``huggingface_hub.get_safetensors_metadata``) and ``config.json``; no weights.

    Only where the hub is reachable (bracket.physics.modelsource decides); it cannot be exercised without one.
    """
    from huggingface_hub import get_safetensors_metadata, hf_hub_download

    meta = get_safetensors_metadata(repo_id, revision=revision, timeout=timeout_s)
    tensors = hub_tensors(meta)
    notes = [f"headers read from the hub ({repo_id}); no weights were downloaded"]
    try:
        config = json.loads(Path(hf_hub_download(repo_id, "config.json", revision=revision)).read_text())
    except Exception as exc:  # noqa: BLE001 - a model without config.json still has headers
        config = {}
        notes.append(
            f"no config.json read from the hub ({type(exc).__name__}): layer count and tying from tensors only"
        )
    return Checkpoint(
        f"hf://{repo_id}", "safetensors", tuple(sorted(meta.files_metadata)), tuple(tensors), config, tuple(notes)
    )


def hub_tensors(meta) -> list[TensorHeader]:
    """TensorHeaders from huggingface_hub's SafetensorsRepoMetadata (files_metadata -> tensors)."""
    tensors = []
    for fname, fmeta in sorted(meta.files_metadata.items()):
        for name, info in fmeta.tensors.items():
            begin, end = info.data_offsets
            tensors.append(TensorHeader(name, info.dtype, tuple(int(d) for d in info.shape), end - begin, fname))
    return tensors
