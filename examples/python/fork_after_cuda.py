"""Forks after initialising CUDA; the child exits normally (running exit
handlers). Under gpuscope only the parent may write a report."""
import os
import sys

import torch

x = torch.ones(1024, device="cuda") * 2
pid = os.fork()
if pid == 0:
    sys.exit(0)
os.waitpid(pid, 0)
print(f"parent sum {x.sum().item():.0f}")
