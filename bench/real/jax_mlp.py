"""A JAX MLP trained with a jit-compiled step (plain SGD written out, no
optax), batch on the device. No NVTX ranges of the program's own: XLA's come
from its TSL domain.

    python3 jax_mlp.py [--steps 300] [--sync]
"""
import argparse
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from common import Timer  # noqa: E402


def init(key, sizes):
    params = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        k = jax.random.fold_in(key, i)
        params.append((jax.random.normal(k, (m, n), jnp.float32) / jnp.sqrt(m), jnp.zeros((n,), jnp.float32)))
    return params


def loss_fn(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.gelu(h @ w + b)
    w, b = params[-1]
    logits = h @ w + b
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), loss


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--sync", action="store_true", help="float(loss) every step: a sync of the program's own")
    a = p.parse_args()
    key = jax.random.PRNGKey(0)
    params = init(key, [2048, 4096, 4096, 4096, 1000])
    x = jax.random.normal(key, (1024, 2048), jnp.float32)
    y = jax.random.randint(key, (1024,), 0, 1000)
    for _ in range(a.warmup):
        params, loss = train_step(params, x, y)
    loss.block_until_ready()
    t = Timer()
    t.mark()
    for _ in range(a.steps):
        params, loss = train_step(params, x, y)
        if a.sync:
            float(loss)
    loss.block_until_ready()
    t.done(a.steps, loss=float(loss))
