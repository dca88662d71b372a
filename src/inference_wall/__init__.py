"""The Inference Wall: run vLLM serving experiments, keep their raw artefacts, rebuild the book from them."""

__version__ = "0.1.0"
