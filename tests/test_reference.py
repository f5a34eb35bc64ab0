"""CI step: the installed transformers is the one every family's parity cells were run against."""
import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("check_reference",
                                              Path(__file__).parents[1] / "tools" / "check_reference.py")
check_reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_reference)


def test_installed_transformers_is_the_pinned_reference(capsys):
    assert check_reference.main([]) == 0, capsys.readouterr().err


def test_a_mismatch_names_the_family_and_its_chapter():
    fams = {"Qwen3MoeForCausalLM": "39_porting", "LlamaForCausalLM": "12_llama"}
    problems = check_reference.check({"LlamaForCausalLM": "5.24.0"}, "5.25.0", fams)
    assert problems == ["LlamaForCausalLM (chapter 12_llama): parity recorded against transformers 5.24.0, "
                        "installed 5.25.0", "Qwen3MoeForCausalLM (chapter 39_porting): no recorded reference version"]
