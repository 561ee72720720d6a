"""The guide on top of the comparison page: for each job of the decision table, the questions
that decide it, each answered by this run for every option, and the option to take.

The rule that picks, written once (RULE is its sentence on the page): an option passes a job's
must-have questions, fails them, or cannot be asked here (unknown, with its reason: neither a
pass nor a failure); the pick is the option that passes the most of them (all, where any
does), at the lowest decisive cost (the job's cost question): a cost decides only where the
dearer option is dearer in the middle 80% of rounds and by at least DECISIVE at the median,
else the options tie on it and the fewest silent traps decide, then the decision table's
order. The runner-up is the next by the same order; the guide says when to take it instead:
each question it answers better than the pick (a cost only where it decides). Nothing here is
typed about any option: every answer comes from the run's probes and figures, and another
run.json gives another verdict (benchmarks/tests/test_guide.py).
"""

from __future__ import annotations

import dataclasses
import html
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import spec
import stats
from outcomes import Outcome
from page.cells import table
from probing.questions import ATTRIBUTE, OPT_IN

# A cost decides only at this ratio or beyond, and only where the middle 80% of rounds agree
# (the health page's "within noise" test): a difference a rerun could flip, or that a user
# would not feel (1.9 ns a call is 1.9 µs per 1,000 calls), is a tie.
DECISIVE = 1.25

RULE = (
    "The pick for a job passes the most of its must-have questions (all, where any option "
    "does; an answer that cannot be observed here is unknown, neither a pass nor a failure) at "
    "the lowest decisive cost: a cost decides only where the dearer option is dearer in the "
    f"middle 80% of rounds and by at least {DECISIVE:g}× at the median; otherwise the options tie "
    "on it, and the fewest silent traps decide. The runner-up is next by the same order, and "
    "is worth taking where it answers a question better than the pick."
)


@dataclass(frozen=True)
class Answer:
    """One option's answer to one question: `ok` (yes, no, or None: not asked of it), `value`
    (the figure a cost or a count compares, lower is better; None where there is none), `text`
    (at most a few words) and `link` (the evidence row, a page and its anchor)."""

    ok: bool | None
    value: float | None
    text: str
    link: str
    case: str | None = None  # a cost's case key, whose rounds a tie is judged by
    fork: str | None = None  # unknown here, answerable on this interpreter (the verdict forks)


@dataclass(frozen=True)
class Question:
    key: str
    text: str  # as the guide asks it
    need: str  # what a reader needs who needs a yes ("you need ...")
    kind: str  # "yes/no" (ok decides) or "lower" (value decides: a cost, a count)
    answer: Callable[[Run, str, str | None], Answer]
    said: str  # what the pick's sentence says of it, before the answer


@dataclass(frozen=True)
class Job:
    name: str  # the registry's `job`
    title: str
    must: tuple[str, ...]  # the must-have questions (yes/no)
    cost: str  # the decisive cost (lower)
    shown: tuple[str, ...]  # asked and shown, deciding nothing alone
    situations: tuple[tuple[str, str | None], ...] = ()  # (the reader's case, its must-have)


@dataclass
class Run:
    """What the guide reads of one run: the probes' outcomes per technology, torch.compile's
    table, the timings by case key (every round), the free-threaded probes' outcomes, the
    portability table's outcomes (label -> interpreter -> Outcome), and the time formatter;
    the free-threaded interpreter the answers come from, and the index's answer for the next
    free-threaded CPython where this one's refused a technology (report.index_answer)."""

    sem: dict[str, dict[str, dict[str, Outcome]]]
    compiled: dict[str, Outcome]
    timings: dict[str, stats.Timing]
    ft: dict[str, dict[str, Outcome]] | None
    port: dict[str, dict[str, Outcome]] | None
    traps: Callable[[dict], dict[str, list[str]]]
    fmt_time: Callable[[float | None], str]
    ft_python: str = "3.13t"
    ft_later: dict[str, dict] | None = None
    # The free-threaded interpreter's timings by case key (seconds per call, one per round),
    # the C ABI family's no-compiler table (technology -> Outcome), and the severity of a trap
    # row (render.row_severity): what a pick gives up against its runner-up is read with it.
    ft_timings: dict[str, stats.Timing] | None = None
    bound: dict[str, Outcome] | None = None
    severity: Callable[[str, str, Outcome], str | None] | None = None


# --- the answers ---------------------------------------------------------------------------

NOT_ASKED = Answer(None, None, "—", "")


def gil_off(run: Run, tech: str, package: str | None) -> Answer:
    """Yes where the technology's module (declaring what it must) keeps the GIL off on the
    free-threaded interpreter here (named in the answer); no where it turns it back on, or where
    it does not install there and the index has no wheel for a later free-threaded CPython
    either; unknown where such a wheel exists: its answer is not observable here."""
    link = "free-threaded.md"
    if run.ft is None:
        return Answer(None, None, "not probed by this run", link)
    base = spec.FT_PROBE.get(tech, tech)
    rows = run.ft.get(base)
    if rows is None:
        return Answer(None, None, "not probed", link)
    plain, declared = rows["a module that declares nothing"], rows["its declaration"]
    on = run.ft_python
    if plain.kind == "refused":
        if "wheel" in (run.ft_later or {}).get(base, {}):
            later = "3.14t"  # the interpreter report.index_answer asks the index about
            return Answer(None, None, f"refused on {on}; {later}: unknown here", link,
                          fork=f"{later} and later")  # fmt: skip
        return Answer(False, None, f"does not install on {on}", link)
    if "GIL disabled" in (plain.kind, declared.kind):
        said = "yes" if plain.kind == "GIL disabled" else "yes, declared"
        return Answer(True, None, f"{said} ({on})", link)
    return Answer(False, None, f"GIL back on ({on})", link)


def compiled(run: Run, tech: str, package: str | None) -> Answer:
    """Yes where torch.compile traces the call with no graph break and fullgraph compiles."""
    row = spec.TECHNOLOGIES[tech].get("compile_row")
    o = run.compiled.get(row) if row else None
    if o is None:
        return Answer(None, None, "n/a: not a callable torch sees", "traps.md#torch-compile")
    breaks = int(o.value.split()[0]) if o.value.split()[:1] and o.value.split()[0].isdigit() else -1
    ok = o.kind == "passed" and breaks == 0
    text = f"{breaks} graph break{'s' * (breaks != 1)}" if breaks >= 0 else o.label()
    if breaks >= 0 and o.kind == "failed":  # fullgraph=True fails, whatever the count
        text += "; fullgraph fails"
    return Answer(ok, float(breaks), text, "traps.md#torch-compile")


def throw_safe(run: Run, tech: str, package: str | None) -> Answer:
    """Yes where no C++ throw the probes made (an undeclared one, each exception kind) ended
    the process with the technology's default declaration; no, naming the first that did."""
    axes = run.sem.get(tech, {})
    asked = [(axis, row, o) for axis in ("undeclared throw", "exceptions")
             for row, o in axes.get(axis, {}).items() if o.kind != "not probed"]  # fmt: skip
    if not asked:
        return Answer(None, None, "not probed", "traps.md#c-exceptions")
    died = [(axis, row, o) for axis, row, o in asked if o.kind == "crashed"]
    if died:
        axis, row, o = died[0]
        which = "an undeclared throw" if axis == "undeclared throw" else f"`{row}`"
        return Answer(False, None, f"the process dies ({which}, {o.value})",
                      "traps.md#c-exceptions")  # fmt: skip
    return Answer(True, None, f"raises ({len(asked)} throws probed)", "traps.md#c-exceptions")


# What an attribute's object does once its owner is gone, by the probe's outcome: safe where it
# keeps the owner alive or holds a copy of its own (a copy is counted among the traps: writes
# to it are lost, but it never reads freed memory).
_OUTLIVES = {"kept alive": "keeps its owner alive", "copied": "a copy (owner not needed)",
             "read in place": "read in place"}  # fmt: skip


def attribute_safe(run: Run, tech: str, package: str | None) -> Answer:
    """Yes where an object reached through an attribute is safe after its owner is dropped
    (the references axis' attribute row); no where it dangles or worse."""
    o = run.sem.get(tech, {}).get("references", {}).get(ATTRIBUTE)
    link = "traps.md#trap-references-attribute-returning-a-member"
    if o is None or o.kind == "not probed":
        return Answer(None, None, "not probed" if o is None else o.label(), link)
    if o.kind in _OUTLIVES:
        return Answer(True, None, _OUTLIVES[o.kind], link)
    return Answer(False, None, o.label(), link)


def no_compiler(run: Run, tech: str, package: str | None) -> Answer:
    """Yes where the technology binds a library and calls it on a machine with no compiler,
    its build step included (the C ABI family's probe)."""
    link = "traps.md#no-compiler"
    o = (run.bound or {}).get(tech)
    if o is None:
        return Answer(None, None, "not probed", link)
    if o.kind == "not probed":
        return Answer(None, None, o.label(), link)
    return Answer(o.kind == "passed", None, o.value, link)


def _timed(run: Run, key: str, link: str, whose: str, timings=None) -> Answer:
    timing = (run.timings if timings is None else timings).get(key)
    seconds = timing.median if timing else None
    text = run.fmt_time(seconds) + (f" ({whose})" if timing else "")
    return Answer(None, seconds, text, link, key)


def _whose(tech: str, row: str) -> str:
    """Whose figure a cost is: the technology's own floor (a probe module built with its
    defaults), or the floor made as a kvbridge package's class makes it."""
    return "its own floor" if row == tech else f"floor: {row}"


def method_cost(run: Run, tech: str, package: str | None) -> Answer:
    """A method taking one int, made with the lookups the option's own class makes (its
    package's floor row), from the call-overhead table (the GIL build)."""
    floor = spec.REGISTRY[package]["floor"] if package else tech
    return _timed(run, spec.case_key("method, one int", floor), "costs.md#call-overhead",
                  _whose(tech, floor))  # fmt: skip


def method_cost_ft(run: Run, tech: str, package: str | None) -> Answer:
    """The same method on the free-threaded interpreter, the GIL off (its probe module's class,
    as benchmarks/measuring/free_threading.py times it)."""
    key = spec.case_key("method, one int", spec.FT_PROBE.get(tech, tech))
    if run.ft_timings is None:
        return Answer(None, None, "not measured by this run", "free-threaded.md")
    return _timed(run, key, "free-threaded.md", f"its own floor, {run.ft_python}",
                  run.ft_timings)  # fmt: skip


def _call(case: str, run: Run, tech: str, package: str | None) -> Answer:
    probe = spec.REGISTRY[package]["probe"] if package else tech
    return _timed(run, spec.case_key(case, probe), "costs.md#call-overhead", _whose(tech, probe))


def call_cost(run: Run, tech: str, package: str | None) -> Answer:
    """A function taking nothing and returning nothing (its technology's no-op)."""
    return _call("no-op", run, tech, package)


def op_cost(run: Run, tech: str, package: str | None) -> Answer:
    """An op given one tensor of a decode step's size (the one-array floor: probing.asking's
    floor_array)."""
    return _call("one array", run, tech, package)


def arg_call_cost(run: Run, tech: str, package: str | None) -> Answer:
    """A C function given one int, declared as its users declare it."""
    return _call("one int", run, tech, package)


# The severities a user cannot see coming: the process dies, a value is wrong, memory is read
# after it was freed. The count the guide compares; the traps page has the others.
SILENT = ("crash", "wrong result without an error", "use after free")


def defaults_wrong(run: Run, tech: str, package: str | None) -> Answer:
    found = run.traps(run.sem[tech]) if tech in run.sem else {}
    counts = {sev: len(found.get(sev, [])) for sev in SILENT}
    words = {"crash": ("crash", "crashes"), "wrong result without an error": ("wrong result",
             "wrong results"), "use after free": ("use after free", "uses after free")}  # fmt: skip
    text = ", ".join(f"{n} {words[s][n > 1]}" for s, n in counts.items() if n) or "none"
    first = next((found[s][0] for s in SILENT if found.get(s)), "")  # the worst one's row
    return Answer(
        None, float(sum(counts.values())), text, f"traps.md#{first}" if first else "traps.md"
    )


def _wheel_coverage(run: Run, package: str | None, beside_torch: bool) -> Answer:
    """The most interpreters (or torches) one of the package's wheels ran on, of those it was
    tried on."""
    link = "portability.md"
    if package is None:
        return Answer(None, None, "no kvbridge package", link)
    if run.port is None:
        return Answer(None, None, "not observed by this run", link)
    tried: set[str] = set()
    groups: dict[str, set] = {}
    for label, per in run.port.items():
        if label.split(" ")[0] != package:
            continue
        torch = label.split(" beside torch ", 1)[1] if " beside torch " in label else None
        for version, o in per.items():
            if o.kind == "not probed":
                continue
            where = f"{torch} on {version}" if beside_torch else version
            tried.add(where)
            if o.kind == "passed":
                groups.setdefault(label.split(" beside torch ")[0], set()).add(where)
    best = max((len(g) for g in groups.values()), default=0)
    if not tried:
        return Answer(None, None, "not tried", link)
    what = "torches" if beside_torch else "interpreters"
    return Answer(best == len(tried), None, f"{best} of {len(tried)} {what}", link)


def one_wheel_pythons(run: Run, tech: str, package: str | None) -> Answer:
    return _wheel_coverage(run, package, beside_torch=False)


def one_wheel_torches(run: Run, tech: str, package: str | None) -> Answer:
    if package and not spec.needs_torch(package):
        return Answer(None, None, "needs no torch", "portability.md")
    return _wheel_coverage(run, package, beside_torch=True)


QUESTIONS = {q.key: q for q in (
    Question("gil_off", "Does it run with the GIL off?", "it to run with the GIL off",
             "yes/no", gil_off, "GIL off"),
    Question("compile", "Can torch.compile see the call (0 graph breaks)?",
             "torch.compile to see the call", "yes/no", compiled, "torch.compile"),
    Question("throw_safe", "Does a C++ throw raise, never end the process, as declared by default?",
             "a C++ throw that never ends the process", "yes/no", throw_safe, "a C++ throw"),
    Question("attribute_safe", "Is an object reached through an attribute safe once its owner "
             "is dropped?", "an attribute's object safe without its owner", "yes/no",
             attribute_safe, "an attribute's object"),
    Question("no_compiler", "Does it bind a library with no compiler, at build or install?",
             "no compiler at build or install", "yes/no", no_compiler, "no compiler"),
    Question("method_cost_ft", "What does a method with one int cost, the GIL off?",
             "the cheaper method call, the GIL off", "lower", method_cost_ft,
             "a method with one int, the GIL off"),
    Question("method_cost", "What does a method with one int cost, with the GIL?",
             "the cheaper method call with the GIL", "lower", method_cost,
             "a method with one int, with the GIL"),
    Question("call_cost", "What does a call cost?", "the cheaper call", "lower", call_cost,
             "a call"),
    Question("op_cost", "What does an op given one decode-size tensor cost?",
             "the cheaper op call", "lower", op_cost, "an op given one decode-size tensor"),
    Question("arg_call_cost", "What does a call with one int cost?", "the cheaper call",
             "lower", arg_call_cost, "a call with one int"),
    Question("defaults", "What do its defaults get wrong, silently?",
             "fewer silent traps in its defaults", "lower", defaults_wrong, "silent traps"),
    Question("one_wheel_pythons", "Does one wheel serve every Python tried?",
             "one wheel for every Python", "yes/no", one_wheel_pythons, "one wheel"),
    Question("one_wheel_torches", "Does one wheel serve every torch tried?",
             "one wheel for every torch", "yes/no", one_wheel_torches, "one wheel"),
)}  # fmt: skip

# Each job's must-haves are what an engineer doing that job would name first; its decisive cost
# is the call that job makes (a method with one int on the interpreter its must-have names; an
# op given a decode step's tensor; a C function given an argument). `situations`: the reader's
# common cases, each one line, as a must-have added to the job's (none: the job as it is).
JOBS = (
    Job("classes and whole components", "Classes and whole components (a scheduler, a prefix tree)",
        must=("gil_off", "throw_safe", "attribute_safe"), cost="method_cost_ft",
        shown=("method_cost", "defaults", "one_wheel_pythons")),
    Job("tensor operators", "Tensor operators",
        must=("compile",), cost="op_cost", shown=("one_wheel_torches", "gil_off", "defaults"),
        situations=(("With one pinned torch", None),
                    ("Shipping wheels across torches", "one_wheel_torches"))),
    Job("an existing C library", "An existing C library",
        must=("no_compiler",), cost="arg_call_cost",
        shown=("gil_off", "defaults", "one_wheel_pythons")),
)  # fmt: skip


# --- the rule ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    job: Job
    options: list[tuple[str, str | None]]  # (technology, package), in the decision table's order
    answers: dict[str, dict[str, Answer]]  # question -> technology -> answer
    ranked: list[str]  # technologies, best first
    tied: list[str]  # those whose cost ties with the pick's (the silent traps then decided)

    @property
    def pick(self) -> str:
        return self.ranked[0]

    @property
    def runner_up(self) -> str | None:
        return self.ranked[1] if len(self.ranked) > 1 else None


def _cost(a: Answer) -> float:
    return a.value if a.value is not None else math.inf


def dearer(run: Run, a: Answer, b: Answer) -> bool:
    """Whether cost a is decisively dearer than cost b: a rerun would not flip it (a is dearer
    in the middle 80% of rounds, pairing rounds as every ratio does) and a user would feel it
    (DECISIVE or more at the median). A figure against none: none is the dearer."""
    if a.value is None or b.value is None:
        return a.value is None and b.value is not None
    timing_a, timing_b = run.timings.get(a.case or ""), run.timings.get(b.case or "")
    if timing_a is None or timing_b is None or len(timing_a.rounds) != len(timing_b.rounds):
        return a.value >= DECISIVE * b.value  # no rounds to pair: the medians alone
    r = stats.ratio(timing_a, timing_b)
    return r.spread[0] > 1 and r.median >= DECISIVE


def decide(job: Job, options: list[tuple[str, str | None]], run: Run) -> Verdict:
    """The rule (RULE): most must-haves passed, then the lowest decisive cost (options whose
    costs are not decisively apart tie), then the fewest silent traps, then the decision
    table's order."""
    keys = (*job.must, job.cost, *job.shown)
    answers = {k: {t: QUESTIONS[k].answer(run, t, p) for t, p in options} for k in keys}
    order = {t: i for i, (t, _) in enumerate(options)}
    passed = {t: sum(answers[k][t].ok is True for k in job.must) for t in order}
    cost = answers[job.cost]
    # Tiers of cost within each count of must-haves passed, cheapest first: an option opens a
    # tier of its own only where it is decisively dearer than the first of the tier before.
    leader, first = {}, None
    for t in sorted(order, key=lambda t: (-passed[t], _cost(cost[t]), order[t])):
        if first is None or passed[t] != passed[first] or dearer(run, cost[t], cost[first]):
            first = t
        leader[t] = first

    def rank(t: str) -> tuple:
        silent = answers["defaults"][t] if "defaults" in answers else NOT_ASKED
        return (-passed[t], _cost(cost[leader[t]]), _cost(silent), order[t])

    ranked = sorted(order, key=rank)
    tied = [t for t in ranked[1:] if leader[t] == leader[ranked[0]]]
    return Verdict(job, options, answers, ranked, tied)


# How firmly a verdict holds: re-decided on this many resamplings of its cost's rounds (each
# round drawn with replacement, the same draw for every option, so paired rounds stay paired).
RESAMPLES = 200


def resampled(run: Run, keys: list[str], rng: random.Random) -> Run:
    """The run with the rounds of `keys` (in its timings or its free-threaded timings) drawn
    again with replacement: one draw per round count, shared by every key that has it."""
    draws: dict[int, list[int]] = {}

    def again(timings: dict[str, stats.Timing] | None) -> dict[str, stats.Timing] | None:
        if timings is None:
            return None
        out = dict(timings)
        for key in keys:
            if key in timings:
                n = len(timings[key].rounds)
                draw = draws.setdefault(n, [rng.randrange(n) for _ in range(n)])
                out[key] = stats.Timing([timings[key].rounds[i] for i in draw])
        return out

    return dataclasses.replace(run, timings=again(run.timings), ft_timings=again(run.ft_timings))


def stability(v: Verdict, run: Run, seed: int = 0) -> int:
    """In how many of RESAMPLES resamplings of the decisive cost's rounds the same pick wins."""
    rng = random.Random(seed)
    keys = [a.case for a in v.answers[v.job.cost].values() if a.case]
    return sum(decide(v.job, v.options, resampled(run, keys, rng)).pick == v.pick
               for _ in range(RESAMPLES))  # fmt: skip


def gives_up(run: Run, a: str, b: str) -> list[str]:
    """What option a gives up against b, from the probes: what b does right that a cannot be
    asked at all (a whole axis, such as custom classes, or rows, such as typed checks), and the
    traps a's defaults leave that b's do not (on an axis b is asked), once per cause."""
    if run.severity is None:
        return []
    sa, sb = run.sem.get(a, {}), run.sem.get(b, {})

    def right(axis: str, row: str, o: Outcome) -> bool:
        return o.kind != "not probed" and run.severity(axis, row, o) is None

    found = [f"no {axis}" for axis, rows in sb.items()
             if axis not in sa and any(right(axis, r, o) for r, o in rows.items())]  # fmt: skip
    lacks = [row for axis, rows in sb.items() if axis in sa for row, o in rows.items()
             if right(axis, row, o) and sa[axis].get(row, o).kind == "not probed"]  # fmt: skip
    if lacks:
        found.append("no " + ", ".join(f"`{r}`" if r.isupper() else r for r in lacks))
    traps: dict[str, tuple[str, list[str]]] = {}
    for axis, rows in sa.items():
        for row, o in rows.items():
            sev = run.severity(axis, row, o)
            theirs = sb.get(axis, {}).get(row)
            # Compared where b has the axis at all: a custom class's traps are no loss
            # against an option with no custom classes.
            clean = (
                theirs is None or theirs.kind == "not probed" or not run.severity(axis, row, theirs)
            )
            if sev and row not in OPT_IN and axis in sb and clean:
                traps.setdefault(o.cause or row, (sev, []))[1].append(row)
    for cause, (sev, rows) in traps.items():
        found.append(
            f"{sev}: {rows[0]}" if len(rows) == 1 else f"{sev}: {cause} ({len(rows)} rows)"
        )
    return found


def better(run: Run, q: Question, a: Answer, b: Answer) -> bool:
    """Whether answer a is better than b on question q (a cost: decisively cheaper)."""
    if q.kind == "yes/no":
        return a.ok is True and b.ok is False
    if a.case is not None or b.case is not None:  # a timed cost: only where it decides
        return dearer(run, b, a)
    return a.value is not None and b.value is not None and a.value < b.value


def reasons(v: Verdict, run: Run) -> list[str]:
    """When to take the runner-up instead: each question it answers better than the pick."""
    if v.runner_up is None:
        return []
    found = []
    for key, per in v.answers.items():
        q = QUESTIONS[key]
        a, b = per[v.runner_up], per[v.pick]
        if better(run, q, a, b):
            found.append(f"you need {q.need} ({a.text} against {b.text})")
    return found


# --- the markdown ----------------------------------------------------------------------------


def _link(a: Answer) -> str:
    return f"[{a.text}]({a.link})" if a.link else a.text


def _cell(a: Answer) -> str:
    mark = "? " if a.fork else {True: "✓ ", False: "✗ ", None: ""}[a.ok]
    return mark + _link(a)


def _anchor(job: Job) -> str:
    return "pick-" + "-".join(job.name.split())


def said_of(v: Verdict, t: str, keys) -> str:
    """What option t answered to the questions `keys` of its verdict, as a sentence says it."""
    return "; ".join(f"{QUESTIONS[k].said}: {v.answers[k][t].text}" for k in keys)


def job_section(v: Verdict, packages: dict[str, str | None], run: Run) -> str:
    pick, runner = v.pick, v.runner_up
    package = packages[pick]
    named = f" (kvbridge-{package.replace('_', '-')})" if package else " (no kvbridge package)"

    forks = {a.fork: t for k in v.job.must for t, a in v.answers[k].items() if a.fork}
    on = f"On {run.ft_python}: " if forks and "gil_off" in v.job.must else ""
    lines = [f"### {v.job.title}", "",
             f'<span id="{_anchor(v.job)}"></span>{on}**Take {pick}**{named}: '
             f"{said_of(v, pick, (*v.job.must, v.job.cost))}."]  # fmt: skip
    if v.tied:
        cost = v.job.cost
        others = ", ".join(f"{t} ({v.answers[cost][t].text})" for t in v.tied)
        lines[-1] += (
            f" On {QUESTIONS[cost].said} it ties with {others}: not {DECISIVE:g}× "
            "apart, or not in the middle 80% of rounds, so the silent traps decided."
        )
    for where, t in forks.items():
        lines[-1] += (
            f" On {where}: not observable here (the index has a wheel of {t} for it, "
            "not run here), so this verdict may differ there."
        )
    if runner:
        why = reasons(v, run)
        when = ("; or ".join(why) if why
                else "nothing this page asks: it answers no question better")  # fmt: skip
        failed = [k for k in v.job.must if v.answers[k][runner].ok is not True]
        but = f" (it fails the must-have {said_of(v, runner, failed)})" if failed else ""
        lines[-1] += f" Runner-up: **{runner}**{but}, worth it where {when}."
        if lost := gives_up(run, pick, runner):
            lines[-1] += f" Against it, {pick} gives up: {'; '.join(lost)}."
    held = stability(v, run)
    lines[-1] += f" Holds in {held} of {RESAMPLES} resamplings of its rounds, on one machine."
    for label, must in v.job.situations:
        w = situation(v, must, run)
        keys = (must, v.job.cost) if must else (v.job.cost,)
        line = f"{label}: **{w.pick}**: {said_of(w, w.pick, keys)}"
        if w.pick != v.pick and (lost := gives_up(run, w.pick, v.pick)):
            line += f"; against {v.pick} it gives up: {'; '.join(lost)}"
        # One tight list under the pick's paragraph: a blank line before its first item only.
        lines += [f"- {line}."] if lines[-1].startswith("- ") else ["", f"- {line}."]
    header = ["", *[t for t, _ in v.options]]
    rows = []
    for key, per in v.answers.items():
        q = QUESTIONS[key]
        tag = " (must)" if key in v.job.must else " (decides)" if key == v.job.cost else ""
        rows.append([q.text + tag, *[_cell(per[t]) for t, _ in v.options]])
    lines += ["", table(header, rows)]
    return "\n".join(lines)


def situation(v: Verdict, must: str | None, run: Run) -> Verdict:
    """The job's verdict for a reader who also needs `must` (None: the job as it is)."""
    if must is None:
        return v
    job = dataclasses.replace(v.job, must=(*v.job.must, must),
                              shown=tuple(k for k in v.job.shown if k != must), situations=())  # fmt: skip
    return decide(job, v.options, run)


def answers(verdicts: list[Verdict]) -> str:
    """The three answers in a line each, linked to their sections (the home page opens on
    them)."""
    lines = []
    for v in verdicts:
        runner = f"; runner-up {v.runner_up}" if v.runner_up else ""
        lines.append(f"- **{v.job.title}**: take **{v.pick}**{runner} "
                     f"([why](comparison.md#{_anchor(v.job)}))")  # fmt: skip
    return "\n".join(lines)


def guide(jobs: dict[str, list[tuple[str, str | None]]], run: Run) -> tuple[str, list[Verdict]]:
    """The guide's markdown (each job, then the rule's sentence), and its verdicts."""
    verdicts, parts = [], []
    for job in JOBS:
        options = [(t, p) for t, p in jobs.get(job.name, []) if t in run.sem]
        if not options:
            continue
        v = decide(job, options, run)
        verdicts.append(v)
        parts.append(job_section(v, dict(options), run))
    # The answers first, then how they were reached: the rule closes the guide.
    parts += ["### How a pick is made", RULE]
    return "\n\n".join(parts), verdicts


# An HTML tag as the cells' markdown holds them (<span title=...>, </span>): a letter after the
# bracket. A version range's "<0.2," is no tag.
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?>")


def _escaped(plain: str) -> str:
    """Plain text as a cell's markdown: escaped once, for HTML, outside code spans (inside one,
    markdown escapes it itself: escaping it here too shows `&gt;`); an unclosed span's
    backtick (where a cell was cut) dropped."""
    parts = plain.split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one opens nothing
        parts[-2:] = [parts[-2] + parts[-1]]
    return "`".join(p if i % 2 else html.escape(p, quote=False) for i, p in enumerate(parts))


def short(text: str, limit: int = 60) -> str:
    """A cell's text in at most `limit` visible characters, the whole of it on hover. Made of
    a cell's markdown, it keeps its words: tags dropped, a link's text kept, and every other
    character as it reads (a version range's `<` too)."""
    plain = _TAG.sub("", text)
    plain = html.unescape(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", plain))
    plain = " ".join(plain.split())
    if len(plain) <= limit:
        return _escaped(plain)
    title = html.escape(plain, quote=True).replace("|", "&#124;")
    return f'<span title="{title}">{_escaped(plain[: limit - 1].rstrip())}…</span>'
