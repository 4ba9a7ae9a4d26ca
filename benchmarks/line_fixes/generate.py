"""Hugging Face generate() for one prompt at a time (a small GPT-2 built from its config).

EXPECT: the library's generation loop
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import GPT2Config, GPT2LMHeadModel

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000)
model = GPT2LMHeadModel(config).to(dev).eval()
prompts = [torch.randint(0, 1000, (1, 16), device=dev) for _ in range(60)]
outs = []
with torch.inference_mode():
    for ids in prompts:
        outs.append(model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0))
