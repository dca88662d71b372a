"""The kernel families of a decode step (the trace's kernel names mapped to the parts of a step) and the band
within which the parts add up to the step."""
from __future__ import annotations

import math
import re


# ---------------------------------------------------------------------------------------------
# Replay: the step per point, the trace per step, the components per variant, the claims
# ---------------------------------------------------------------------------------------------


# Kernel families of a decode step, first match wins (names lower-case). The trace keeps every kernel's name, count
# and time, so this map can improve without a new run.
STEP_FAMILIES = [
    ("recurrent state (GDN)", r"gated_delta|delta_rule|fused_recurrent|causal_conv|chunk_fwd|chunk_scaled|"
                              r"recompute_w_u|merge_16x16|solve_tril|l2norm"),
    ("attention", r"flash|attn|attention|fmha|paged|reshape_and_cache"),
    ("norms, activations, other", r"norm|silu|gelu|act_and_mul|swiglu|rotary|rope"),
    ("sampling", r"topk|top_k|topp|softmax|argmax|multinomial|exponential|sort|cumsum|logits|sampl"),
    ("weights (matmul)", r"gemm|cutlass|cublas|xmma|nvjet|matmul|splitkreduce|wgmma|machete|marlin|gptq|scaled_mm|"
                         r"onednn_mm|aten::addmm|aten::linear|aten::mm\b|aten::bmm"),
    ("memory copies", r"memcpy|memset|copy|index|gather|scatter|fill"),
    ("norms, activations, other", r"."),
]


COMPONENTS = ["recurrent state (GDN)", "attention", "sampling", "weights (matmul)", "memory copies",
              "norms, activations, other", "GPU idle"]  # the families above, each once, and the GPU's idle time


BAND = (0.9, 1.1)  # the parts add up within 10% either way


def step_family(name: str) -> str:
    low = name.lower()
    return next(fam for fam, rx in STEP_FAMILIES if re.search(rx, low))


LINEAR_KERNEL = re.compile(r"Using (\w+LinearKernel) for (\w+)")


# One launch per attention layer and step: FlashAttention 3's (Hopper) or 2's main kernel, or FlashInfer's
ATTENTION_MAIN = r"flashattnfwdsm\d+|flash_fwd_(splitkv_)?kernel|batchdecodewithpagedkv|batchprefillwithpagedkv"


FILTER_KERNELS = r"topk|top_k|topp|top_p|sort"  # the top-k/top-p filter's kernels (names lower-case)


# the quantized layers' matmul kernels among the weight matmuls (a torch.compile fusion named after the op it sits
# beside, triton_..._machete_mm_..., is not one)
QUANT_KERNELS = r"machete|marlin|gptq|awq|exllama"


def quant_matmul_ms(kernels: dict) -> float:
    """The GPU milliseconds of the weight-matmul kernels that run the quantized layers (QUANT_KERNELS)."""
    return sum(t for n, (_, t) in kernels.items() if step_family(n) == "weights (matmul)"
               and re.search(QUANT_KERNELS, n.lower()) and not n.lower().startswith("triton"))


def trace_steps(kernels: dict, shape: dict) -> float:
    """Steps in a traced window, counted from the trace itself: every step runs each attention layer's kernel once
    (flash attention, any variant) and, on a hybrid model, each recurrent layer's state kernel once (decode or
    chunked prefill); the larger of the two counts over its layers (a step missing from both would be one
    without attention at all)."""
    attn = sum(c for n, (c, _) in kernels.items()
               if re.search(ATTENTION_MAIN, n.lower()) and "combine" not in n.lower())
    rec = sum(c for n, (c, _) in kernels.items()
              if re.search(r"fused_recurrent_gated_delta|chunk_gated_delta_rule_fwd_kernel_h", n.lower()))
    out = []
    if shape["attention_layers"] and attn:
        out.append(attn / shape["attention_layers"])
    if shape["recurrent_layers"] and rec:
        out.append(rec / shape["recurrent_layers"])
    return max(out) if out else math.nan
