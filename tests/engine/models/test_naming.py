"""One name per model: the catalog's title, else the file's name and its quantization; the name
a file's metadata gives is never the heading."""

from __future__ import annotations

import gguf

from engine import model_title
from engine.models import catalog


def write_gguf(path, name: str, file_type: int):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_file_type(file_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_catalog_model_is_named_by_its_title_wherever_its_file_lies(tmp_path):
    for model in (catalog.DEFAULT_TARGET, catalog.DEFAULT_DRAFTER):
        assert model_title(tmp_path / "elsewhere" / model.filename) == model.title
    assert model_title(tmp_path / catalog.DEFAULT_TARGET.filename) == "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)"


def test_another_file_is_named_by_its_file_then_its_quantization(tmp_path):
    path = write_gguf(tmp_path / "my-coder.gguf", "Some Metadata Name GGUF", 7)
    assert model_title(path) == "my-coder (Q8_0)"
    said = write_gguf(tmp_path / "my-coder-Q8_0.gguf", "Some Metadata Name GGUF", 7)
    assert model_title(said) == "my-coder-Q8_0"  # the name says it already
    assert model_title(path, quant="") == "my-coder"  # where the caller reads no header
    assert model_title(None, fallback="ngram") == "ngram"
