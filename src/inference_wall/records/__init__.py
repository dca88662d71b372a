"""What stores and parses records: the data layout (store), a point's manifest (record), the parsers of what vLLM
writes (logs), the published reference numbers, the samplers whose time series a pass keeps (poller, gpuclocks),
the servers' setup read from their logs, the redaction of secrets and the runs' device budget.

Imports only the top level's shared names (errors, schema) and its own layer."""
