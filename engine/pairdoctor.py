"""The pairing doctor: can this drafter draft for this target, and would it pay on this box?

Each compatibility rule and whether it holds, what the architectures mean for a rollback,
the memory the pair needs, an acceptance probe (greedy replies at depth 3 on the user's own
recent prompts or the built-in ones, within a time budget), the speed the box profile
predicts against plain decoding, and a better pair from the catalog where there is one.
`draftlight pair` prints it; the app's pairing panel shows it.

An MLX pair is read from its folders' headers (engine.pairmlx) and probed on MLX. Where a GGUF
target has an MLX conversion, the probe also times the pair on both runtimes and says which is
faster here (engine.runtimecompare).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from engine.drafting import kinds
from engine.measure.costmodel import BoxProfile, best_depth, conditional_acceptance, speculation_pays, why_plain
from engine.measure.profile import drafting_free, load_profile, saved_rows
from engine.models import catalog
from engine.models.compat import Rule, Verdict
from engine.models.discover import discover, drafter_kind
from engine.models.facts import gguf_facts, mlx_facts
from engine.models.naming import model_title
from engine.models.pairing import (
    Memory,
    ModelShapes,
    drafter_architecture,
    memory_needed,
    model_shapes,
    mtp_rule,
    suggest,
    target_architecture,
)
from engine.models.rules import made_for_rule
from engine.models.vocabulary import loaded_vocabulary, vocabulary_rules
from engine.pairmlx import mlx_rules, mlx_shapes, read_folder
from engine.pairprobe import (
    PROBE_DEPTH,
    PROBE_PROMPTS,
    PROBE_SECONDS,
    PROBE_TOKENS,
    Probe,
    ProbeProgress,
    built_in_prompts,
    run_probe,
)
from engine.runtime import Model, RuntimeOptions
from engine.runtime.formats import LLAMA, runtime_name
from engine.runtime.loading import AUTO, chosen_runtime, run_options
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME
from engine.runtime.runtimes import Runtime
from engine.runtimecompare import COMPARE_TOKENS, compare_runtimes


@dataclass(frozen=True)
class Prediction:
    sentence: str
    depth: int | None = None
    tps: float | None = None
    plain_tps: float | None = None
    profile_basis: str = ""  # the box profile's plain speed, spread and age: "plain 31.2 tok/s ±3%, measured today"

    @property
    def speedup(self) -> float | None:
        return self.tps / self.plain_tps if self.tps and self.plain_tps else None


@dataclass(frozen=True)
class PairReport:
    target: ModelShapes
    drafter: ModelShapes | None
    drafter_spec: str  # as given: "default", a catalog key, a path, "mtp", "ngram", "auto", "none"
    drafter_kind: str
    rules: tuple[Rule, ...]
    architecture: tuple[str, ...]
    memory: Memory
    prediction: Prediction
    suggestion: str
    options: RuntimeOptions
    probe: Probe | None = None
    found: str = ""  # with drafter auto: what was found, in a sentence
    runtime: str = LLAMA  # the runtime the pair runs on: "llama" or "mlx"
    runtimes: str = ""  # with the probe: which runtime runs the pair faster here, measured, or why not

    @property
    def compatible(self) -> bool:
        return self.drafter_kind != kinds.NONE.name and all(rule.holds for rule in self.rules)

    @property
    def verdict(self) -> str:
        if self.drafter_kind == kinds.NONE.name:
            return "No drafter chosen: nothing to check."
        if self.compatible:
            return "The drafter can draft for this target."
        return f"The drafter cannot draft for this target: {sum(not r.holds for r in self.rules)} rule(s) fail."

    @property
    def refusal(self) -> str:
        """Why the drafter cannot draft for this target, in the one sentence `chat` and the app refuse it with."""
        return Verdict(False, tuple(reason for rule in self.rules for reason in rule.reasons)[:4]).explain()

    def lines(self, marks: tuple[str, str] = ("✓", "✗")) -> list[str]:
        """The report as a doctor writes it: a line per rule with its mark, then the rest."""
        drafter = self.drafter.name if self.drafter else self.drafter_kind
        pairing = f"Pairing: {self.target.name} + {drafter} on {runtime_name(self.runtime)}"
        out = [pairing, *([self.found] if self.found else []), self.verdict]
        out += [f"  {marks[0] if r.holds else marks[1]} {r.name}: {r.sentence}" for r in self.rules]
        out += ["Architecture:", *(f"  {line}" for line in self.architecture)]
        out += [f"Memory: {self.memory.sentence()}"]
        if self.probe is None:
            out += ["Probe: not run (`draftlight pair` without --no-probe runs it)."]
        else:
            out += [f"Probe: {self.probe.summary()}"]
            for p in self.probe.prompts:
                rate = f"{p.acceptance:4.0%}" if p.acceptance is not None else "   -"
                cut = ", cut short" if p.cut_short else ""
                out += [f"  {p.name:14} {rate} ({p.accepted} of {p.drafted} drafts, {p.tokens} tokens{cut})"]
        out += [f"Prediction: {self.prediction.sentence}"]
        if self.prediction.profile_basis:
            out += [f"  from a box profile with {self.prediction.profile_basis}"]
        out += [f"Runtimes: {self.runtimes}"] if self.runtimes else []
        out += [f"Suggestion: {self.suggestion or 'none: no catalog pair is better for this target.'}"]
        return out

    def to_json(self) -> dict:
        data = asdict(self)
        del data["options"]
        data.update(
            compatible=self.compatible,
            verdict=self.verdict,
            memory=dict(data["memory"], total=self.memory.total, sentence=self.memory.sentence()),
        )
        data["prediction"]["speedup"] = self.prediction.speedup
        if self.probe is not None:
            data["probe"].update(
                drafted=self.probe.drafted,
                accepted=self.probe.accepted,
                acceptance=self.probe.acceptance,
                summary=self.probe.summary(),
            )
            for entry, p in zip(data["probe"]["prompts"], self.probe.prompts, strict=True):
                entry["acceptance"] = p.acceptance
        return data


def pair_report(
    target: str | Path = "default",
    drafter: str | Path = "default",
    options: RuntimeOptions | None = None,
    prompts: Sequence[tuple[str, str]] | None = None,
    probe_seconds: float = PROBE_SECONDS,
    max_tokens: int = PROBE_TOKENS,
    max_prompts: int = PROBE_PROMPTS,
    progress: ProbeProgress | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    download: bool = True,
    runtime: str = AUTO,
) -> PairReport:
    """The whole report; `probe_seconds` 0 leaves the probe out. `prompts`: (name, text) pairs, the
    user's recent ones; None for the built-in prompts. Bad input raises DraftlightError with a sentence."""
    options = options or RuntimeOptions()
    target_path = catalog.resolve(catalog.DEFAULT_TARGET if str(target) == "default" else target, None, download)
    spec, found = str(drafter), ""
    if spec == "default" and MLX_RUNTIME.owns(target_path):
        spec = kinds.NONE.name  # the default draft model is a GGUF file: an MLX folder loads alone (Engine.load)
    if spec == kinds.AUTO_SPEC:
        discovery = discover(target_path)
        spec, found = discovery.spec or kinds.NONE.name, discovery.said
    keyword = spec in kinds.KEYWORDS
    drafter_path = (
        None if keyword else catalog.resolve(catalog.DEFAULT_DRAFTER if spec == "default" else spec, None, download)
    )
    chosen = chosen_runtime(target_path, runtime)
    kind = drafter_kind(target_path, drafter_path or spec)
    read = _mlx_checks if MLX_RUNTIME.owns(target_path) else _gguf_checks
    target_facts, drafter_facts, checks = read(target_path, drafter_path, kind)
    profile = _profile(target_path, drafter_path, kind, options, chosen)
    architecture = [target_architecture(target_facts), drafter_architecture(drafter_facts, kind)]
    if target_facts.state_kind and profile is not None and profile.rollback_s > 0:
        share = profile.rollback_s / profile.target_rows_s[0]
        architecture.append(
            f"Undoing a rejected draft costs {profile.rollback_s * 1e3:.2f} ms on this box, {share:.1%} of a target pass."
        )
    elif target_facts.state_kind:
        architecture.append("`draftlight tune` times what undoing a rejected draft costs on this box.")
    report = PairReport(
        target=target_facts,
        drafter=drafter_facts,
        drafter_spec=str(drafter),
        drafter_kind=kind,
        rules=checks,
        architecture=tuple(architecture),
        memory=memory_needed(target_facts, drafter_facts, options.n_ctx, chosen.kv_type(options), chosen),
        prediction=predict_speed(
            profile, None, target_path, drafter_path or spec, kind, all(rule.holds for rule in checks)
        ),
        suggestion="",
        options=options,
        found=found,
        runtime=chosen.name,
    )
    report = replace(
        report,
        suggestion=suggest(
            target_path, spec, report.drafter.path if report.drafter is not None else None, report.compatible
        ),
    )
    if probe_seconds > 0:
        report = probe_pair(report, prompts, probe_seconds, max_tokens, max_prompts, progress, cancelled)
    return report


def _facts(path: Path) -> tuple[Model, ModelShapes]:
    model = Model(path, vocab_only=True)
    facts = gguf_facts(model.info)
    return model, model_shapes(facts, model.state_kind, model_title(facts.path, facts.quantization))


def _gguf_checks(target_path: Path, drafter_path: Path | None, kind: str):
    """(target facts, drafter facts, rules) from GGUF headers, through llama.cpp's vocabulary loader."""
    target_model, target_facts = _facts(target_path)
    try:
        if kind == kinds.MTP.name and drafter_path is None:
            return target_facts, None, (mtp_rule(target_facts),)
        if drafter_path is None:
            return target_facts, None, ()
        drafter_model, drafter_facts = _facts(drafter_path)
        try:
            made_for = made_for_rule(gguf_facts(target_model.info), gguf_facts(drafter_model.info))
            return (
                target_facts,
                drafter_facts,
                (
                    *vocabulary_rules(loaded_vocabulary(target_model), loaded_vocabulary(drafter_model)),
                    *((made_for,) if made_for else ()),
                ),
            )
        finally:
            drafter_model.close()
    finally:
        target_model.close()


def _mlx_checks(target_path: Path, drafter_path: Path | None, kind: str):
    """(target facts, drafter facts, rules) from MLX folders' headers (engine.models.mlx_compat)."""
    target = read_folder(target_path)
    target_facts = mlx_shapes(mlx_facts(target))
    if kind == kinds.MTP.name and drafter_path is None:
        return target_facts, None, (mtp_rule(target_facts),)
    if drafter_path is None:
        return target_facts, None, ()
    drafter = read_folder(drafter_path)
    return target_facts, mlx_shapes(mlx_facts(drafter)), mlx_rules(target, drafter)


def _profile(
    target: Path, drafter_path: Path | None, kind: str, options: RuntimeOptions, runtime: str | Runtime = LLAMA
) -> BoxProfile | None:
    """This pair's saved box profile on its runtime: a draft model's own; the target's rows, drafting
    free, for the rest. A GGUF pair on MLX is profiled under its conversions' names (`draftlight tune`)."""
    if kind == kinds.NONE.name:
        return None
    keyed = run_options(runtime, options)  # MLX's options name its version and device
    try:
        if kind == kinds.MODEL.name and drafter_path is not None:
            return load_profile(target, drafter_path, keyed)
        rows = saved_rows(target, keyed)
    except ImportError:
        return None  # MLX is not installed here: no profile of it either
    return drafting_free(rows, kind) if rows else None


def _named(spec: Path | str) -> str:
    """A model as a command takes it: its catalog key where it is a catalog file, else as given."""
    model = catalog.lookup(Path(spec).name) if isinstance(spec, Path) else None
    return model.key if model is not None else str(spec)


def predict_speed(
    profile: BoxProfile | None,
    probe: Probe | None,
    target_path: Path,
    drafter: Path | str,
    kind: str,
    compatible: bool = True,
) -> Prediction:
    """The speed the box profile predicts against plain, at the probe's acceptance (else the profile's own)."""
    if kind == kinds.NONE.name:
        return Prediction("No drafter: replies run plain.")
    if not compatible:
        return Prediction("None: this drafter cannot draft for this target, so replies would run plain.")
    if profile is None:
        return Prediction(
            f"No box profile for this pair on this machine yet: `draftlight tune --target {_named(target_path)} "
            f"--drafter {_named(drafter)}` measures what its rounds cost here (about a minute), and this report "
            "then predicts its speed against plain decoding."
        )
    return replace(_predict_from(profile, probe), profile_basis=profile.basis())


def _predict_from(profile: BoxProfile, probe: Probe | None) -> Prediction:
    measured = probe if probe is not None and probe.rounds else None
    acceptance = (
        conditional_acceptance(measured.rounds, profile.max_depth)
        if measured is not None
        else list(profile.acceptance_prior)
    )
    if not acceptance:
        return Prediction("The box profile has no acceptance to predict from: run the probe.")
    best, rates = best_depth(profile, acceptance)
    basis = (
        f"the probe's acceptance ({measured.acceptance:.0%})"
        if measured is not None
        else "the profile's calibration acceptance"
    )
    plain = rates[0]
    if best > 0:
        return Prediction(
            f"At {basis}, depth {best} is predicted at {rates[best]:.1f} tok/s on this box against {plain:.1f} "
            f"plain: {rates[best] / plain:.2f}x.",
            best,
            rates[best],
            plain,
        )
    if not speculation_pays(profile):
        return Prediction(why_plain(profile), 0, plain, plain)
    return Prediction(
        f"At {basis}, no depth beats plain decoding on this box ({plain:.1f} tok/s): the drafts are "
        "rejected too often to pay for drafting and verifying them.",
        0,
        plain,
        plain,
    )


def probe_pair(
    report: PairReport,
    prompts: Sequence[tuple[str, str]] | None = None,
    seconds: float = PROBE_SECONDS,
    max_tokens: int = PROBE_TOKENS,
    max_prompts: int = PROBE_PROMPTS,
    progress: ProbeProgress | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> PairReport:
    """The report with its acceptance probe run (loading the pair) and its prediction made from it."""
    source = "your recent prompts" if prompts else "the built-in prompts"
    chosen = list(prompts or built_in_prompts())[:max_prompts]
    if not report.compatible:
        why = (
            "no drafter is chosen"
            if report.drafter_kind == kinds.NONE.name
            else "this drafter cannot draft for this target"
        )
        probe = Probe(source, PROBE_DEPTH, 0.0, note=f"The probe did not run: {why}.")
        return replace(report, probe=probe)
    drafter_spec = report.drafter.path if report.drafter else report.drafter_kind  # a keyword kind: MTP, n-grams
    probe = run_probe(
        report.target.path,
        drafter_spec,
        report.options,
        chosen,
        source,
        seconds,
        max_tokens,
        progress or (lambda *_: None),
        cancelled,
        report.runtime,
    )
    target_path = Path(report.target.path)
    drafter = Path(report.drafter.path) if report.drafter else report.drafter_kind
    profile = None
    if probe.rounds:
        drafter_path = drafter if isinstance(drafter, Path) else None
        profile = _profile(target_path, drafter_path, report.drafter_kind, report.options, report.runtime)
    prediction = (
        predict_speed(profile, probe, target_path, drafter, report.drafter_kind) if probe.rounds else report.prediction
    )
    if not probe.speculates:
        prediction = Prediction("None: this target cannot undo a rejected draft here, so replies run plain.")
    architecture = report.architecture
    if probe.rollback:  # what the loaded target said, in place of what its header suggests
        architecture = (*architecture[:2], probe.rollback)
    runtimes = ""
    if probe.speculates and not cancelled():
        say = progress or (lambda *_: None)
        comparison = compare_runtimes(
            target_path, drafter, report.options, chosen[0][1], PROBE_DEPTH, min(max_tokens, COMPARE_TOKENS),
            lambda what: say(1, 1, what),
        )  # fmt: skip
        runtimes = comparison.sentence()
    return replace(report, probe=probe, prediction=prediction, architecture=architecture, runtimes=runtimes)
