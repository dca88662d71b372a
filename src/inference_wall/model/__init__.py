"""The model's shape and memory: a preset's shape (modelshape), its folder for vLLM (modelkit), its KV pool
(kvcache) and the bytes a decode step reads (weightbytes).

Imports only measure/, records/ and the top level's shared names."""
