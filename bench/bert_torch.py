#!/usr/bin/python3
"""PyTorch side of the BERT pretraining benchmark: the same model (BERT-base by default: word,
position and token-type embeddings with LayerNorm; post-LayerNorm encoder layers of PyTorch's own
nn.TransformerEncoderLayer with GELU and key padding; the masked-LM head — dense, GELU, LayerNorm,
the tied word embedding with its bias — on the predicted positions only; pooler + next-sentence
classifier; no dropout), batch shape, AdamW and clipping as bench/bert_train_bench.cpp, f32. The
batch has meshflow's layout (token types, the odd rows' last quarter padding, 15% of the real
positions predicted, drawn here with torch's generator: the timing does not depend on the values).
Run with Debian's python3-torch at its best settings here (scripts/bench_train.sh sets
OMP_NUM_THREADS, ATEN_CPU_CAPABILITY=avx512 and OPENBLAS_CORETYPE=SkylakeX for its BLAS).
Usage: bert_torch.py [layers hidden heads ffn seq micro_batch steps]"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_steps import time_training_steps

DEFAULTS = ["12", "768", "12", "3072", "128", "8", "6"]
L, C, H, FF, T, B, STEPS = (int(a) for a in (sys.argv[1:] + DEFAULTS[len(sys.argv) - 1:]))
V, P, EPS = 30522, 512, 1e-12


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word, self.position, self.token_type = nn.Embedding(V, C), nn.Embedding(P, C), nn.Embedding(2, C)
        self.embed_norm = nn.LayerNorm(C, eps=EPS)
        layer = nn.TransformerEncoderLayer(C, H, FF, dropout=0.0, activation="gelu", layer_norm_eps=EPS,
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.transform, self.transform_norm = nn.Linear(C, C), nn.LayerNorm(C, eps=EPS)
        self.mlm_bias = nn.Parameter(torch.zeros(V))
        self.pooler, self.seq_relationship = nn.Linear(C, C), nn.Linear(C, 2)

    def forward(self, batch, labels):
        ids, types, mask, nsp = batch
        x = self.word(ids) + self.token_type(types) + self.position(torch.arange(ids.shape[1]))
        h = self.encoder(self.embed_norm(x), src_key_padding_mask=mask == 0)
        picked = h[labels != -100]  # (n, C): the predicted positions
        t = self.transform_norm(F.gelu(self.transform(picked)))
        mlm = F.cross_entropy(F.linear(t, self.word.weight, self.mlm_bias), labels[labels != -100])
        pooled = torch.tanh(self.pooler(h[:, 0]))
        return mlm + F.cross_entropy(self.seq_relationship(pooled), nsp)


torch.manual_seed(0)
model = Bert()
with torch.no_grad():  # Hugging Face's initialisation, as meshflow's
    for name, p in model.named_parameters():
        if "norm" in name:
            p.fill_(1.0 if name.endswith("weight") else 0.0)
        elif name.endswith("bias"):
            p.zero_()
        else:
            p.normal_(0.0, 0.02)
real = torch.ones(B, T, dtype=torch.long)
real[1::2, T - T // 4:] = 0
ids = torch.where(real == 1, torch.randint(1000, 30000, (B, T)), torch.zeros(B, T, dtype=torch.long))
types = ((torch.arange(T) >= T // 2).long().expand(B, T) * real).contiguous()
predicted = (torch.rand(B, T) < 0.15) & (real == 1)
predicted[:, 0] = False
labels = torch.where(predicted, torch.randint(1000, 30000, (B, T)), torch.full((B, T), -100))
nsp = torch.arange(B) % 2
time_training_steps(model, (ids, types, real, nsp), labels, STEPS, "BERT")
