"""BERT-base (random weights from its config) fine-tuned for sequence
classification with Hugging Face's `Trainer` on random token data: no NVTX
ranges, a DataLoader inside the Trainer. The plain step time comes from a
callback that times the steps after warm-up (a device sync at its ends).

    python3 hf_trainer.py [--steps 80] [--warmup 10] [--batch 32] [--seq 128] [--collator-range]

`--collator-range`: the program's own NVTX range `collate` around the data
collator, which then runs on the training thread (no loader workers).
"""
import argparse
import os
import tempfile

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from transformers import (BertConfig, BertForSequenceClassification, Trainer,  # noqa: E402
                          TrainerCallback, TrainingArguments, default_data_collator)

from common import Timer  # noqa: E402


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.labels[i]}


class StepTimer(TrainerCallback):
    def __init__(self, warmup, steps):
        self.warmup, self.steps, self.t = warmup, steps, Timer()

    def on_step_begin(self, args, state, control, **kw):
        if state.global_step == self.warmup:
            torch.cuda.synchronize()
            self.t.mark()

    def on_step_end(self, args, state, control, **kw):
        if state.global_step == self.warmup + self.steps:
            torch.cuda.synchronize()
            self.t.done(self.steps)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--collator-range", action="store_true")
    a = p.parse_args()

    def collate(batch):
        torch.cuda.nvtx.range_push("collate")
        try:
            return default_data_collator(batch)
        finally:
            torch.cuda.nvtx.range_pop()

    cfg = BertConfig(num_labels=2)
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg)
    total = a.warmup + a.steps
    data = RandomTokens(total * a.batch, a.seq, cfg.vocab_size)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=a.batch, max_steps=total,
                                 bf16=True, logging_steps=10_000, save_strategy="no", report_to=[],
                                 dataloader_num_workers=0 if a.collator_range else 2, disable_tqdm=True)
        Trainer(model=model, args=args, train_dataset=data, callbacks=[StepTimer(a.warmup, a.steps)],
                data_collator=collate if a.collator_range else None).train()
