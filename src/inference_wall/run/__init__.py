"""What runs vLLM and the client: one server (server), one `vllm bench serve` pass (bench, _benchfork), the
injected prompts (inject) and the profiler pass (trace), a part's sweep (sweep), its writer lock, the rig and the
machine's vLLM build (rig, gpuenv).

Imports only model/, measure/, records/ and the top level's shared names."""
