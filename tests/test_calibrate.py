"""``scrapy-simhash calibrate``: stratified seeded sampling, the texts and similarity of real records,
and the scores (precision/recall/F1 per setting, weighted) of judgements."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.cli import main
from scrapy_simhash.page import fingerprint_page
from scrapy_simhash.report.calibrate.sample import BANDS, band_name, sample_pairs
from scrapy_simhash.report.calibrate.score import Judged, best, read_judgements, scores
from scrapy_simhash.report.model import Page
from scrapy_simhash.warc.read.payload import html_page
from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord


def synthetic_pages(per_distance: int = 30, seed: int = 3) -> list[Page]:
    """Pairs (original, copy) at every distance 0..24, far from every other pair."""
    rng = np.random.default_rng(seed)
    pages = []
    for d in range(25):
        for n in range(per_distance):
            base = int(rng.integers(1, 2**63))
            flips = rng.choice(64, size=d, replace=False)
            copy = base
            for bit in flips:
                copy ^= 1 << int(bit)
            for i, value in enumerate((base, copy)):
                pages.append(Page(f"p{d}-{n}-{i}", uri=f"http://x/{d}/{n}/{i}", file="/f.warc.gz",
                                  offset=len(pages), simhash=value))  # fmt: skip
    return pages


def test_equal_counts_per_band_seeded_and_weighted() -> None:
    pages = synthetic_pages()
    pairs, notes = sample_pairs(pages, 7 * 10, seed=5)
    assert Counter(p.band for p in pairs) == {band_name(b): 10 for b in BANDS}
    assert notes == []
    for p in pairs:
        low, high = next(b for b in BANDS if band_name(b) == p.band)
        assert low <= p.distance <= high and (p.a.simhash ^ p.b.simhash).bit_count() == p.distance
    # every pair of a band is known here (fewer pages than FAR_SAMPLE), so each weight is exact:
    # the pairs of its band, by brute force, over the pairs sampled from it
    values = np.array([p.simhash for p in pages], dtype=np.uint64)
    i, j = np.triu_indices(len(pages), 1)
    all_d = np.array([bin(int(x)).count("1") for x in values[i] ^ values[j]])
    for low, high in BANDS:
        population = int(((all_d >= low) & (all_d <= high)).sum())
        assert {p.weight for p in pairs if p.band == band_name((low, high))} == {population / 10}
    again, _ = sample_pairs(pages, 70, seed=5)
    assert [(p.a.key, p.b.key) for p in again] == [(p.a.key, p.b.key) for p in pairs]
    other, _ = sample_pairs(pages, 70, seed=6)
    assert [(p.a.key, p.b.key) for p in other] != [(p.a.key, p.b.key) for p in pairs]


def test_a_band_that_runs_short_is_said() -> None:
    pages = [p for p in synthetic_pages(per_distance=2) if not p.key.startswith(("p1-", "p2-"))]
    pairs, notes = sample_pairs(pages, 70, seed=0)
    assert "distance 1-2: 0 pair(s) found, 10 wanted" in notes
    assert all(p.band != "1-2" for p in pairs)


def test_pages_without_records_are_refused_clearly() -> None:
    pages = [Page(f"http://x/{i}", uri=f"http://x/{i}", simhash=i + 1) for i in range(5)]
    with pytest.raises(ValueError, match="needs pages with a fingerprint and their WARC record"):
        sample_pairs(pages, 10)


def _record(file: Path, offset: int) -> ArchiveRecord:
    for item in ArchiveReader().read(file):
        if isinstance(item, ArchiveRecord) and item.offset == offset:
            return item
    raise AssertionError(f"no record at {offset}")


def _pair_similarity(pair: dict, **options: Any) -> float:
    """The estimated Jaccard of a sampled pair's two records, fingerprinted again with ``options``."""
    sketches = []
    for side in ("a", "b"):
        file, offset = pair[side]["locator"].rsplit("@", 1)
        page = html_page(_record(Path(file), int(offset)))
        sketches.append(fingerprint_page(page.body, page.url, page.encoding, **options).minhash)
    return sketches[0].jaccard(sketches[1])


def test_sample_from_real_records_has_their_texts_and_minhash_similarity(
    example_crawl_sidecar: Path, tmp_path: Path
) -> None:
    out = tmp_path / "judge.html"
    sidecar = example_crawl_sidecar  # tag's sidecar of aut's example crawl, made once a session
    assert main(["calibrate", "sample", str(sidecar), "-o", str(out), "--pairs", "14", "--seed", "1"]) == 0
    payload = json.loads(re.search(r'id="judge-data">(.*?)</script>', out.read_text(), re.S).group(1))
    assert payload["pairs"] and all(p["left"] and p["reason"] is None for p in payload["pairs"])
    pair = payload["pairs"][0]
    assert pair["similarity"] == pytest.approx(_pair_similarity(pair, minhash=True), abs=1e-4)


def _judgements(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "judgements.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_scores_by_hand(tmp_path: Path, capsys) -> None:
    rows = [
        {"pair": 0, "judgement": "duplicate", "distance": 0, "similarity": 0.95, "weight": 1},
        {"pair": 1, "judgement": "duplicate", "distance": 2, "similarity": 0.85, "weight": 1},
        {"pair": 2, "judgement": "not", "distance": 3, "similarity": 0.6, "weight": 1},
        {"pair": 3, "judgement": "duplicate", "distance": 5, "similarity": 0.7, "weight": 2},
        {"pair": 4, "judgement": "skip", "distance": 1, "similarity": 0.9, "weight": 1},
        {"pair": 5, "judgement": "not", "distance": 12, "similarity": 0.1, "weight": 10},
    ]
    judged, problems = read_judgements(_judgements(tmp_path, rows))
    assert problems == [] and len(judged) == 5
    by = {(s.setting, s.value): s for s in scores(judged)}
    k2 = by[("k", 2)]  # predicted: pairs 0, 1 (both right); missed: pair 3 (weight 2)
    assert (k2.precision, k2.recall) == (1.0, 0.5)
    k5 = by[("k", 5)]  # predicted 0, 1, 2, 3: tp 1+1+2, fp 1
    assert k5.precision == pytest.approx(4 / 5) and k5.recall == 1.0
    assert by[("similarity", 0.7)].recall == 1.0 and by[("similarity", 0.7)].precision == 1.0
    assert best(scores(judged), "similarity").value == 0.7
    assert main(["calibrate", "score", str(_judgements(tmp_path, rows))]) == 0
    out = capsys.readouterr().out
    assert "recommended k: 5" in out and "recommended similarity: 0.7" in out


def test_bad_judgement_lines_are_named_and_passed_over(tmp_path: Path, capsys) -> None:
    path = _judgements(tmp_path, [{"pair": 0, "judgement": "duplicate", "distance": 1}])
    with path.open("a") as fh:
        fh.write("{oops\n" + json.dumps({"pair": 1, "judgement": "maybe", "distance": 2}) + "\n")
    assert main(["calibrate", "score", str(path)]) == 1
    err = capsys.readouterr().err
    assert "line 2" in err and "line 3" in err and "maybe" in err


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 24), st.floats(0.1, 10)),
        min_size=1,
        max_size=40,
    )
)
def test_recall_never_falls_as_k_grows(rows: list[tuple[bool, int, float]]) -> None:
    judged = [Judged(dup, d, None, w) for dup, d, w in rows]
    recalls = [s.recall for s in scores(judged) if s.setting == "k"]
    if any(dup for dup, _, _ in rows):
        assert all(a <= b + 1e-12 for a, b in itertools.pairwise(recalls))
        assert recalls[-1] == pytest.approx(1.0) or max(d for _, d, _ in rows) > len(recalls) - 1


def test_by_similarity_equal_counts_per_band_and_weights_scaled() -> None:
    from scrapy_simhash.report.calibrate.sample import (
        SIMILARITY_BANDS,
        JudgePair,
        restratify,
        similarity_band,
    )

    rng = np.random.default_rng(0)
    candidates = []
    for n in range(300):
        a, b = Page(f"a{n}", file="/f", offset=2 * n), Page(f"b{n}", file="/f", offset=2 * n + 1)
        pair = JudgePair(n, a, b, distance=n % 25, band="x", weight=float(1 + n % 4))
        pair.similarity = float(rng.random()) if n % 10 else None  # some without a sketch
        candidates.append(pair)
    before = {id(p): p.weight for p in candidates}
    in_band = Counter(similarity_band(p.similarity) for p in candidates if p.similarity is not None)
    chosen, notes = restratify(candidates, 7 * 4, np.random.default_rng(1))
    assert Counter(similarity_band(p.similarity) for p in chosen) == {
        i: 4 for i in range(len(SIMILARITY_BANDS))
    }
    assert "30 candidate pair(s) without a similarity (no sketch) left out" in notes
    for p in chosen:  # a candidate picked 4 out of N stands for N/4 times as many pairs
        assert p.weight == pytest.approx(before[id(p)] * in_band[similarity_band(p.similarity)] / 4)
    assert sorted(p.number for p in chosen) == list(range(len(chosen)))
    assert similarity_band(1.0) == len(SIMILARITY_BANDS) - 1 and similarity_band(0.2) == 1


def test_sample_by_similarity_from_real_records(example_crawl_rows: dict[str, Path], tmp_path: Path) -> None:
    # ``dedupe --report ROWS --index INDEX`` of aut's example crawl, made once a session
    rows, index = example_crawl_rows["rows"], example_crawl_rows["index"]
    out = tmp_path / "judge.html"
    assert main(["calibrate", "sample", str(rows), "-o", str(out), "--pairs", "7", "--by", "similarity"]) == 0
    payload = json.loads(re.search(r'id="judge-data">(.*?)</script>', out.read_text(), re.S).group(1))
    assert payload["pairs"] and all(p["similarity"] is not None and p["left"] for p in payload["pairs"])
    assert all("/ similarity " in p["band"] for p in payload["pairs"])
    # an index written by dedupe --index knows each page's record: its pairs have texts too
    assert main(["calibrate", "sample", str(index), "-o", str(out), "--pairs", "7"]) == 0
    payload = json.loads(re.search(r'id="judge-data">(.*?)</script>', out.read_text(), re.S).group(1))
    assert payload["pairs"] and all(p["left"] and p["reason"] is None for p in payload["pairs"])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash ARGS`` in a subprocess with a clean environment (no variable the tests set)."""
    tool = Path(sys.executable).with_name("scrapy-simhash")
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return subprocess.run([str(tool), *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_recommended_settings_are_accepted_by_the_tools(corpus: Path, tmp_path: Path) -> None:
    """Judged duplicates up to distance 12 would make k = 12 the best F1, but no index takes more
    than 8: the recommendation is a k the tools accept, and each option it names, fed its value,
    runs (``dedupe --index`` for k, verified mode's ``--similarity`` for the similarity)."""
    rows = [
        {"pair": i, "judgement": "duplicate" if d <= 12 else "not", "distance": d,
         "similarity": round(1 - d / 30, 3), "weight": 1}
        for i, d in enumerate(range(0, 24))
    ]  # fmt: skip
    done = run_cli("calibrate", "score", str(_judgements(tmp_path, rows)))
    assert done.returncode == 0, done.stderr
    found = re.findall(r"^recommended (k|similarity): (\S+) \(([^)]*)\)", done.stdout, re.M)
    recommended = {setting: (value, options) for setting, value, options in found}
    assert set(recommended) == {"k", "similarity"}, done.stdout
    k, k_options = recommended["k"]
    assert 0 <= int(k) <= 8 and "up to 8" in done.stdout  # and it says why not 12
    similarity, similarity_options = recommended["similarity"]
    warc = corpus / "warcs/resiliparse/warcfile.warc.gz"  # a small crawl: what runs is the options
    base = ["dedupe", "--workers", "1", "--no-progress", "--report", str(tmp_path / "rows.jsonl")]
    k_flags = re.findall(r"--[a-z-]+", k_options)
    similarity_flags = re.findall(r"--[a-z-]+", similarity_options)
    assert k_flags and similarity_flags
    for flag in k_flags:
        index = tmp_path / f"index-{flag.strip('-')}"
        run = run_cli(*base, "--index", str(index), flag, k, str(warc))
        assert run.returncode == 0, (flag, k, run.stderr)
    for flag in similarity_flags:
        run = run_cli(*base, flag, similarity, str(warc))
        assert run.returncode == 0, (flag, similarity, run.stderr)


def _payload(page: Path) -> dict:
    return json.loads(re.search(r'id="judge-data">(.*?)</script>', page.read_text(), re.S).group(1))


def test_sample_takes_extractor_and_records_it_and_score_says_it(corpus: Path, tmp_path: Path) -> None:
    """``--extractor`` as for tag/dedupe: the texts and similarities are that extractor's, the page and
    every exported judgement name it, and ``calibrate score`` says which extractor was judged."""
    from scrapy_simhash.extract import DEFAULT_EXTRACTOR
    from scrapy_simhash.extract.resiliparse import ResiliparseExtractor

    resiliparse = ResiliparseExtractor()
    warc = corpus / "warcs/aut/warc/example.warc.gz"
    tag = ("tag", "--workers", "1", "--no-progress", "--extractor", "resiliparse", "--out", str(tmp_path))
    done = run_cli(*tag, str(warc))
    assert done.returncode == 0, done.stderr
    sidecar = tmp_path / "example.warc.gz.simhash.warc.gz"
    out = tmp_path / "judge.html"
    done = run_cli(
        "calibrate", "sample", str(sidecar), "-o", str(out), "--pairs", "7", "--extractor", "resiliparse"
    )
    assert done.returncode == 0, done.stderr
    assert f"texts by {resiliparse.description}" in done.stderr and "were made by" not in done.stderr
    payload = _payload(out)
    assert payload["extractor"] == resiliparse.description
    assert f'<span id="extractor">{resiliparse.description}</span>' in out.read_text()
    pair = next(p for p in payload["pairs"] if p["similarity"] is not None)
    assert pair["similarity"] == pytest.approx(_pair_similarity(pair, extractor=resiliparse), abs=1e-4)

    # the default stays the default extractor, and the page says the input's fingerprints are another's
    done = run_cli("calibrate", "sample", str(sidecar), "-o", str(out), "--pairs", "7")
    assert done.returncode == 0, done.stderr
    assert _payload(out)["extractor"] == DEFAULT_EXTRACTOR.description
    assert f"the input's fingerprints were made by {resiliparse.description}" in done.stderr

    rows = [{"pair": i, "judgement": "duplicate" if i < 3 else "not", "distance": i, "similarity": 1 - i / 10,
             "weight": 1, "extractor": resiliparse.description} for i in range(6)]  # fmt: skip
    done = run_cli("calibrate", "score", str(_judgements(tmp_path, rows)))
    assert done.returncode == 0, done.stderr
    assert f"texts judged: extracted by {resiliparse.description}" in done.stdout
    mixed = [{**row, "extractor": DEFAULT_EXTRACTOR.description} if row["pair"] == 0 else row for row in rows]
    done = run_cli("calibrate", "score", str(_judgements(tmp_path, mixed)))
    assert "texts judged: made by 2 extractors" in done.stdout


def test_sample_from_archives_without_fingerprints_says_to_tag_them_first(
    corpus: Path, tmp_path: Path, example_crawl_sidecar: Path
) -> None:
    """A raw archive's pages carry no fingerprint (only simhash metadata records do): ``calibrate
    sample`` on it refuses with the way out, and following it (``tag``, then the archive with its
    sidecar) gives a judging page."""
    warc = corpus / "warcs/aut/warc/example.warc.gz"
    out = tmp_path / "judge.html"
    refused = run_cli("calibrate", "sample", str(warc), "-o", str(out))
    assert refused.returncode == 2 and not out.exists()
    assert "scrapy-simhash tag ARCHIVES" in refused.stderr and ".simhash.warc.gz" in refused.stderr
    # the way out's ``tag``: the session's ``tag --out DIR`` of this archive (conftest), tagged once
    sidecar = example_crawl_sidecar
    assert sidecar.name == "example.warc.gz.simhash.warc.gz"
    done = run_cli("calibrate", "sample", str(warc), str(sidecar), "-o", str(out), "--pairs", "5")
    assert done.returncode == 0, done.stderr
    assert _payload(out)["pairs"]
