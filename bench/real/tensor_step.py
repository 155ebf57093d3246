"""hf_llama.py's model and step: 5 warm-up steps without ranges, then N
steps inside NVTX `step` ranges (forward, backward, optimizer within).

    python3 tensor_step.py [N]
"""
import sys

import torch

from common import ranges
from hf_llama import build

step, _ = build()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for _ in range(5):
    step(ranges(False))
torch.cuda.synchronize()
for _ in range(n):
    step(ranges(True))
torch.cuda.synchronize()
