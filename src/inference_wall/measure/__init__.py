"""Analysis and judgement over records: pure functions over tidy frames (analysis), the claims and their
judgement, the steady windows of a pass, the prefill freeze and goodput within a target (slo).

Imports only records/ and the top level's shared names."""
