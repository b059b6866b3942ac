"""The ``hasfl`` command: run single stages outside Snakemake, inspect config and costs.

Every subcommand merges ``--config PRESET`` over the paper preset exactly as the
workflow does (``hasfl.config.load_config``) and calls the same functions as the
workflow scripts, so a job run by hand gives the same bytes as one run by Snakemake.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any
from pathlib import Path

from hasfl import __version__
from hasfl.config import PAPER_CONFIG, ConfigError, data_config, load_config, run_config
from hasfl.layout import kind_root
from hasfl.registry import DATASETS, METHODS, PRECISIONS


def _add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="PRESET", default=None,
                   help="preset YAML merged over the paper preset (default: the paper preset alone)")
    p.add_argument("--base", metavar="YAML", default=str(PAPER_CONFIG), help="base config (default: %(default)s)")


def _cmd_config(args: argparse.Namespace) -> int:
    """Print the merged, validated configuration (JSON, or YAML to use as a --configfile)."""
    config = load_config(args.config, args.base, args.set)
    if args.set and not any(item.partition("=")[0] == "name" for item in args.set):
        print(f"hasfl config: note: results would go to {config['results_dir']}/{config['name']}/, the folder of the "
              f"preset without your changes (its runs would be retrained); add --set name=... for a folder of "
              f"their own", file=sys.stderr)
    if args.yaml:
        import yaml

        print(yaml.safe_dump(config, sort_keys=False), end="")
    else:
        print(json.dumps(config, indent=2, sort_keys=True))
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    """Run the data stage for one dataset x seed into --out (never into a results folder of the workflow,
    never over a finished data stage of another identity unless --overwrite)."""
    from hasfl.data import load_dataset
    from hasfl.data.stage import run_data_stage
    from hasfl.dag.identity import data_code_digest, data_identity
    from hasfl.integrity import IntegrityError, read_manifest, refuse_results_folder
    from hasfl.logs import setup_logging

    refuse_results_folder(args.out, "--out")
    config = load_config(args.config, args.base)
    cfg = data_config(config, args.dataset)
    identity = data_identity(cfg, args.seed, data_code_digest())
    theirs = read_manifest(args.out)
    if theirs is not None and not args.overwrite and theirs.get("identity") != identity:
        differ = [k for k in ("dataset", "seed", "config", "raw", "code")
                  if (theirs.get("identity") or {}).get(k) != identity[k]]
        raise IntegrityError(f"'{args.out}' holds a finished data stage of another identity (differs in: "
                             f"{', '.join(differ)}); choose another --out, or pass --overwrite to replace it")
    setup_logging()
    bundle = load_dataset(args.dataset, cfg["data_dir"], cfg["dataset_params"], download=args.download)
    manifest = run_data_stage(bundle, cfg, args.seed, args.out, identity)
    print(json.dumps(manifest["files"], indent=2, sort_keys=True))
    return 0


def _require_results_folder(results: Path) -> None:
    """Refuse a folder that holds neither data stages nor runs (a typo, the results_dir instead of a folder in it)."""
    if not any(kind_root(results, kind).is_dir() for kind in ("data", "runs")):
        raise ConfigError(f"'{results}' is not a results folder (no data/ or runs/ in it); expected e.g. results/quick")


def _cmd_train(args: argparse.Namespace) -> int:
    """Run one training job (method x dataset x seed) into --out, as the workflow's train rule does."""
    from hasfl.dag.jobs import train_job
    from hasfl.integrity import refuse_results_folder
    from hasfl.logs import setup_logging

    refuse_results_folder(args.out, "--out")
    setup_logging(args.out / "train.log" if args.log else None)
    config = load_config(args.config, args.base)
    if args.threads is not None:
        config["threads_per_job"] = args.threads
    summary = train_job(run_config(config, args.dataset, args.method, args.seed), data_config(config, args.dataset),
                        args.out, data_dir=args.data, hasfl_run=args.hasfl_run,
                        checkpoint_every=int(config["execution"]["checkpoint_every"]), overwrite=args.overwrite)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0 if summary["status"] == "completed" else 3


def _cmd_verify(args: argparse.Namespace) -> int:
    """Check every manifest under a results folder (sha256 of every result file), and the analysis
    outputs against the analysis manifest when the analysis has finished."""
    from hasfl.analysis.manifest import ANALYSIS_MANIFEST, verify_analysis
    from hasfl.integrity import IntegrityError, verify_results

    _require_results_folder(args.results)
    counts = verify_results(args.results)
    evals = f", {counts['evals']} run evaluations" if "evals" in counts else ""
    print(f"hasfl verify: {args.results}: {counts['data']} data-stage and {counts['runs']} run folders{evals} match "
          f"their manifests ({counts['unfinished']} unfinished folders without a manifest)")
    from hasfl.dag.identity import Checkout, checkout_root
    from hasfl.dag.outputs import audit
    from hasfl.dag.status import link_problems

    found = audit(None, args.results)
    scope = "the sha256 chain data stage -> run -> budget run, each linked store entry's key"
    if args.config is not None or args.set:
        # every code digest from one checkout, as the DAG's (its Snakefile's folder): the clone the installed package
        # came from; a wheel install comes from none and is refused (it would hash nothing, a constant)
        from hasfl.dag import preflight
        from hasfl.dag.outputs import cpu_class, keyed_config
        from hasfl.dag.status import status

        code = Checkout(checkout_root())
        config = load_config(args.config, args.base, args.set)
        here = cpu_class() if preflight.device_of(config, preflight.hardware()) == "cpu" else None
        # keyed as the Snakefile's session keys a build here (what changes no byte on this device class)
        preset = status(keyed_config(config, here), args.results, code, device_class=here)
        found.errors += [e for e in preset.foreign if e not in found.errors]
        found.rerun = {**found.rerun, **preset.rerun}
        scope += f", and what preset '{config['name']}' would make (config slices, raw files, code, the analysis)"
        counts = preset.counts()
        print(f"hasfl verify: {args.results}: preset '{config['name']}': {counts['current']} data-stage and run "
              f"folders current, {counts['rerun']} to rerun, {counts['in store']} in the run store (linked by a "
              f"build), {counts['missing']} missing, {counts['foreign']} holding another job's output; "
              f"{counts['evaluations here']} run evaluations current, {counts['evaluations rerun']} runs' "
              "evaluations to rerun")
    else:
        scope += " (give --config PRESET to compare with what a preset would make)"
    # every folder's link, of any preset (a preset's walk named its own folders' already)
    found.errors += [e for e in link_problems(args.results) if e not in found.errors]
    if found.errors or found.rerun:
        lines = found.errors + found.lines()
        raise IntegrityError(f"{args.results}: {len(lines)} finished folders fail the identity check ({scope}):\n  - "
                             + "\n  - ".join(lines) + "\n(a folder holding another job's result the DAG refuses; "
                             "the others it reruns)")
    print(f"hasfl verify: {args.results}: identities consistent: {scope}")
    if (args.results / ANALYSIS_MANIFEST).is_file():
        analysis = verify_analysis(args.results)
        print(f"hasfl verify: {args.results}: {len(analysis['files'])} analysis files match {ANALYSIS_MANIFEST}, "
              f"computed from {len(analysis['runs'])} runs that are unchanged")
    else:
        print(f"hasfl verify: {args.results}: no {ANALYSIS_MANIFEST} (the analysis has not finished)")
    return 0


def _cmd_gc(args: argparse.Namespace) -> int:
    """The run store's entries that no results folder links to: listed, removed with --delete."""
    from hasfl.dag.gc import collect
    from hasfl.dag.store import STORE

    if not (args.results_dir / STORE).is_dir():
        raise ConfigError(f"'{args.results_dir}' has no run store ({STORE}/); expected a results_dir such as results")
    found = collect(args.results_dir, delete=args.delete, partial=args.partial)
    verb = "removed" if args.delete else "would remove"
    root = args.results_dir.resolve()
    for entry in found.unreferenced:
        if entry not in found.busy:
            print(f"  {entry.relative_to(root)}")
    for entry in found.busy:
        print(f"  {entry.relative_to(root)}: kept (a job held or linked it while gc ran)")
    for entry in found.partial:
        state = ("removed" if args.delete and args.partial and entry not in found.busy
                 else "kept (a killed job's checkpoint: its rerun resumes from it; --delete --partial removes it)")
        print(f"  {entry.relative_to(root)}: {state}")
    for what in found.unreadable:
        print(f"hasfl gc: warning: {what}: the entries linked from there are listed as unused; --delete refuses "
              "until it can be read", file=sys.stderr)
    removed = [e for e in found.unreferenced if e not in found.busy]
    print(f"hasfl gc: {len(found.folders)} results folders link {found.referenced} store entries; {verb} "
          f"{len(removed)} that none links ({found.bytes / 2**20:.1f} MiB)"
          + ("" if args.delete else "; --delete removes them"))
    return 0


def _cmd_adopt(args: argparse.Namespace) -> int:
    """Move a results folder written before the run store into it (links in place, times kept)."""
    from hasfl.dag.store import adopt, store_of
    from hasfl.integrity import ResultsLock, verify_results

    _require_results_folder(args.results)
    lock = ResultsLock(args.results)
    lock.acquire()  # not while a DAG writes it
    try:
        verify_results(args.results)
        counts = adopt(args.results)
    finally:
        lock.release()
    print(f"hasfl adopt: {args.results}: {counts['data']} data stages and {counts['runs']} runs moved into "
          f"{store_of(args.results)} (links in place, file times kept: nothing reruns); {counts['left']} runs left "
          "as they are (not trained on the data stage beside them: the DAG reruns them)")
    return 0


def _cmd_diagnose(args: argparse.Namespace) -> int:
    """Capacity-grouped check of a per-client estimate from any framework's logs."""
    from hasfl.analysis.diagnose import as_json, diagnose, join_clients, per_client, plot, read_table, render

    df = read_table(args.table)
    for other in args.join:
        df = join_clients(df, read_table(other), str(other))
    df = per_client(df, args.per_client)
    d = diagnose(df, args.estimate, args.capacity, args.truth, args.group, alpha=args.alpha,
                 permutations=args.permutations, seed=args.seed)
    if args.json:
        print(json.dumps(as_json(d, {"estimate": args.estimate, "capacity": args.capacity, "truth": args.truth,
                                     "group": args.group}), indent=2))
    else:
        print(render(d, args.estimate, args.capacity, args.truth))
    if args.plot is not None:
        plot(df, args.estimate, args.capacity, args.truth, args.plot, title=f"{d.verdict}: {args.table.name}")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    """Runs, tables and findings of two results folders side by side; every run's files are first checked
    against its manifest, and a run that fails makes the command exit non-zero (after the report)."""
    from hasfl.analysis.compare import compare, plot, render, verification_error

    if len(args.folders) < 2:
        raise ConfigError("hasfl compare: give two results folders (or more, with --metric, for a sweep)")
    if len(args.folders) > 2 or args.metric is not None:
        from hasfl.analysis import sweep

        swept = sweep.sweep(args.folders, args.metric or "final_acc_pct")
        if args.plot is not None:
            swept["plotted"] = sweep.plot(swept, args.plot)
        print(json.dumps(swept, indent=2, default=str) if args.json else sweep.render(swept))
        return 0
    args.a, args.b = args.folders
    result = compare(args.a, args.b)
    if args.plot is not None:
        result["plotted"] = plot(result, args.plot)
    print(json.dumps(result, indent=2) if args.json else render(result))
    error = verification_error(result)
    if error is not None:
        sys.stdout.flush()
        raise error
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    """One command over a config key's values: each value's variant built by the preset's DAG in turn (sharing the
    run store), then the points compared (hasfl.sweep_run, hasfl.analysis.sweep)."""
    from hasfl import sweep_run

    root = args.directory.resolve()
    points = sweep_run.run(args.spec, args.configfile, root, args.cores, dry_run=args.dry_run)
    if args.dry_run:
        return 0
    from hasfl.analysis import sweep

    results = root / points[0].config["results_dir"]
    swept = sweep.sweep([results / p.name for p in points], args.metric)
    if args.plot is not None:
        swept["plotted"] = sweep.plot(swept, args.plot)
    print(sweep.render(swept))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    """A finished results folder as TensorBoard event files, or as a Workflow Run RO-Crate."""
    if args.format == "rocrate":
        from hasfl.crate import export_rocrate

        if args.out is None:
            raise ConfigError("hasfl export rocrate: give the crate's folder, --out DIR (outside the results folder)")
        import warnings

        from hasfl.crate import CrateWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CrateWarning)
            crate = export_rocrate(args.results, args.out, args.configfile, allow_other_code=args.allow_other_code)
        for w in caught:  # a dirty checkout: the files named, once, without a source line
            if issubclass(w.category, CrateWarning):
                print(f"hasfl export: warning: {w.message}", file=sys.stderr)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        print(f"hasfl export: RO-Crate {crate.out}: {crate.files} result files ({crate.bytes / 2**20:.1f} MiB, "
              f"{crate.runs} runs) and {crate.workflow_files} workflow files, checked against their manifests; "
              f"metadata in {crate.out / 'ro-crate-metadata.json'}")
        return 0
    from hasfl.export import export_tensorboard

    if args.configfile or args.allow_other_code:
        raise ConfigError("hasfl export tensorboard: --configfile and --allow-other-code are for rocrate only")
    written = export_tensorboard(args.results, args.out)
    out = args.out if args.out is not None else args.results / "tensorboard"
    print(f"hasfl export: {len(written)} runs, {sum(written.values())} scalars under {out} "
          f"(tensorboard --logdir {out})")
    return 0


def _cmd_results_page(args: argparse.Namespace) -> int:
    """A compact results page of a finished preset (docs/results/<name>.md)."""
    from hasfl.analysis.results_page import write_results_page
    from hasfl.integrity import refuse_results_folder

    if args.out.suffix != ".md":
        raise ConfigError(f"results page '{args.out}': expected a Markdown file name ending in .md")
    refuse_results_folder(args.out, "results page")
    refuse_results_folder(args.out.parent / args.out.stem, "results page's figure folder")
    from hasfl.dag.identity import analysis_code_digest, checkout_root

    out = write_results_page(args.results, args.out, notes_path=args.notes, configfiles=args.configfile,
                             analysis_code=analysis_code_digest(checkout_root()), overlays=args.overlay or ())
    print(f"hasfl results-page: wrote {out} and its figures under {out.parent / out.stem}/")
    return 0


def _cmd_preregistration(args: argparse.Namespace) -> int:
    """docs/preregistration.md from git: print it, rewrite it (--write) or check it (--check)."""
    from hasfl import prereg

    root = Path(__file__).resolve().parents[2] if args.root is None else args.root
    if args.check:
        problems = prereg.check(root)
        for line in problems:
            print(line, file=sys.stderr)
        print(f"hasfl preregistration: {root / prereg.RECORD} "
              + ("matches git" if not problems else f"differs from git in {len(problems)} line(s)"))
        return 1 if problems else 0
    text = prereg.render(prereg.entries(root), root)
    if args.write:
        (root / prereg.RECORD).write_text(text)
        print(f"hasfl preregistration: wrote {root / prereg.RECORD}")
    else:
        print(text, end="")
    return 0


def _cmd_cost(args: argparse.Namespace) -> int:
    """Print per-width params, MACs/sample and upload MB of the paper's models (Table 1)."""
    from hasfl.models.cost import table1

    rows = table1()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'model':<18} {'p':>5} {'params (M)':>11} {'MACs (M)':>10} {'upload (MB)':>12}")
    for r in rows:
        print(f"{r['model']:<18} {r['p']:>5.2f} {r['params'] / 1e6:>11.2f} {r['macs'] / 1e6:>10.1f} {r['upload_mb']:>12.2f}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    """Benchmark the engine: the report as JSON on stdout (and --json-out); the page only with --doc."""
    _check_bench_args(args)
    if args.from_json:
        from hasfl.bench import render_markdown, write_doc

        reports = []
        for path in args.from_json:
            try:
                reports.append(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"--from-json {path}: cannot read a JSON report ({exc})") from exc
        sources = [str(p) for p in args.from_json]
        command = f"hasfl bench --from-json {' '.join(sources)} --doc {args.doc}" if args.doc else None
        if args.doc is None:
            print(render_markdown(reports, sources), end="")
        else:
            write_doc(reports, args.doc, sources, command)
            print(f"hasfl bench: wrote {args.doc}", file=sys.stderr)
        return 0

    from dataclasses import replace

    from hasfl.bench import FULL, QUICK, run_bench, write_doc

    budget = QUICK if args.quick else FULL
    overrides = {"trials": args.trials, "batch_size": args.batch_size, "fed_client_n": args.fed_client_n,
                 "fed_rounds": args.fed_rounds, "eval_n": args.eval_n, "min_trial_s": args.min_trial_s}
    if args.batch_size is not None:  # every local step, the method step-factor trials too
        overrides["factor_batch"] = args.batch_size
    budget = replace(budget, **{k: v for k, v in overrides.items() if v is not None})
    report = run_bench(budget, device=args.device, threads=args.threads, sections=args.sections,
                       precision=args.precision, run_quick=args.run_quick, quick_wall_s=args.quick_wall_s,
                       quick_results=args.quick_results, cores=args.cores, label=args.label,
                       log=lambda s: print(f"hasfl bench: {s}", file=sys.stderr, flush=True))
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(text + "\n")
    if args.doc is not None:
        write_doc(report, args.doc, [str(args.json_out) if args.json_out else None])
        print(f"hasfl bench: wrote {args.doc}", file=sys.stderr)
    return 0


def _check_bench_args(args: argparse.Namespace) -> None:
    """Combinations of ``hasfl bench`` options that cannot mean anything (ValueError, exit status 2)."""
    if args.from_json:
        measuring = [f"--{k.replace('_', '-')}" for k in ("quick", "run_quick", "json_out") if getattr(args, k)]
        if measuring:
            raise ValueError(f"--from-json renders saved reports and measures nothing; drop {', '.join(measuring)}")
    if args.run_quick and args.quick_wall_s is not None:
        raise ValueError("--run-quick times a fresh quick-preset run; --quick-wall-s gives the wall of a finished "
                         "one: use one of them")
    if (args.run_quick or args.quick_wall_s is not None) and "quick-preset" not in args.sections:
        raise ValueError("--run-quick / --quick-wall-s belong to the quick-preset section, which --sections leaves out")
    if args.min_trial_s is not None and args.min_trial_s < 0:
        raise ValueError(f"--min-trial-s must be >= 0, got {args.min_trial_s}")


def _bench_sections(text: str) -> tuple[str, ...]:
    """``--sections``: a comma list of section names."""
    from hasfl.bench import SECTIONS

    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in names if s not in SECTIONS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown section(s) {', '.join(bad) or '(none given)'}; "
                                         f"choose from {','.join(SECTIONS)}")
    return names


def _positive(kind: type) -> Any:
    """An argparse type: a number > 0 (``int`` or ``float``)."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a{'n integer' if kind is int else ' number'}, got {text!r}")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``hasfl`` command."""
    parser = argparse.ArgumentParser(
        prog="hasfl",
        description="HAS-FL reproducibility pipeline (the full DAG runs with `snakemake all`; "
                    "these subcommands run single stages by hand).")
    parser.add_argument("--version", action="version", version=f"hasfl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("config", help="print the merged, validated configuration (with --set: a preset to run)",
                       description="Print the merged, validated configuration. To change any nested key for a run: "
                                   "hasfl config --config presets/quick.yaml --set method_params.fedprox.mu=0.5 "
                                   "--set name=quick-mu05 --yaml > my.yaml; snakemake --cores 2 all --configfile my.yaml")
    _add_config_arg(p)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a (nested, dotted) key; the value is read as YAML; repeatable")
    p.add_argument("--yaml", action="store_true", help="print YAML (a file for snakemake --configfile)")
    p.set_defaults(func=_cmd_config)

    p = sub.add_parser("data", help="run the data stage (partition, capacities, TV) for one dataset x seed")
    _add_config_arg(p)
    p.add_argument("--dataset", required=True, choices=DATASETS)
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--download", action="store_true", help="download CIFAR-10/EMNIST if missing")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a finished data stage of another identity in --out")
    p.set_defaults(func=_cmd_data)

    p = sub.add_parser("train", help="run one training job (method x dataset x seed)")
    _add_config_arg(p)
    p.add_argument("--dataset", required=True, choices=DATASETS)
    p.add_argument("--method", required=True, choices=METHODS)
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--out", required=True, type=Path, help="run folder (rounds.parquet, clients.parquet, ...)")
    p.add_argument("--data", type=Path, default=None,
                   help="data-stage folder with partition.parquet/clients.parquet (default: rebuilt in memory)")
    p.add_argument("--hasfl-run", type=Path, default=None,
                   help="run.json of the hasfl run with the same dataset and seed (random_budget only)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: the config's threads_per_job, as in the DAG; the thread count "
                        "changes floating-point rounding, so the run's bytes)")
    p.add_argument("--log", action="store_true", help="also log to OUT/train.log")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a finished run of another configuration in --out (refused otherwise)")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("verify", help="check every data-stage and run folder of a results folder against its manifest")
    p.add_argument("results", type=Path, help="a preset's results folder, e.g. results/quick")
    _add_config_arg(p)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="with --config: a dotted.key=value override, as for `hasfl config`")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("gc", help="list the run store's entries that no results folder links to (--delete: remove)")
    p.add_argument("results_dir", type=Path, nargs="?", default=Path("results"),
                   help="the results_dir holding .store/ and the preset folders (default: %(default)s)")
    p.add_argument("--delete", action="store_true", help="remove them (default: only list them)")
    p.add_argument("--partial", action="store_true",
                   help="with --delete, also remove the unfinished .partial folders of killed jobs (their checkpoints)")
    p.set_defaults(func=_cmd_gc)

    p = sub.add_parser("adopt", help="move a results folder written before the run store into it (nothing reruns)")
    p.add_argument("results", type=Path, help="a preset's results folder, e.g. results/quick")
    p.set_defaults(func=_cmd_adopt)

    p = sub.add_parser("diagnose", help="is a per-client heterogeneity estimate capacity or data? (any framework's "
                                        "table; Section 5's capacity-grouped check)")
    p.add_argument("table", type=Path, help="CSV or Parquet table, one row per client, or a per-round ledger (several "
                                            "rows per client_id, e.g. a run's participation.parquet: see --per-client)")
    p.add_argument("--join", type=Path, action="append", default=[], metavar="TABLE",
                   help="add the columns of a per-client table matched on client_id (e.g. the run's or the data "
                        "stage's clients.parquet for pmax and tv); repeatable")
    p.add_argument("--per-client", choices=("last", "mean"), default="last",
                   help="a ledger's rows per client: its last round's (default) or the mean over its rounds")
    p.add_argument("--estimate", required=True, help="column of the heterogeneity estimate")
    p.add_argument("--capacity", required=True, help="column of the client's capacity (e.g. pmax)")
    p.add_argument("--truth", default=None, help="column of the ground truth (e.g. TV of the label distribution)")
    p.add_argument("--group", default=None, help="column of capacity groups (default: the distinct capacities)")
    p.add_argument("--alpha", type=float, default=0.05, help="level of the tests (default: %(default)s)")
    p.add_argument("--permutations", type=int, default=2000, help="within-group permutations (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutations (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", type=Path, default=None, metavar="PNG", help="also plot estimate vs truth by group")
    p.set_defaults(func=_cmd_diagnose)

    p = sub.add_parser("compare", help="what differs between two results folders: runs (identity, bytes), table "
                                       "cells, verdicts; with more folders (or --metric), a sweep: one row per folder")
    p.add_argument("folders", type=Path, nargs="+",
                   help="results folders: A and B (e.g. results/quick results/quick-mu05), or the points of a sweep")
    p.add_argument("--metric", default=None, metavar="COLUMN",
                   help="a sweep's metric, a column of the per-seed tables (default final_acc_pct): mean +- sd per "
                        "point and (dataset, method)")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.add_argument("--plot", type=Path, default=None, metavar="PNG",
                   help="also overlay the accuracy curves of the methods whose runs differ (A solid, B dashed); for a "
                        "sweep, the metric against the swept value")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("sweep", help="one command over a config key's values: each value's variant folder built by "
                                     "the preset's DAG in turn (one run store: shared runs trained once), then compared")
    p.add_argument("spec", help="KEY=V1,V2[,...], e.g. method_params.fedprox.mu=0.01,0.1,1.0")
    p.add_argument("--configfile", nargs="+", required=True, help="the preset's config files, as given to snakemake")
    p.add_argument("--cores", type=int, default=2, help="snakemake --cores for each point (default 2)")
    p.add_argument("--dry-run", action="store_true", help="write the points' config files and plan each (snakemake -n)")
    p.add_argument("--metric", default="final_acc_pct", help="the comparison's metric (a per-seed table column)")
    p.add_argument("--plot", type=Path, default=None, metavar="PNG", help="the metric against the swept value")
    p.add_argument("--directory", type=Path, default=Path("."), help="the workflow's folder (default: here)")
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser("export", help="a finished results folder for an experiment tracker (TensorBoard) or as a "
                                      "Workflow Run RO-Crate (WorkflowHub, Zenodo)")
    p.add_argument("format", choices=("tensorboard", "rocrate"), help="what to write")
    p.add_argument("results", type=Path, help="the results folder, e.g. results/quick")
    p.add_argument("--out", type=Path, default=None,
                   help="where (tensorboard: default <results>/tensorboard; rocrate: a folder outside the results "
                        "folder, required)")
    p.add_argument("--configfile", nargs="+", default=None,
                   help="rocrate: the config files that made the results folder, as given to snakemake (default "
                        "presets/<name>.yaml); checked against the config slice each run's manifest records")
    p.add_argument("--allow-other-code", action="store_true",
                   help="rocrate: ship this checkout's workflow even where the runs, data stages or analysis record "
                        "other code digests (refused otherwise); the metadata says it is not their code")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("results-page", help="a compact page of a finished preset's findings, tables and figures")
    p.add_argument("results", type=Path, help="the preset's results folder, e.g. results/medium")
    p.add_argument("out", type=Path, help="the page to write, e.g. docs/results/medium.md")
    p.add_argument("--notes", type=Path, default=None,
                   help="a Markdown file of notes to put under the title; its numbers and verdicts are references into "
                        "findings.json, e.g. {F1c.verdict}, {F4.fashion_mnist.estimate:.1f} (docs/decisions.md, "
                        "'Results pages from data')")
    p.add_argument("--configfile", nargs="+", default=None,
                   help="the config files that made the results folder, as given to snakemake (default "
                        "presets/<name>.yaml): the page states the command that reproduces it")
    p.add_argument("--overlay", nargs="+", type=Path, default=None,
                   help="results folders made with one more config file on top of these (presets/<folder name>.yaml, "
                        "e.g. results/medium-coverage-long): a section each with the findings it ran")
    p.set_defaults(func=_cmd_results_page)

    p = sub.add_parser("preregistration", help="the pre-registration record (docs/preregistration.md) from git: every "
                                               "rule value with the commit that fixed it")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="rewrite docs/preregistration.md")
    g.add_argument("--check", action="store_true", help="exit 1 when docs/preregistration.md differs from git")
    p.add_argument("--root", type=Path, default=None, help="the repository (default: this checkout)")
    p.set_defaults(func=_cmd_preregistration)

    p = sub.add_parser("cost", help="per-width cost of the paper's models (Table 1)")
    p.add_argument("--json", action="store_true", help="print JSON rows")
    p.set_defaults(func=_cmd_cost)

    p = sub.add_parser("bench", help="benchmark the engine: JSON report on stdout, a page with --doc",
                       description="Measure where the time of a federation goes (sections: client = client update "
                                   "vs a bare PyTorch loop; width = local step time by width; server = server share "
                                   "of a round; paper-scale = seconds per round and job-hours of the paper preset "
                                   "on this device; quick-preset = wall time of a finished quick-preset run). "
                                   "Writes a page only when --doc is given.")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: every section at small budgets (under 2 minutes on 2 cores)")
    p.add_argument("--sections", type=_bench_sections, default=("client", "width", "server", "paper-scale",
                                                                 "quick-preset"),
                   help="comma list of client,width,server,paper-scale,quick-preset (default: all)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="(default: %(default)s)")
    p.add_argument("--threads", type=_positive(int), default=1,
                   help="torch threads, as one Snakemake job sees (default: %(default)s)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="config key precision for every measurement (default: %(default)s)")
    p.add_argument("--trials", type=_positive(int), default=None, help="trials per number (medians)")
    p.add_argument("--min-trial-s", type=float, default=None, help="seconds per trial to aim for (0: one step)")
    p.add_argument("--batch-size", type=_positive(int), default=None,
                   help="override the preset batch size of every local step")
    p.add_argument("--fed-client-n", type=_positive(int), default=None,
                   help="samples per client in the synthetic federations")
    p.add_argument("--fed-rounds", type=_positive(int), default=None, help="rounds per instrumented federation")
    p.add_argument("--eval-n", type=_positive(int), default=None, help="test samples for the evaluation throughput")
    p.add_argument("--run-quick", action="store_true",
                   help="quick-preset section: run the quick preset's DAG in a scratch folder and time it")
    p.add_argument("--quick-wall-s", type=_positive(float), default=None,
                   help="quick-preset section: wall seconds of a finished quick run (default: from its Snakemake log)")
    p.add_argument("--quick-results", type=Path, default=None,
                   help="quick-preset section: results folder of the run (default: <repo>/results/quick)")
    p.add_argument("--cores", type=_positive(int), default=2,
                   help="quick-preset section: Snakemake --cores of the run (default: %(default)s)")
    p.add_argument("--label", default="", help="the machine class, the title of the page (e.g. '2-core CPU')")
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON report here")
    p.add_argument("--doc", type=Path, default=None, metavar="PATH",
                   help="write the Markdown page here (nothing is written without it)")
    p.add_argument("--from-json", type=Path, nargs="+", default=None, metavar="JSON",
                   help="measure nothing: render saved reports (the first, then the others as sections of the "
                        "same page, e.g. the same machine under bf16) to --doc, or to stdout")
    p.set_defaults(func=_cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hasfl`` console script."""
    args = build_parser().parse_args(argv)
    from hasfl.errors import HasflError

    try:
        return int(args.func(args))
    except (HasflError, ValueError) as exc:
        print(f"hasfl: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a folder that cannot be written: one line naming the path, no traceback
        where = f"'{exc.filename}'" + (f" -> '{exc.filename2}'" if exc.filename2 else "") if exc.filename else ""
        print(f"hasfl: error: {where}{': ' if where else ''}{exc.strerror or exc}; nothing was left half-written "
              "(outputs are written beside their place and renamed in): free space or fix the folder and run the "
              "same command again", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
