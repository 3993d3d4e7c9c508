"""Registry (functions, prompt, search) and check (diagnostics with their rendering)."""

from pathlib import Path

import pytest

from rlm_registry import Diagnostic, Registry, RegistryError, check

GOOD = (
    "--- Counts the ERROR lines of a log.\n"
    "---@param text string The log\n"
    "---@return integer count The number of ERROR lines\n"
    "function error_count(text)\n"
    "  return #grep(text, 'ERROR')\n"
    "end\n"
)


@pytest.fixture
def good_dir(tmp_path: Path) -> Path:
    (tmp_path / "errors.lua").write_text(GOOD)
    return tmp_path


def test_the_baked_registry_lists_its_functions():
    registry = Registry()
    functions = registry.functions()
    assert len(functions) == len(registry) > 30
    assert [f["name"] for f in functions] == sorted(f["name"] for f in functions)
    word_count = next(f for f in functions if f["name"] == "word_count")
    assert word_count["signature"] == "word_count(text)"
    assert word_count["summary"]
    assert word_count["params"][0]["name"] == "text"
    assert word_count["returns"][0]["type"] == "integer"
    assert word_count["source"].startswith("function word_count(")
    assert "word_count" in registry and "no_such_function" not in registry
    assert 42 not in registry


def test_paths_layer_on_the_baked_registry_or_stand_alone(good_dir: Path):
    layered = Registry([good_dir])
    assert "error_count" in layered and "word_count" in layered
    alone = Registry([good_dir], baked=False)
    assert len(alone) == 1
    (only,) = alone.functions()
    assert only["name"] == "error_count"
    assert only["source"] == GOOD[GOOD.index("function"):].rstrip("\n")
    assert only["file"].endswith("errors.lua") and only["line"] == 4
    assert Registry([], baked=False).functions() == []


def test_prompt_in_full_and_compact(good_dir: Path):
    registry = Registry([good_dir], baked=False)
    full = registry.prompt()
    assert "Counts the ERROR lines of a log." in full
    assert "---@param text string The log" in full
    compact = registry.prompt(compact=True)
    assert "\nerror_count(text)  -- Counts the ERROR lines of a log.\n" in compact
    assert "---@param" not in compact
    assert Registry().prompt().startswith("## Registry functions")


def test_search_ranks_by_what_functions_do():
    hits = Registry().search("count the words of a text", k=3)
    assert len(hits) == 3
    assert hits[0]["name"] == "word_count"
    assert hits[0]["confidence"] >= hits[1]["confidence"]
    assert {"name", "signature", "summary", "score", "match_reason"} <= hits[0].keys()
    assert Registry().search("words", k=0) == []
    assert Registry([], baked=False).search("anything") == []


def test_a_file_that_breaks_the_conventions_is_a_registry_error(tmp_path: Path):
    (tmp_path / "bad.lua").write_text("function undocumented(x) return x end\n")
    with pytest.raises(RegistryError) as caught:
        Registry([tmp_path])
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.code == "E002" and diagnostic.severity == "error"
    assert "error[E002]" in str(caught.value)
    assert "1 convention violation in 1 file" in str(caught.value)


def test_check_is_empty_for_good_files(good_dir: Path):
    assert check([good_dir]) == []
    assert check([good_dir / "errors.lua"]) == []
    assert check([]) == []


def test_check_reports_each_diagnostic_rendered_like_rustc(tmp_path: Path):
    (tmp_path / "bad.lua").write_text("local x = 1\nfunction undocumented(a) return a end\n")
    (diagnostic,) = check([tmp_path])
    assert isinstance(diagnostic, Diagnostic)
    assert (diagnostic.code, diagnostic.line, diagnostic.column) == ("E002", 2, 1)
    assert diagnostic.file.endswith("bad.lua")
    assert diagnostic.message
    assert diagnostic.rendered.startswith("error[E002]: ")
    assert f"--> {diagnostic.file}:2:1" in diagnostic.rendered
    assert "function undocumented(a) return a end" in diagnostic.rendered
    assert str(diagnostic) == f"{diagnostic.file}:2:1: error[E002]: {diagnostic.message}"
    assert "E002" in repr(diagnostic)


def test_check_reports_overrides_as_notes(tmp_path: Path, good_dir: Path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "errors.lua").write_text(GOOD.replace("Counts the ERROR", "Also counts the ERROR"))
    notes = check([good_dir / "errors.lua", other])
    assert [(n.code, n.severity) for n in notes] == [("N001", "note")]
    assert "note[N001]" in notes[0].rendered


def test_check_of_a_path_that_does_not_exist_says_so(tmp_path: Path):
    (diagnostic,) = check([tmp_path / "missing"])
    assert "cannot read" in diagnostic.message


def test_bad_arguments_are_type_errors():
    with pytest.raises(TypeError):
        check("lua")  # a str is not a list of paths
    with pytest.raises(TypeError):
        Registry(baked="yes")
    with pytest.raises(TypeError):
        Registry().search(42)
