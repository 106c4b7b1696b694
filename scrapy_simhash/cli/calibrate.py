"""``scrapy-simhash calibrate``: choose the threshold for your own pages.

``calibrate sample`` writes a page where a person judges sampled pairs; ``calibrate score`` turns
the exported judgements into precision/recall/F1 per setting and recommends one. Exit status:
0 done, 1 done but lines or records were passed over (named on stderr), 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..warc.commandline import add_extractor_argument, extractor_from

HELP = "sample pairs for a person to judge, then score thresholds against the judgements"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("calibrate", help=HELP, description=HELP)
    commands = parser.add_subparsers(dest="calibrate_command", metavar="STEP", required=True)
    sample = commands.add_parser(
        "sample",
        help="write an HTML page of pairs to judge",
        description="Sample pairs of pages across bands of Hamming distance (equal counts per band, "
        "seeded), with their texts re-extracted from the WARC records, diffed, and their MinHash "
        "similarity; write a page where a person judges them (keys d / n / s, arrows) and downloads "
        "the judgements as JSON lines.",
    )
    sample.add_argument("inputs", nargs="+", metavar="INPUT", help="WARCs, dedupe reports, or one index")
    sample.add_argument("-o", "--output", required=True, help="the HTML page to write (judge.html)")
    sample.add_argument("--pairs", type=int, default=140, help="pairs to sample (default 140)")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sample.add_argument(
        "--by",
        choices=("distance", "similarity"),
        default="distance",
        help="bands to draw equal counts from: Hamming distance (default), or MinHash similarity "
        "(the similarity of 4x as many distance-sampled pairs is computed first: slower)",
    )
    sample.add_argument("--reader", default="auto", help="WARC reader: auto, warcio or fastwarc")
    add_extractor_argument(sample)
    sample.set_defaults(func=run_sample)
    score = commands.add_parser(
        "score",
        help="precision/recall per threshold from judgements",
        description="Print precision, recall and F1 for each k and similarity threshold, weighted by "
        "the pairs each judged pair stands for, and recommend the setting with the best F1.",
    )
    score.add_argument("judgements", help="the judgements.jsonl downloaded from the judging page")
    score.add_argument("-o", "--output", help="also write the curves as an HTML page (SVG)")
    score.set_defaults(func=run_score)


def run_sample(args: argparse.Namespace) -> int:
    from ..report.calibrate.page import render_judge
    from ..report.calibrate.sample import add_texts, other_extractors, sample_by_similarity, sample_pairs
    from ..report.data import load_pages

    if args.pairs < 1:
        raise ValueError(f"--pairs must be at least 1, not {args.pairs}")
    extractor = extractor_from(args)
    pages, _k, notes = load_pages(args.inputs, backend=args.reader)
    notes += other_extractors(pages, extractor.description)
    if args.by == "similarity":
        pairs, sample_notes = sample_by_similarity(
            pages, args.pairs, seed=args.seed, backend=args.reader, extractor=extractor
        )
    else:
        pairs, sample_notes = sample_pairs(pages, args.pairs, seed=args.seed)
        add_texts(pairs, backend=args.reader, extractor=extractor)
    page = render_judge(
        pairs,
        sources=args.inputs,
        seed=args.seed,
        notes=notes + sample_notes,
        extractor=extractor.description,
    )
    partial = args.output + ".partial"
    with open(partial, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(partial, args.output)
    missing = sum(1 for p in pairs if p.reason)
    print(
        f"calibrate: {args.output}: {len(pairs)} pairs to judge"
        + (f" ({missing} without texts)" if missing else "")
        + f", texts by {extractor.description}",
        file=sys.stderr,
    )
    for note in notes + sample_notes:
        print(f"calibrate: {note}", file=sys.stderr)
    return 1 if any("passed over" in n for n in notes) else 0


def run_score(args: argparse.Namespace) -> int:
    from ..report.calibrate.score import (
        judged_extractors,
        read_judgements,
        recommendations,
        render_curve,
        scores,
        table,
    )

    judged, problems = read_judgements(args.judgements)
    for problem in problems:
        print(f"calibrate: {problem}", file=sys.stderr)
    if not judged:
        raise ValueError(f"{args.judgements} holds no duplicate/not judgement")
    found = scores(judged)
    print(table(found))
    duplicates = sum(j.duplicate for j in judged)
    print(f"\n{len(judged)} pairs judged, {duplicates} duplicates")
    for line in recommendations(found):
        print(line)
    for line in judged_extractors(judged):
        print(line)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(render_curve(found, len(judged), duplicates))
        print(f"curves: {args.output}", file=sys.stderr)
    return 1 if problems else 0
