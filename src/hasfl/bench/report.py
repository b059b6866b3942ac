"""The targets summary and the generated performance page (Markdown) of one or more reports.

A page is one machine class: the first report is the page's main measurement; further
reports (e.g. the same machine under ``precision: bf16``) follow as sections of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["BENCH_VERSION", "TARGETS", "check_report", "packed_paper_hours", "render_markdown", "summarize_targets",
           "write_doc"]

BENCH_VERSION = 2
TARGETS = {
    "client_vs_bare_ratio_min": 0.9,
    "cnn_p025_step_rel_max": 1 / 6,
    "server_share_max": 0.05,
    "gpu_paper_hours_max": 8.0,
    "gpu_paper_packed_hours_max": {"fp32": 8.0, "tf32": 3.0},
    "quick_wall_max_s": 600.0,
    "quick_outside_share_max": 0.15,
}


def check_report(report: Mapping[str, Any], source: str = "report") -> None:
    """Raise ValueError unless ``report`` is a report of this version of ``hasfl bench``."""
    if not isinstance(report, Mapping) or "machine" not in report:
        raise ValueError(f"{source} is not a `hasfl bench` report (no 'machine' key)")
    if report.get("bench_version") != BENCH_VERSION:
        raise ValueError(f"{source} has bench_version {report.get('bench_version')!r}, this renderer reads "
                         f"{BENCH_VERSION}; convert older reports with scripts/experiments/convert_reports.py")


def _target(what: str, goal: str, value: Any, met: bool | None, detail: str = "") -> dict[str, Any]:
    return {"what": what, "goal": goal, "value": value, "met": met, "detail": detail}


def summarize_targets(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each performance target the report's sections measure: what, goal, value, met (None: no goal here)."""
    t: dict[str, dict[str, Any]] = {}
    if "client_vs_bare" in report:
        v = report["client_vs_bare"]["min_ratio"]
        t["client_vs_bare"] = _target("client update vs a bare PyTorch loop, samples/s ratio (worst of CNN and "
                                      "LSTM at p = 1 and 0.25)", ">= 0.9", v,
                                      v is not None and v >= TARGETS["client_vs_bare_ratio_min"])
    if "width_scaling" in report:
        v = report["width_scaling"]["cnn_p025_rel"]
        t["cnn_width_scaling"] = _target("CNN local step at p = 0.25 relative to p = 1", "<= 1/6", v,
                                         v is not None and v <= TARGETS["cnn_p025_step_rel_max"])
    cap = TARGETS["server_share_max"]
    if "paper_scale" in report:
        rows = [r for d in report["paper_scale"]["datasets"].values() for r in d["methods"]]
        excl = max(r["server_share_excl_eval"] for r in rows)
        worst = max(rows, key=lambda r: r["server_share_excl_eval"] + r["eval_share"])
        incl = round(worst["server_share_excl_eval"] + worst["eval_share"], 4)
        floor = [min(r["eval_mac_share"] for r in rows), max(r["eval_mac_share"] for r in rows)]
        t["server_share_excl_eval"] = _target("server share of a paper-scale round without evaluation (worst "
                                              "method x dataset)", "<= 0.05", excl, excl <= cap)
        t["server_share_incl_eval"] = _target(
            "server share of a paper-scale round with evaluation every round (worst method x dataset)", "<= 0.05",
            incl, incl <= cap, f"evaluation's arithmetic floor there {worst['eval_mac_share']} of the round's "
                               f"MACs, {floor[0]}-{floor[1]} over methods x datasets")
    elif "server_share" in report:
        runs = report["server_share"]["runs"]
        excl = max(r["median_round"]["server_share_excl_eval"] for r in runs)
        incl = max(r["median_round"]["server_share_incl_eval"] for r in runs)
        t["server_share_excl_eval"] = _target("server share of a bench round without evaluation (worst setup)",
                                              "<= 0.05", excl, excl <= cap)
        t["server_share_incl_eval"] = _target("server share of a bench round with evaluation (worst setup)",
                                              "<= 0.05", incl, incl <= cap)
    if "paper_scale" in report:
        hours = report["paper_scale"]["job_hours_total"]
        gpu = str(report["machine"]["device"]).startswith("cuda")
        t["paper_preset_hours"] = _target(
            f"paper preset ({report['paper_scale']['jobs']} jobs) projected on this device, one job at a time, hours",
            "<= 8 on one GPU" if gpu else "none on a CPU (reported)", hours,
            hours <= TARGETS["gpu_paper_hours_max"] if gpu else None)
    packed = packed_paper_hours(report)
    if packed is not None:
        goal = TARGETS["gpu_paper_packed_hours_max"].get(str(report["precision"]))
        t["paper_preset_packed_hours"] = _target(
            f"paper preset packed on one GPU ({packed['k']} jobs at once, {packed['how']}), device-hours", "<= "
            f"{goal:g} in {report['precision']}" if goal else "none at this precision (reported)", packed["hours"],
            packed["hours"] <= goal if goal else None,
            f"one job at a time {report['paper_scale']['job_hours_total']} h / the calibrated speed-up "
            f"{packed['speedup']}")
    if "quick_preset" in report:
        e = report["quick_preset"]
        measured = e.get("status") == "measured"
        t["quick_preset_wall"] = _target("quick preset, whole DAG on 2 cores, wall seconds", "<= 600",
                                         e.get("wall_s"),
                                         e["wall_s"] <= TARGETS["quick_wall_max_s"] if measured else None,
                                         "" if measured else e.get("reason", ""))
        t["quick_preset_outside_share"] = _target(
            "quick preset, share of core-seconds outside the engine", "<= 0.15", e.get("outside_engine_share"),
            e["outside_engine_share"] <= TARGETS["quick_outside_share_max"] if measured else None)
    return t


def packed_paper_hours(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The paper preset's device-hours on one GPU packed at the calibrated K (under MPS when it was measured):
    the one-job-at-a-time projection over the calibration's speed-up of K jobs; None without both sections."""
    cal = (report.get("gpu_check") or {}).get("packing")
    if "paper_scale" not in report or not cal:
        return None
    best, how = (cal["mps"], "CUDA MPS") if cal.get("mps") else (cal["plain"], "no MPS")
    hours = round(float(report["paper_scale"]["job_hours_total"]) / float(best["speedup"]), 2)
    return {"k": best["k"], "speedup": best["speedup"], "hours": hours, "how": how}


def _table(rows: Sequence[Mapping[str, Any]], cols: Sequence[tuple[str, str]]) -> list[str]:
    """A Markdown table of ``rows`` (``cols``: key, header); None prints empty."""
    out = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join("" if r.get(k) is None else str(r.get(k)) for k, _ in cols) + " |" for r in rows]
    return [*out, ""]


def _met(v: bool | None) -> str:
    return "—" if v is None else ("yes" if v else "**no**")


def _how_measured(report: Mapping[str, Any], source: str | None) -> list[str]:
    m, b = report["machine"], report["budget"]
    gen = f"`{source}`" if source else "This report"
    text = (f"{gen}: `hasfl bench` in {report['mode']} mode, config `precision: {report['precision']}`, measured "
            f"{m['date']}. "
            f"Machine: {m['cpu_model']}, {m['usable_cores']} usable of {m['logical_cores']} logical cores; device "
            f"`{m['device']}` ({m['device_name']}); torch {m['torch_version']} with {m['torch_threads']} thread(s), as "
            f"one Snakemake job with `threads: 1` sees it; Python {m['python']}. Every number is the median of "
            f"{b['trials']} trials run in rotating order in one process, on random uint8 tensors of the paper's "
            f"shapes; load average (1/5/15 min) {m['loadavg_start']} at the start, {m.get('loadavg_end')} at the end "
            f"(a load above the core count means other work shared the machine); the bench took "
            f"{report.get('elapsed_s')} s.")
    return [text, ""] + ([f"**Note.** {report['note']}", ""] if report.get("note") else [])


def _targets_section(report: Mapping[str, Any], h: str) -> list[str]:
    """The targets table, recomputed from the report's sections by this version's :func:`summarize_targets`."""
    rows = [{"what": v["what"] + (f"; {v['detail']}" if v.get("detail") else ""), "goal": v["goal"],
             "value": v["value"], "met": _met(v["met"])} for v in summarize_targets(report).values()]
    return [f"{h} Targets", "", *_table(rows, [("what", "measured"), ("goal", "goal"), ("value", "value"),
                                               ("met", "met")])]


def _client_section(a: Mapping[str, Any], h: str) -> list[str]:
    return [f"{h} Client update vs a bare PyTorch loop", "",
            "`LocalSGD.train` against `torch.optim.SGD(momentum, weight_decay)` + `clip_grad_norm_` + "
            "cross-entropy on the same sliced module, tensors and index batches; ratio = ours / bare samples/s.", "",
            *_table(a["rows"], [("model", "model"), ("p", "p"), ("batch_size", "batch"),
                                ("ours_samples_per_s", "ours samples/s"), ("bare_samples_per_s", "bare samples/s"),
                                ("ratio", "ratio")])]


def _width_section(b: Mapping[str, Any], h: str) -> list[str]:
    rows = []
    for ds in dict.fromkeys(r["dataset"] for r in b["rows"]):
        by_p = {r["p"]: r for r in b["rows"] if r["dataset"] == ds}
        rows.append({"dataset": ds, "model": by_p[1.0]["model"], "batch": by_p[1.0]["batch_size"],
                     "ms": " / ".join(str(by_p[p]["step_ms"]) for p in sorted(by_p)),
                     "rel": " / ".join(str(by_p[p]["rel_to_full"]) for p in sorted(by_p) if p != 1.0),
                     "macs": " / ".join(str(by_p[p]["macs_rel"]) for p in sorted(by_p) if p != 1.0)})
    return [f"{h} Local step time by width", "",
            "One local step of `LocalSGD.train` at p = 0.25 / 0.5 / 0.75 / 1, and relative to p = 1 "
            "(MACs relative to p = 1 for comparison).", "",
            *_table(rows, [("dataset", "dataset"), ("model", "model"), ("batch", "batch"), ("ms", "step ms"),
                           ("rel", "time vs p = 1"), ("macs", "MACs vs p = 1")])]


def _server_section(c: Mapping[str, Any], h: str) -> list[str]:
    rows = [{"setup": r["setup"], **r["median_round"]} for r in c["runs"]]
    return [f"{h} Server share of a round", "",
            "Instrumented `run_federation` rounds (the engine's phase clock; median of the rounds after the first). "
            "The server is everything outside local SGD: slicing, aggregation, estimation (every round here), "
            "evaluation and the rest (deltas, policy, checks).", "",
            *_table(rows, [("setup", "setup"), ("round_s", "round s"), ("local_sgd_s", "local SGD s"),
                           ("slicing_s", "slicing s"), ("aggregation_s", "aggregation s"),
                           ("estimation_s", "estimation s"), ("evaluation_s", "evaluation s"),
                           ("other_server_s", "other s"), ("server_share_excl_eval", "share w/o eval"),
                           ("server_share_incl_eval", "share with eval")])]


def _rng(xs: Sequence[float]) -> str:
    return f"{min(xs)}-{max(xs)}"


def _paper_section(d: Mapping[str, Any], h: str, gpu: bool, model: bool = True) -> list[str]:
    unit = "device-hours" if gpu else "job-hours (one job per core)"
    L = [f"{h} Paper-scale projection", "",
         f"The paper preset ({d['jobs']} jobs x {d['rounds']} rounds) on this device: **{d['job_hours_total']} "
         f"{unit}** one job at a time. " + (f"Model: {d['model']}" if model else "Model as above."), ""]
    rows, by_method = [], {}
    for ds, v in d["datasets"].items():
        ms = v["methods"]
        rows.append({"dataset": ds, "hours": v["job_hours"], "round": _rng([r["round_s"] for r in ms]),
                     "train": f"{v['per_sample_train_ms']['1.0']} / {v['per_sample_train_ms']['0.25']}",
                     "eval": v["eval_ms_per_sample"], "eval_share": _rng([r["eval_share"] for r in ms]),
                     "floor": _rng([r["eval_mac_share"] for r in ms]),
                     "server": max(r["server_share_excl_eval"] for r in ms),
                     "gmac": " / ".join(str(v["gmac_per_s"][k]) for k in ("eval_p1", "train_p1", "train_p025")),
                     "check": v["model_check_fedavg_measured_over_predicted"]})
        for r in ms:
            by_method.setdefault(r["method"], {"method": r["method"]})[ds] = r["round_s"]
    L += _table(rows, [("dataset", "dataset"), ("hours", "hours"), ("round", "s/round (methods)"),
                       ("train", "train ms/sample p = 1 / 0.25"), ("eval", "eval ms/sample"),
                       ("eval_share", "eval share of round"), ("floor", "eval share of MACs"),
                       ("server", "server share w/o eval (max)"), ("gmac", "GMAC/s eval / train p = 1 / 0.25"),
                       ("check", "check")])
    L += ["Seconds per round by method:", "",
          *_table(list(by_method.values()), [("method", "method"), *((ds, ds) for ds in d["datasets"])])]
    mf = d.get("method_factors")
    if mf:
        L += [f"Step factors the projection applies (CIFAR CNN at p = 1, batch {mf['batch_size']}): "
              f"{mf['factors']} (step ms {mf['step_ms']}; {mf['note']}).", ""]
        if mf.get("ops_per_step"):
            L += ["Aten operators (kernels, i.e. not views) one local step dispatches: " + "; ".join(
                f"{k} {o['ops']:g} ({o['kernels']:g})" for k, o in mf["ops_per_step"].items()) + ".", ""]
    else:
        L += ["Step factors not measured: FedProx, SCAFFOLD and FjORD priced as plain steps.", ""]
    gemm = d.get("reference_gemm")
    L += ["Reference dense rate of the device (one n x n x n matmul), GMAC/s: "
          + (", ".join(f"{k} {v} (n = {gemm['n'][k]})" for k, v in gemm["gmac_per_s"].items()) if gemm
             else "not measured") + ". \"check\": the "
          "fedavg local SGD of the instrumented rounds over the per-sample model's prediction (about 1 when the "
          "machine's speed held still).", ""]
    return L


def _quick_section(e: Mapping[str, Any], h: str) -> list[str]:
    L = [f"{h} Quick preset", ""]
    if e.get("status") != "measured":
        return [*L, f"Not measured: {e.get('reason', e.get('status'))}.", ""]
    L += [f"Wall {e['wall_s']} s on {e['cores']} cores ({e['wall_source']}); {e['runs']} training runs, engine "
          f"seconds summed {e['engine_s_sum']}. Share of core-seconds outside the engine: "
          f"**{e['outside_engine_share']}** (outside local training: {e['outside_local_training_share']}).", ""]
    if "log" in e:
        lg = e["log"]
        L += [f"From the Snakemake log: job seconds by rule {lg['job_walls_s']}; mean time of a train job outside "
              f"the engine {lg['train_job_overhead_s_mean']} s; idle core-seconds {lg['idle_core_s']}.", ""]
    return L


def _gpu_check_section(g: Mapping[str, Any], h: str) -> list[str]:
    """What scripts/gpu-check.sh measured besides the bench sections."""
    L = [f"{h} Device check (scripts/gpu-check.sh)", ""]
    d = g.get("determinism")
    if d:
        L += [f"Determinism: a {d['rounds']}-round job (quick preset, digits, {d['method']}) run twice: "
              f"{'byte-identical' if d['twice_identical'] else 'DIFFERENT (' + ', '.join(d['differing_twice']) + ')'}"
              f"; SIGKILLed after a checkpoint and resumed: "
              f"{'byte-identical' if d['resumed_identical'] else 'DIFFERENT (' + ', '.join(d['differing_resumed']) + ')'}"
              f" ({d['files_compared']} files each). Flags the runs report: {d['determinism']}.", ""]
    else:
        L += ["Determinism: not measured.", ""]
    cal = g.get("packing")
    if cal:
        rows = []
        for label, part in (("no MPS", cal.get("plain")), ("CUDA MPS", cal.get("mps"))):
            for r in (part or {}).get("rows", []):
                rows.append({"how": label, **r, "chosen": "**K**" if r["jobs"] == part["k"] else ""})
        L += [f"Packing calibration (`python -m hasfl.bench.packing`, {cal['seconds']} s a level, the paper CIFAR-10 "
              f"CNN at p = 0.5, {cal['precision']}, deterministic {cal['deterministic']}); MPS: "
              f"{'measured' if cal.get('mps') else cal.get('mps_reason')}.", "",
              *_table(rows, [("how", "MPS"), ("jobs", "jobs at once"), ("steps_per_s_total", "steps/s total"),
                             ("steps_per_s_per_job", "steps/s per job"), ("speedup_vs_one_job", "vs one job"),
                             ("chosen", "chosen")])]
    q = g.get("quick_preset_packed")
    if q:
        L += [f"The quick preset end to end on this GPU, packed: {q.get('wall_s')} s wall for {q.get('train_jobs')} "
              f"training jobs (`{q.get('command')}`; pre-flight: {q.get('plan')}).", ""]
    b, bp = g.get("batched"), g.get("batched_packed")
    if b:
        L += [f"Batched client step (config `client_step: batched`, {b['dataset']}, {b['method']}, "
              f"{b['clients_per_round']} clients x {b['client_n']} samples a round): local training "
              f"{b['batched']['local_sgd_s_per_round']} s per round against {b['sequential']['local_sgd_s_per_round']}"
              f" s sequential (x{b['batched_speedup']}); final weights differ by at most "
              f"{b['max_abs_diff_final_weights']:.2e}"
              + (f", BN running statistics by {b['max_abs_diff_bn_statistics']:.2e}."
                 if "max_abs_diff_bn_statistics" in b else ".")
              + (f" {bp['jobs']} such jobs at once: x{bp['batched_speedup_packed']} in aggregate client-steps/s "
                 f"({bp['client_steps_per_s_total']})." if bp else " Packed: not measured."), ""]
    return L


def _body(report: Mapping[str, Any], h: str, first: Mapping[str, Any] | None = None) -> list[str]:
    L = _targets_section(report, h)
    if "client_vs_bare" in report:
        L += _client_section(report["client_vs_bare"], h)
    if "width_scaling" in report:
        L += _width_section(report["width_scaling"], h)
    if "server_share" in report:
        L += _server_section(report["server_share"], h)
    if "paper_scale" in report:
        d = report["paper_scale"]
        same = first is not None and d["model"] == first.get("paper_scale", {}).get("model")
        L += _paper_section(d, h, str(report["machine"]["device"]).startswith("cuda"), model=not same)
    if "quick_preset" in report:
        L += _quick_section(report["quick_preset"], h)
    if report.get("gpu_check"):
        L += _gpu_check_section(report["gpu_check"], h)
    return L


def render_markdown(reports: Mapping[str, Any] | Sequence[Mapping[str, Any]],
                    sources: Sequence[str | None] | None = None, command: str | None = None) -> str:
    """The page of one machine class: the first report in full, each further one as its own section
    (``sources``: the JSON files the reports came from, named in the "how measured" paragraphs;
    ``command``: the command that generates the page)."""
    from hasfl.bench import flower

    every = [reports] if isinstance(reports, Mapping) else list(reports)
    given = list(sources or [None] * len(every))

    def is_flower(r: Any) -> bool:  # a Flower comparison (hasfl.bench.flower): a section of its own, at the end
        return isinstance(r, Mapping) and r.get("kind") == flower.KIND

    extra = [(r, s) for r, s in zip(every, given, strict=True) if is_flower(r)]
    reps = [r for r in every if not is_flower(r)]
    srcs = [s for r, s in zip(every, given, strict=True) if not is_flower(r)]
    for r, s in zip(reps, srcs, strict=True):
        check_report(r, s or "report")
    first = reps[0]
    title = first.get("label") or first["machine"]["device_name"]
    gen = (f"Generated by `{command}`; measure anew with `hasfl bench --json-out JSON` on the machine and "
           "render the JSON files the same way." if command else "Generated by `hasfl bench`.")
    L = [f"# Performance: {title}", "", gen, "", *_how_measured(first, srcs[0]), *_body(first, "##")]
    for r, s in zip(reps[1:], srcs[1:], strict=True):
        heading = r.get("label") or f"precision {r['precision']}"
        L += [f"## {heading}", "", *_how_measured(r, s), *_body(r, "###", first)]
    for r, s in extra:
        L += flower.section(r, s)
    return "\n".join(L).rstrip() + "\n"


def write_doc(reports: Mapping[str, Any] | Sequence[Mapping[str, Any]], path: Path,
              sources: Sequence[str | None] | None = None, command: str | None = None) -> None:
    """Write the generated page to ``path`` (the whole file; nothing hand-written is kept)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_markdown(reports, sources, command))
