#!/usr/bin/python3
"""A fine-tuning script as Hugging Face's docs write one: Trainer with its output_dir in
$AIP_CHECKPOINT_DIR, a checkpoint every --save-steps steps, and at start
trainer.train(resume_from_checkpoint=get_last_checkpoint(output_dir)). Trainer writes each
checkpoint-<step>/ in place, trainer_state.json last, and get_last_checkpoint takes the highest step
whatever the folder holds, so a checkpoint the node died writing stops the next start.
tests/integration/torch_ddp_test.cc runs it through such a loss under Cohort, whose agents set that
folder aside before the job restarts (agent/torn_checkpoints.h).

    hf_trainer_job.py [--steps N] [--save-steps S] [--step-delay SECONDS]

A small BERT built from its config (nothing downloaded) on synthetic token sequences, on CPU, one
process. Prints "starting from scratch" or "resuming from <checkpoint>", and "trained to step N".
"""
import argparse
import os
import tempfile
import time

import torch

os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="hf-home-"))  # nothing cached in ~
os.environ["HF_HUB_OFFLINE"] = "1"  # nothing fetched
from transformers import (BertConfig, BertForSequenceClassification, Trainer,  # noqa: E402
                          TrainerCallback, TrainingArguments)
from transformers.trainer_utils import get_last_checkpoint  # noqa: E402


class Sequences(torch.utils.data.Dataset):
    """Token sequences whose class is the parity of their first token."""

    def __init__(self):
        self.ids = torch.randint(1, 64, (640, 16), generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]),
                "labels": self.ids[i, 0] % 2}


class StepDelay(TrainerCallback):
    """Stands in for a bigger model's step time."""

    def __init__(self, seconds):
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.seconds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--save-steps", type=int, default=5)
    parser.add_argument("--step-delay", type=float, default=0.0)
    args = parser.parse_args()

    output_dir = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "trainer")
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, num_labels=2))
    training = TrainingArguments(output_dir=output_dir, use_cpu=True, per_device_train_batch_size=16,
                                 max_steps=args.steps, learning_rate=3e-3, seed=0,
                                 save_strategy="steps", save_steps=args.save_steps, logging_steps=5,
                                 report_to=[], disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=training, train_dataset=Sequences(),
                      callbacks=[StepDelay(args.step_delay)])
    last = get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
    print("resuming from %s" % last if last else "starting from scratch", flush=True)
    trainer.train(resume_from_checkpoint=last)
    print("trained to step %d" % trainer.state.global_step, flush=True)


if __name__ == "__main__":
    main()
