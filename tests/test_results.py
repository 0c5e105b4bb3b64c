"""Benchmark records: a malformed one gets an error that names the field; the README is regenerated from them."""
import json

import pytest

from cudabook import results

RECORD = {
    "gpu": "NVIDIA Testcard", "copy_GBps": 3000.0, "commit": "abc1234", "date": "2026-11-26T00:00:00+00:00",
    "workloads": {"resample B=1 S=2 T=3 D=4 sorted": {"stages": {
        "01_naive": {"median_us": 100.0, "GBps": 300.0, "pct_of_copy": 10.0, "correct": True},
        "07_tma": {"skipped": "07_tma needs compute capability 9.0"}},
        "peers": {"torch_compile": {"median_us": 20.0, "GBps": 1500.0, "pct_of_copy": 50.0, "correct": True}}}},
}


def test_a_good_record_round_trips(tmp_path):
    path = results.save(RECORD, tmp_path)
    assert path.name == "Testcard.json"
    assert results.load(path) == RECORD


@pytest.mark.parametrize("breakage, message", [
    (lambda r: r.pop("gpu"), "missing field gpu"),
    (lambda r: r.update(copy_GBps="fast"), "field copy_GBps should be"),
    (lambda r: r["workloads"]["resample B=1 S=2 T=3 D=4 sorted"]["stages"]["01_naive"].pop("correct"),
     r"missing field workloads\.resample B=1 S=2 T=3 D=4 sorted\.stages\.01_naive\.correct"),
])
def test_a_malformed_record_names_the_field(tmp_path, breakage, message):
    record = json.loads(json.dumps(RECORD))
    breakage(record)
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(results.RecordError, match=message):
        results.load(tmp_path / "bad.json")


def test_not_json_is_an_error(tmp_path):
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(results.RecordError, match="bad.json: not valid JSON"):
        results.load(tmp_path / "bad.json")


def test_table_has_every_stage_and_peer():
    text = results.table(RECORD)
    assert "| 01_naive | 100.0 | 300 | 10.0 | 1.0× | ✓ |" in text
    assert "07_tma needs compute capability 9.0" in text
    assert "| torch_compile | 20.0 | 1,500 | 50.0 | 5.0× | ✓ |" in text


def test_readme_is_regenerated_from_the_records(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{results.BEGIN}\nstale\n{results.END}\nafter\n")
    folder = tmp_path / "results"
    results.save(RECORD, folder)
    assert results.update_readme(readme, folder)
    text = readme.read_text()
    assert "stale" not in text and "NVIDIA Testcard" in text and text.endswith(f"{results.END}\nafter\n")
    assert (folder / "Testcard.png").exists()
    assert not results.update_readme(readme, folder)


def test_committed_readme_matches_committed_records(tmp_path):
    import shutil
    readme = tmp_path / "README.md"
    shutil.copy(results.README, readme)
    results_copy = tmp_path / "results"
    shutil.copytree(results.RESULTS, results_copy)
    assert not results.update_readme(readme, results_copy), \
        "README's results section is stale: run `python -m cudabook.results readme`"


def test_committed_records_are_valid():
    for record in results.load_all():
        assert record["workloads"]
