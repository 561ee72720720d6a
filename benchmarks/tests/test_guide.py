"""The guide's rule (benchmarks/page/guide.py): its verdicts come from the run's figures and
probes, so another run gives another verdict, and nothing about an option is typed. Run by
`tox -e semantics`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import spec  # noqa: E402
import stats  # noqa: E402
from outcomes import Outcome  # noqa: E402
from page import guide, render  # noqa: E402
from probing.questions import ATTRIBUTE, HANDLE_AFTER_FREE, UNDECLARED  # noqa: E402

CLASSES = [("pybind11", "pybind"), ("nanobind", "nanobind"), ("Cython", "cython")]
TENSORS = [("torch ops", "torch"), ("torch stable ABI", "torch_stable"), ("tvm-ffi", "tvm_ffi"),
           ("pybind11 in a torch extension", None)]  # fmt: skip
C_LIBRARY = [("ctypes", "ctypes"), ("cffi ABI", "cffi"), ("cffi API", None)]
OFF = {"a module that declares nothing": Outcome("GIL enabled"),
       "its declaration": Outcome("GIL disabled")}  # fmt: skip


def timing(ns) -> stats.Timing:
    """Rounds around `ns` (every option's the same way, so their ratio is steady), or the given
    rounds (a list of ns)."""
    rounds = ns if isinstance(ns, list) else [ns * f for f in (0.99, 1.0, 1.01, 1.0, 1.02)]
    return stats.Timing([r * 1e-9 for r in rounds])


def run(
    method_ns: dict,
    *,
    ft=None,
    silent=None,
    compiled=None,
    call_ns=None,
    later=None,
    sem=None,
    bound=None,
):
    """A run whose figures are the given ones (a method's the same with the GIL and without);
    every other answer the same for every option."""
    timings = {spec.case_key("method, one int", spec.REGISTRY[p]["floor"]): timing(ns)
               for (t, p) in CLASSES for name, ns in method_ns.items() if name == t}  # fmt: skip
    ft_timings = {spec.case_key("method, one int", spec.FT_PROBE.get(t, t)): timing(ns)
                  for t, ns in method_ns.items()}  # fmt: skip
    for tech, p in TENSORS + C_LIBRARY:
        probe = spec.REGISTRY[p]["probe"] if p else tech
        case = "one int" if (tech, p) in C_LIBRARY else "one array"
        timings[spec.case_key(case, probe)] = timing((call_ns or {}).get(tech, 100))
    sem = {t: {} for t, _ in CLASSES + TENSORS + C_LIBRARY} | (sem or {})
    silent = silent or {}
    traps = {t: {"crash": [f"trap-{i}" for i in range(silent.get(t, 0))]} for t in sem}
    rows = {"pybind11": OFF, "nanobind": OFF, "Cython": OFF, "torch": {
        "a module that declares nothing": Outcome("refused", "pip"),
        "its declaration": Outcome("not probed", detail="pip refused it")}}  # fmt: skip
    rows.update(ft or {})
    compile_rows = {spec.TECHNOLOGIES[t].get("compile_row"): o
                    for t, o in (compiled or {}).items()}  # fmt: skip
    by_id = {id(v): t for t, v in sem.items()}
    return guide.Run(sem, compile_rows, timings, rows, None,
                     lambda axes: traps[by_id[id(axes)]], lambda s: f"{s * 1e9:.0f} ns",
                     ft_later=later, ft_timings=ft_timings, bound=bound,
                     severity=render.row_severity)  # fmt: skip


def verdict(job_name: str, r: guide.Run) -> guide.Verdict:
    job = next(j for j in guide.JOBS if j.name == job_name)
    options = {"classes and whole components": CLASSES, "tensor operators": TENSORS,
               "an existing C library": C_LIBRARY}[job_name]  # fmt: skip
    return guide.decide(job, options, r)


def test_the_cheapest_method_call_among_those_that_pass_is_the_pick():
    v = verdict("classes and whole components",
                run({"pybind11": 129, "nanobind": 40, "Cython": 28}))  # fmt: skip
    assert (v.pick, v.runner_up) == ("Cython", "nanobind") and not v.tied
    v = verdict("classes and whole components",
                run({"pybind11": 129, "nanobind": 20, "Cython": 28}))  # fmt: skip
    assert (v.pick, v.runner_up) == ("nanobind", "Cython") and not v.tied


def test_a_difference_below_the_threshold_is_a_tie_and_the_silent_traps_decide():
    """18.8 against 20.7 ns, every round apart: a user would not feel it (1.10x < DECISIVE)."""
    near = {"pybind11": 129, "nanobind": 20.7, "Cython": 18.8}
    v = verdict("classes and whole components", run(near, silent={"Cython": 3, "nanobind": 1}))
    assert (v.pick, v.runner_up, v.tied) == ("nanobind", "Cython", ["Cython"])
    text, _ = guide.guide({"classes and whole components": CLASSES},
                          run(near, silent={"Cython": 3, "nanobind": 1}))  # fmt: skip
    assert "ties with Cython" in text and f"{guide.DECISIVE:g}×" in text, text
    # The cheaper one is not a reason to take the runner-up: its cost does not decide.
    assert not any("cheaper" in r for r in guide.reasons(v, run(near))), guide.reasons(v, run(near))


def test_a_difference_within_noise_is_a_tie_however_large_its_median():
    """1.5x at the median, but the rounds cross: a rerun could flip it."""
    noisy = {"pybind11": 129, "Cython": [20, 20, 20, 20, 20, 20, 20, 20, 20, 20],
             "nanobind": [30, 30, 30, 30, 30, 30, 30, 30, 15, 15]}  # fmt: skip
    v = verdict("classes and whole components", run(noisy, silent={"Cython": 3}))
    assert v.pick == "nanobind" and v.tied == ["Cython"], (v.ranked, v.tied)
    apart = {**noisy, "nanobind": [30] * 10}
    v = verdict("classes and whole components", run(apart, silent={"Cython": 3}))
    assert v.pick == "Cython" and not v.tied


def test_an_option_that_fails_a_must_have_is_not_picked_however_cheap():
    back_on = {"Cython": {"a module that declares nothing": Outcome("GIL enabled"),
                          "its declaration": Outcome("GIL enabled")}}  # fmt: skip
    v = verdict("classes and whole components",
                run({"pybind11": 129, "nanobind": 40, "Cython": 28}, ft=back_on))  # fmt: skip
    assert v.pick == "nanobind" and v.ranked[-1] == "Cython"


def test_an_option_that_does_not_install_there_fails_gil_off_unless_a_later_wheel_exists():
    """Refused by pip on the free-threaded Python here: no, where the index has no wheel for a
    later one either; unknown (neither yes nor no), where it has one, and the verdict forks."""
    refused = {"Cython": {"a module that declares nothing": Outcome("refused", "pip"),
                          "its declaration": Outcome("not probed", detail="pip refused it")}}  # fmt: skip
    figures = {"pybind11": 129, "nanobind": 40, "Cython": 28}
    no = guide.gil_off(run(figures, ft=refused), "Cython", "cython")
    assert no.ok is False and "does not install" in no.text
    later = {"Cython": {"wheel": "cython-3.2-cp314-cp314t-manylinux.whl"}}
    unknown = guide.gil_off(run(figures, ft=refused, later=later), "Cython", "cython")
    assert unknown.ok is None and unknown.fork, unknown
    v = verdict("classes and whole components", run(figures, ft=refused, later=later))
    assert v.pick == "nanobind"  # an unknown is no pass: nanobind passes the must-have here
    text, _ = guide.guide({"classes and whole components": CLASSES},
                          run(figures, ft=refused, later=later))  # fmt: skip
    assert "On 3.13t: **Take nanobind**" in text and "On 3.14t and later" in text, text


def test_the_runner_up_says_what_it_answers_better():
    r = run({"pybind11": 129, "nanobind": 40, "Cython": 28}, silent={"Cython": 3, "nanobind": 1})
    v = verdict("classes and whole components", r)
    assert v.pick == "Cython"
    said = guide.reasons(v, r)
    assert len(said) == 1 and "fewer silent traps" in said[0], said
    assert "1 crash against 3 crash" in said[0], said


def test_torch_compile_decides_the_tensor_operators():
    seen = Outcome("passed", "0 (fullgraph compiles)")
    broken = Outcome("failed", "2 (fullgraph fails: Unsupported)")
    r = run({}, compiled={"torch ops": seen, "torch stable ABI": seen, "tvm-ffi": broken,
                          "pybind11 in a torch extension": broken},
            call_ns={"torch ops": 700, "torch stable ABI": 500, "tvm-ffi": 110,
                     "pybind11 in a torch extension": 47})  # fmt: skip
    v = verdict("tensor operators", r)
    assert (v.pick, v.runner_up) == ("torch stable ABI", "torch ops")
    r.compiled[spec.TECHNOLOGIES["tvm-ffi"]["compile_row"]] = seen
    assert verdict("tensor operators", r).pick == "tvm-ffi"


def test_the_guide_names_its_rule_and_each_jobs_pick():
    text, verdicts = guide.guide(
        {"classes and whole components": CLASSES},
        run({"pybind11": 129, "nanobind": 40, "Cython": 28}),
    )
    assert guide.RULE in text
    assert '<span id="pick-classes-and-whole-components"></span>**Take Cython**' in text
    assert [v.pick for v in verdicts] == ["Cython"]


def test_a_long_cell_shows_its_start_and_keeps_the_rest_on_hover():
    text = "word " * 30
    shown = guide.short(text)
    visible = shown.split(">", 1)[1].rsplit("<", 1)[0]
    assert len(visible) <= 60 and visible.endswith("…")
    assert 'title="' + " ".join(text.split()) + '"' in shown
    assert guide.short("short") == "short"


def test_the_page_renders_another_verdict_from_another_run_json():
    """Through the renderer, from run.json's own shapes: the probes' JSON, the rounds' timings,
    the free-threaded section's probes and rates (calls a second, the GIL off); only the
    figures differ between the two runs."""
    import stats

    raw = {t: {} for t, _ in CLASSES}

    def page(method_ns: dict[str, float]) -> str:
        timings = {spec.case_key("method, one int", spec.REGISTRY[p]["floor"]):
                   stats.Timing([method_ns[t] * 1e-9] * 3) for t, p in CLASSES}  # fmt: skip
        rates = {spec.case_key("method, one int", spec.FT_PROBE.get(t, t)):
                 {"off": {"one": [1e9 / method_ns[t]] * 3}} for t, _ in CLASSES}  # fmt: skip
        ft = {"probes": {t: {row: o.to_json() for row, o in OFF.items()} for t, _ in CLASSES},
              "python": "3.13.5 (free-threaded)", "benchmarks": rates}  # fmt: skip
        figures = render.Figures(timings, {})
        run = render.run_for_guide(raw, figures, "not observed by this run", ft)
        return render.guide_values(run)["guide"]

    assert "**Take Cython**" in page({"pybind11": 129, "nanobind": 40, "Cython": 28})
    assert "**Take nanobind**" in page({"pybind11": 129, "nanobind": 20, "Cython": 28})


def test_a_short_cell_keeps_the_words_of_the_markdown_it_is_made_of():
    cell = (
        'declaring nothing: <span title="The global interpreter lock">GIL back on</span>; '
        "`py::mod_gil_not_used()`: GIL stays off; [more](free-threaded.md)"
    )
    shown = guide.short(cell)
    assert "&lt;span" not in shown and "title=&quot;" not in shown
    assert shown.split(">", 1)[1].startswith("declaring nothing: GIL back on;")


def test_torch_compile_passes_only_with_no_graph_break():
    r = run({})
    row = spec.TECHNOLOGIES["torch ops"]["compile_row"]
    for outcome, ok in ((Outcome("passed", "0 (fullgraph compiles)"), True),
                        (Outcome("passed", "2 (fullgraph compiles)"), False),
                        (Outcome("failed", "1 (fullgraph fails: Unsupported)"), False)):  # fmt: skip
        r.compiled[row] = outcome
        assert guide.compiled(r, "torch ops", "torch").ok is ok, outcome


def test_one_wheel_serves_every_python_only_where_it_ran_on_each_one_tried():
    r = run({})
    passed, refused = Outcome("passed", "runs"), Outcome("refused", "pip", "no matching wheel")
    wheel = "pybind kvbridge_pybind-0.1.0-cp311-cp311-linux_x86_64.whl"
    r.port = {wheel: {"3.11": passed, "3.12": refused, "3.13": refused}}
    some = guide.one_wheel_pythons(r, "pybind11", "pybind")
    assert some.ok is False and some.text == "1 of 3 interpreters", some
    r.port = {wheel: {"3.11": passed, "3.12": passed, "3.13": passed}}
    assert guide.one_wheel_pythons(r, "pybind11", "pybind").ok is True


def test_a_cell_keeps_a_version_range_and_escapes_once():
    """ "<0.2," is no tag (it was stripped as one: "apache-tvm-ffi=0.1.15"), and a code span is
    escaped by markdown alone (escaped here too, it read `torch&gt;=2.11`)."""
    assert (
        guide.short("needs apache-tvm-ffi<0.2,>=0.1.15")
        == "needs apache-tvm-ffi&lt;0.2,&gt;=0.1.15"
    )
    cut = guide.short("on 3.13.5, `pip install torch>=2.11`, then import: " + "words " * 20)
    visible = cut.split(">", 1)[1].rsplit("</span>", 1)[0]
    assert "`pip install torch>=2.11`" in visible and "&gt;" not in visible.split("`")[1], cut
    inside = guide.short("x" * 50 + " `pip install torch>=2.11`")  # cut inside the code span
    visible = inside.split(">", 1)[1].rsplit("</span>", 1)[0]
    assert "`" not in visible and "<" not in visible.replace("&lt;", ""), inside


def test_a_cpp_throw_that_ends_the_process_fails_the_classes_must_have():
    """Cython's default declaration lets a C++ throw abort the process: however cheap its
    method, it is not the pick where another option raises."""
    died = {"Cython": {"undeclared throw": {UNDECLARED: Outcome("crashed", "SIGABRT")}},
            "nanobind": {"undeclared throw": {UNDECLARED: Outcome("not probed", detail="n/a")},
                         "exceptions": {"invalid_argument": Outcome("raised", "ValueError")}}}  # fmt: skip
    r = run({"pybind11": 129, "nanobind": 40, "Cython": 20}, sem=died)
    assert guide.throw_safe(r, "Cython", "cython").ok is False
    assert guide.throw_safe(r, "nanobind", "nanobind").ok is True
    assert guide.throw_safe(r, "pybind11", "pybind").ok is None  # asked nothing: unknown
    assert verdict("classes and whole components", r).pick == "nanobind"


def test_an_attribute_that_dangles_fails_and_a_copy_or_a_kept_owner_passes():
    r = run({})
    for kind, ok in (("kept alive", True), ("copied", True), ("dangled", False)):
        r.sem["nanobind"]["references"] = {ATTRIBUTE: Outcome(kind)}
        assert guide.attribute_safe(r, "nanobind", "nanobind").ok is ok, kind


def test_the_classes_cost_is_the_method_with_the_gil_off():
    """The free-threaded figure decides (the must-have's interpreter); the GIL build's is shown."""
    r = run({"pybind11": 129, "nanobind": 40, "Cython": 28})
    r.ft_timings[spec.case_key("method, one int", spec.FT_PROBE.get("Cython", "Cython"))] = timing(
        90
    )
    v = verdict("classes and whole components", r)
    assert v.pick == "nanobind" and v.answers["method_cost"]["Cython"].value < 30e-9


def test_a_c_library_needs_no_compiler_and_its_call_takes_an_argument():
    needs = Outcome("failed", "needs a compiler (CompileError)")
    binds = Outcome("passed", "binds and calls, no compiler")
    r = run({}, bound={"ctypes": binds, "cffi ABI": binds, "cffi API": needs},
            call_ns={"ctypes": 270, "cffi ABI": 170, "cffi API": 67})  # fmt: skip
    v = verdict("an existing C library", r)
    assert (v.pick, v.runner_up) == ("cffi ABI", "ctypes"), v.ranked
    assert v.answers["arg_call_cost"]["cffi ABI"].case == spec.case_key("one int", "cffi ABI")
    r.bound["cffi API"] = binds
    assert verdict("an existing C library", r).pick == "cffi API"


def test_each_figure_says_whose_it_is():
    r = run({"pybind11": 129, "nanobind": 40, "Cython": 28})
    assert guide.method_cost(r, "nanobind", "nanobind").text.endswith("(its own floor)")
    torch_floor = spec.REGISTRY["torch"]["floor"]
    r.timings[spec.case_key("method, one int", torch_floor)] = timing(900)
    said = guide.method_cost(r, "torch ops", "torch").text
    assert ("its own floor" in said) == (torch_floor == "torch ops"), said


def test_a_verdict_says_how_firmly_it_holds_over_resampled_rounds():
    apart = run({"pybind11": 129, "nanobind": 40, "Cython": 28})
    v = verdict("classes and whole components", apart)
    assert guide.stability(v, apart) == guide.RESAMPLES
    # Rounds that cross half the time: some resamplings flip the pick.
    crossing = run({"pybind11": 129, "Cython": [30, 20, 30, 20, 30, 20, 30, 20, 30, 20],
                    "nanobind": [20, 30, 20, 30, 20, 30, 20, 30, 20, 45]})  # fmt: skip
    w = verdict("classes and whole components", crossing)
    assert 0 < guide.stability(w, crossing) < guide.RESAMPLES
    text, _ = guide.guide({"classes and whole components": CLASSES}, apart)
    assert f"Holds in {guide.RESAMPLES} of {guide.RESAMPLES} resamplings" in text, text


def test_tensor_operators_say_the_pick_for_a_pinned_torch_and_for_wheels_across_torches():
    seen = Outcome("passed", "0 (fullgraph compiles)")
    r = run({}, compiled={"torch ops": seen, "torch stable ABI": seen},
            call_ns={"torch ops": 650, "torch stable ABI": 700},
            sem={"torch stable ABI": {"references": {HANDLE_AFTER_FREE: Outcome("dangled")}},
                 "torch ops": {"references": {HANDLE_AFTER_FREE: Outcome(
                     "not probed", detail="no handles")}}})  # fmt: skip
    passed = Outcome("passed", "runs")
    r.port = {"torch kvbridge_torch-cp311.whl beside torch 2.13": {"3.11": passed},
              "torch kvbridge_torch-cp311.whl beside torch 2.14": {"3.11": Outcome("refused", "x")},
              "torch_stable kvbridge_torch_stable-py3.whl beside torch 2.13": {"3.11": passed},
              "torch_stable kvbridge_torch_stable-py3.whl beside torch 2.14": {"3.11": passed}}  # fmt: skip
    text, (v,) = guide.guide({"tensor operators": TENSORS}, r)
    assert v.pick == "torch ops", v.ranked
    assert "- With one pinned torch: **torch ops**" in text, text
    line = next(x for x in text.splitlines() if x.startswith("- Shipping wheels across torches"))
    assert "**torch stable ABI**" in line and "use after free" in line, line


def test_the_home_page_answers_come_first_one_line_per_job():
    _, verdicts = guide.guide({"classes and whole components": CLASSES, "tensor operators": TENSORS},
                              run({"pybind11": 129, "nanobind": 40, "Cython": 28}))  # fmt: skip
    lines = guide.answers(verdicts).splitlines()
    assert (
        len(lines) == 2 and "take **Cython**" in lines[0] and "#pick-tensor-operators" in lines[1]
    )
