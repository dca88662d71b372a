"""Sentences of the book's prose that use a verdict word for a definition, a method or plain English, not for a
finding (tests/test_verdict_words.py): (page, a snippet naming the sentence, why it asserts no unmeasured verdict).

Keep it short: a sentence that reports what the data show gets its words from the data instead (a glue role, a
part's words function). An entry whose sentence is gone or reworded fails the test: remove it.
"""
MAX_ENTRIES = 32  # what the list holds now: a new entry raises it, in review
# sentences flagged where another engineer edits the page (part 0's page, the parts' opening blocks): to be mended there
PENDING = ("part 0: pending", "opening block: pending")

ALLOWED: list[tuple[str, str, str]] = [
    # what the verdicts mean: the claims engine's rule (claims.py), said once per page that judges; no verdict asserted
    ("notebooks/01-hit-the-wall-evidence.md", "and is judged against it: holds when every ratio",
     "defines the three verdicts by claims.py's rule; the verdicts themselves are the claims table's"),
    ("notebooks/02-prefill-freeze-evidence.md", "It holds when every ratio of measured to predicted that the repeats allow",
     "defines the three verdicts by claims.py's rule; the verdicts themselves are the claims table's"),
    ("notebooks/03-batching-cliff-evidence.md", "and is judged against it: holds when every ratio",
     "defines the three verdicts by claims.py's rule; the verdicts themselves are the claims table's"),
    ("notebooks/05-four-bits.md", "and holds when measured over predicted stays inside the claim's band",
     "defines when a claim holds (claims.py's rule); the verdicts themselves are the claims table's"),
    ("notebooks/05-four-bits-evidence.md", "and holds when measured over predicted stays inside the claim's band",
     "defines when a claim holds (claims.py's rule); the verdicts themselves are the claims table's"),
    # the part pages' short claims paragraph (its evidence page keeps the full one): the same rule, said once
    ("notebooks/01-hit-the-wall.md", "it holds when every ratio of measured to predicted that the uncertainties allow",
     "defines the three verdicts by claims.py's rule; the verdicts themselves are the claims table's"),
    ("notebooks/02-prefill-freeze.md", "it holds when every ratio of measured to predicted that the uncertainties allow",
     "defines the three verdicts by claims.py's rule; the verdicts themselves are the claims table's"),
    ("notebooks/03-batching-cliff.md", "it holds when every ratio of measured to predicted that the uncertainties allow",
     "defines the three verdicts by claims.py's rule; the verdicts themselves are the claims table's"),
    ("book/glance.md", "**holds**: every ratio of measurement to prediction",
     "the matrix's legend: what the word in a cell means, by claims.py's rule"),
    ("book/glance.md", "**differs**: none does",
     "the matrix's legend: what the word in a cell means, by claims.py's rule"),
    ("book/glance.md", "**inconclusive**: the ranges allow ratios on both sides",
     "the matrix's legend: what the word in a cell means, by claims.py's rule"),
    ("book/glance.md", "Part 4 judges its claims on every pass they apply to",
     "the legend of part 4's cells: glance.point_verdict's rule, tested in tests/test_glance.py"),
    ("notebooks/04-kv-starvation-evidence.md", "The line is an empirical one",
     "states when claim preemption-stall is judged and when it is inconclusive (p04's rule), not a result"),
    # method: how runs are counted, shown or compared
    ("notebooks/01-hit-the-wall-evidence.md", "so only measured rigs appear",
     "what the page can show: the post kept no per-request times"),
    ("notebooks/01-hit-the-wall-evidence.md", "only a load test can",
     "advice on method (a memory report cannot tell which limit binds), not a measured result"),
    ("notebooks/02-prefill-freeze-evidence.md", "Whether it costs only that shows in two counts",
     "names the question and the two counts that answer it; the answer is computed below it"),
    ("notebooks/05-four-bits.md", "is made here only where both put it on the same side",
     "the rule the page's words follow (p05 says costs less per sequence only where ITL and TPOT agree)"),
    ("book/method.md", "A pass counts only if every request completed",
     "the rule a pass is kept by (store/sweep), not a finding"),
    ("book/method.md", "A point counts as complete only when",
     "the rule a point is complete by (store's manifest), not a finding"),
    ("book/method.md", "exists only to prove the experiment path works",
     "what the CPU test rig is for and where it is shown (profile method_only)"),
    ("book/method.md", "idle only of our own requests",
     "describes how the committed CPU run was made, and says its claims cannot hold there"),
    ("book/method.md", "Its page shows measured GPU rigs only",
     "which rigs a page shows (parts.page_rigs), not a finding"),
    # definitions of the vocabulary (primer, scheduler)
    ("notebooks/02-prefill-freeze.md", "than the intervals that only decoded",
     "opening block (edited elsewhere): 'only decoded' names the decode-only intervals, whose shortfall part 1 measured"),
    ("notebooks/04-kv-starvation.md", "The scheduler admits a waiting request only when",
     "vLLM's admission rule, which the page's arithmetic then predicts from; no measurement asserted"),
    ("book/primer.md", "only some layers use full attention",
     "defines a hybrid model"),
    ("book/primer.md", "A p99 is only as good as the number of samples",
     "a caution about percentiles (method), not a measurement"),
    ("book/primer.md", "means slower steps, whatever the arithmetic throughput",
     "follows from the inequality the sentence names (bytes over bandwidth): arithmetic, not a measurement"),
    ("book/primer.md", "the step takes only a little longer",
     "the primer's picture of batching (fixed cost + per-sequence cost), measured by its decode chart below"),
    ("book/primer.md", "while requests keep arriving faster than they leave",
     "defines overload: past capacity arrivals outpace completions by definition"),
    # the series' own statements, quoted as the series makes them (the intro has no code to glue from)
    ("book/intro.md", "Past that ceiling, extra load buys no throughput at all, only a longer queue",
     "the series' headline as the paragraph attributes it to the series; part 1's claims judge it"),
]
