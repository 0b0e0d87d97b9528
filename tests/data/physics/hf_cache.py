"""A local Hugging Face cache, laid out as a download leaves it, holding a model's files."""

from __future__ import annotations

import shutil
from pathlib import Path

REV = "0123456789abcdef0123456789abcdef01234567"


def hf_cache(cache: Path, repo_id: str, model_dir: Path, rev: str = REV) -> Path:
    """models--org--name/{refs/main, blobs/, snapshots/<rev>/}, the snapshot's files linking into blobs/
    as the hub client writes them; returns the snapshot folder."""
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for f in sorted(Path(model_dir).iterdir()):
        if f.suffix in (".safetensors", ".json") and f.name != "build.json":
            blob = repo / "blobs" / f"blob-{f.name}"
            shutil.copy2(f, blob)
            (snap / f.name).symlink_to(Path("../../blobs") / blob.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    return snap
