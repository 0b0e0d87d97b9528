"""Convert the embedded tiny model to GGUF with llama.cpp's own converter (runs in the trainer's venv).

Usage: python to_gguf.py LLAMA_CPP_SOURCE MODEL_DIR OUT.gguf

The converter is the convert_hf_to_gguf.py vendored in the same llama.cpp source that the
workflow builds, with that source's gguf-py on the path (torch and transformers come from the
trainer's environment, workflow/envs/trainer.txt). The tiny model's BPE vocabulary is trained locally, so the converter does
not recognise its pre-tokenizer by hash. build_model.py trains it behind the byte-level
pre-tokenizer of `tokenizers` with its default GPT-2 split pattern, which llama.cpp calls "gpt-2",
so that name is given explicitly.
Imports nothing from bracket.
"""

import runpy
import sys
from pathlib import Path


def main() -> None:
    src, model, out = (Path(a) for a in sys.argv[1:4])
    sys.path[:0] = [str(src), str(src / "gguf-py")]
    from conversion import base  # llama.cpp's converter package, from the source above

    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
    tmp = out.with_name(out.name + ".tmp")
    sys.argv = ["convert_hf_to_gguf.py", str(model), "--outfile", str(tmp), "--outtype", "f16"]
    runpy.run_path(str(src / "convert_hf_to_gguf.py"), run_name="__main__")
    tmp.replace(out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
