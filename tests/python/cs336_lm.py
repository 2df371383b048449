"""A Transformer LM in the layout of Stanford CS336 assignment 1 (pre-norm
blocks, RMSNorm, RoPE on interleaved pairs, SwiGLU feed-forward, untied input
embedding and LM head, no biases), written for gpusim's tests: the model the
recorder is validated with against traces/recorded/cs336_gpt_training_snapshot.pickle.

Every op is plain tensor arithmetic (its own softmax and cross-entropy, as
the assignment asks), so which tensors autograd saves is decided by the
PyTorch version's derivative formulas, exactly as in the recorded run.
"""

import math

import torch
from torch import nn


class Linear(nn.Module):
    def __init__(self, d_in, d_out, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in, device=device, dtype=dtype))
        std = math.sqrt(2.0 / (d_in + d_out))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)

    def forward(self, x):
        return x @ self.weight.T


class Embedding(nn.Module):
    def __init__(self, vocab, d, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab, d, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, std=1.0, a=-3.0, b=3.0)

    def forward(self, ids):
        return self.weight[ids]


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.to(torch.float32)
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x / rms * self.weight).to(in_dtype)


class RoPE(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv = theta ** (-torch.arange(0, d_k, 2, device=device, dtype=torch.float32) / d_k)
        ang = torch.arange(max_seq_len, device=device, dtype=torch.float32)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cos(ang), persistent=False)
        self.register_buffer("sin", torch.sin(ang), persistent=False)

    def forward(self, x, seq_len):
        cos = self.cos[:seq_len]
        sin = self.sin[:seq_len]
        x1 = x[..., 0::2]
        x2 = x[..., 1::2]
        r1 = x1 * cos - x2 * sin
        r2 = x1 * sin + x2 * cos
        return torch.stack((r1, r2), dim=-1).flatten(-2)


def softmax(x, dim):
    e = torch.exp(x - torch.max(x, dim=dim, keepdim=True).values)
    return e / e.sum(dim=dim, keepdim=True)


def attention(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = torch.where(mask, scores, torch.tensor(float("-inf"), device=scores.device))
    return softmax(scores, dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, rope, device=None, dtype=None):
        super().__init__()
        self.h = n_heads
        self.q_proj = Linear(d_model, d_model, device, dtype)
        self.k_proj = Linear(d_model, d_model, device, dtype)
        self.v_proj = Linear(d_model, d_model, device, dtype)
        self.output_proj = Linear(d_model, d_model, device, dtype)
        self.rope = rope

    def forward(self, x):
        b, t, d = x.shape
        def heads(y):
            return y.view(b, t, self.h, d // self.h).transpose(1, 2)
        q = heads(self.q_proj(x))
        k = heads(self.k_proj(x))
        v = heads(self.v_proj(x))
        q = self.rope(q, t)
        k = self.rope(k, t)
        pos = torch.arange(t, device=x.device)
        mask = pos[:, None] >= pos[None, :]
        out = attention(q, k, v, mask)
        return self.output_proj(out.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device, dtype)
        self.w2 = Linear(d_ff, d_model, device, dtype)
        self.w3 = Linear(d_model, d_ff, device, dtype)

    def forward(self, x):
        a = self.w1(x)
        return self.w2(a * torch.sigmoid(a) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, rope, device=None, dtype=None):
        super().__init__()
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attn = Attention(d_model, n_heads, rope, device, dtype)
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.ffn = SwiGLU(d_model, d_ff, device, dtype)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff,
                 rope_theta=10000.0, device=None, dtype=None):
        super().__init__()
        rope = RoPE(rope_theta, d_model // num_heads, context_length, device)
        self.token_embeddings = Embedding(vocab_size, d_model, device, dtype)
        self.layers = nn.ModuleList(
            Block(d_model, num_heads, d_ff, rope, device, dtype) for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model, device=device, dtype=dtype)
        self.lm_head = Linear(d_model, vocab_size, device, dtype)

    def forward(self, ids):
        x = self.token_embeddings(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_final(x))


def cross_entropy(logits, targets):
    """Mean cross-entropy: log-softmax with the max subtracted, then the
    negated target log-probabilities."""
    m = torch.max(logits, dim=-1, keepdim=True).values
    x = logits - m
    x = x - torch.log(torch.sum(torch.exp(x), dim=-1, keepdim=True))
    x = -x
    return torch.gather(x, -1, targets.unsqueeze(-1)).mean()
