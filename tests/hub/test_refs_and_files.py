"""Model references and GGUF file-name grouping (no network)."""

from __future__ import annotations

import json

import pytest

from fitprobe.catalogs.hub import BadModelRef, parse_model_ref
from fitprobe.catalogs.hub_files import group_gguf_files, pick_quant, quant_from_name

from .conftest import fixture_bytes


@pytest.mark.parametrize(
    "text, repo, rev, quant",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", None, None),
        ("unsloth/GLM-4.5-GGUF:Q4_K_M", "unsloth/GLM-4.5-GGUF", None, "Q4_K_M"),
        ("unsloth/GLM-4.5-GGUF:ud-q4_k_xl", "unsloth/GLM-4.5-GGUF", None, "UD-Q4_K_XL"),
        ("Qwen/Qwen3-0.6B@c1899de", "Qwen/Qwen3-0.6B", "c1899de", None),
        ("Qwen/Qwen3-0.6B@refs/pr/1", "Qwen/Qwen3-0.6B", "refs/pr/1", None),
        ("  Qwen/Qwen3-0.6B  ", "Qwen/Qwen3-0.6B", None, None),
        ("https://huggingface.co/Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B", None, None),
        ("https://huggingface.co/Qwen/Qwen3-0.6B/tree/refs%2Fpr%2F3", "Qwen/Qwen3-0.6B", "refs/pr/3", None),
        ("https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json", "Qwen/Qwen3-0.6B", "main", None),
        ("hf.co/unsloth/DeepSeek-R1-GGUF", "unsloth/DeepSeek-R1-GGUF", None, None),
    ],
)
def test_parse_model_ref_accepts(text, repo, rev, quant):
    ref = parse_model_ref(text)
    assert (ref.repo_id, ref.revision, ref.quant) == (repo, rev, quant)


@pytest.mark.parametrize(
    "text",
    ["", "llama", "a/b/c", "org/na me", "org--x/y", "org/y.", "-org/y",
     "https://huggingface.co/datasets/org/data", "https://huggingface.co/org", "org/name:Q4 K"],
)
def test_parse_model_ref_rejects_with_one_line(text):
    with pytest.raises(BadModelRef) as e:
        parse_model_ref(text)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "path, quant",
    [
        ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("UD-Q4_K_XL/GLM-4.5-UD-Q4_K_XL-00001-of-00005.gguf", "UD-Q4_K_XL"),
        ("Q4_K_M/model.gguf", "Q4_K_M"),  # quant only in the folder
        ("DeepSeek-R1-Q4_K_M/DeepSeek-R1-Q4_K_M-00001-of-00009.gguf", "Q4_K_M"),
        ("gpt-oss-20b-mxfp4.gguf", "MXFP4"),
        ("DeepSeek-R1-0528-MXFP4_MOE-00001-of-00009.gguf", "MXFP4_MOE"),
        ("llama-2-7b.Q4_K_M.gguf", "Q4_K_M"),  # TheBloke's dot separator
        ("qwen2.5-7b-instruct-q8_0-00001-of-00003.gguf", "Q8_0"),
        ("Meta-Llama-3.1-8B-Instruct-f16.gguf", "F16"),
        ("BF16/GLM-4.5-Air-BF16-00001-of-00005.gguf", "BF16"),
        ("x-IQ2_XXS.gguf", "IQ2_XXS"),
        ("Qwen3-8B-Q6_K_L.gguf", "Q6_K_L"),
        ("model-TQ1_0.gguf", "TQ1_0"),
        ("model.gguf", None),
    ],
)
def test_quant_from_name(path, quant):
    assert quant_from_name(path) == quant


def _listing(repo: str) -> list[tuple[str, int]]:
    data = json.loads(fixture_bytes("gguf_listings.json"))["repos"][repo]
    return [(f["path"], f["size"]) for f in data["files"]]


def test_split_files_group_into_one_quant_with_summed_size():
    files = _listing("unsloth/GLM-4.5-Air-GGUF") + _listing("unsloth/DeepSeek-R1-GGUF")
    groups = {g.quant: g for g in group_gguf_files(files + [("README.md", 10)])}
    assert set(groups) == {"Q8_0", "Q4_K_M"}
    q8 = groups["Q8_0"]
    assert q8.filenames == [p for p, _ in _listing("unsloth/GLM-4.5-Air-GGUF")]
    assert q8.size_bytes == sum(s for _, s in _listing("unsloth/GLM-4.5-Air-GGUF"))
    assert q8.parts_expected == 3 and q8.complete
    assert groups["Q4_K_M"].parts_expected == 9 and len(groups["Q4_K_M"].filenames) == 9


def test_missing_split_part_marks_group_incomplete_and_unknown_size_stays_unknown():
    parts = _listing("unsloth/GLM-4.5-Air-GGUF")
    (g,) = group_gguf_files([parts[0], parts[2]])
    assert not g.complete and g.parts_expected == 3
    (g,) = group_gguf_files([(parts[0][0], None), parts[1], parts[2]])
    assert g.size_bytes is None


def test_mmproj_is_kept_apart_and_pick_quant_is_case_insensitive():
    files = [("model-Q4_K_M.gguf", 5), ("model-Q8_0.gguf", 9), ("mmproj-F16.gguf", 1)]
    groups = group_gguf_files(files)
    assert [g.quant for g in groups] == ["Q4_K_M", "Q8_0"]
    assert [g.quant for g in group_gguf_files(files, mmproj=True)] == ["F16"]
    assert [g.filenames for g in pick_quant(groups, "q8_0")] == [["model-Q8_0.gguf"]]
    assert pick_quant(groups, "IQ2_XXS") == []
