"""A Flax (linen) CNN trained with optax Adam on random 32x32 images, one
jit-compiled step, the batch on the device: no NVTX ranges, no host sync in
the loop unless `--sync` (then `float(loss)` every step, the program's own).

    python3 flax_cnn.py [--steps 300] [--warmup 10] [--batch 256] [--sync]
"""
import argparse
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from common import Timer  # noqa: E402


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        for width in (64, 128, 256):
            x = nn.relu(nn.Conv(width, (3, 3))(x))
            x = nn.relu(nn.Conv(width, (3, 3))(x))
            x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        return nn.Dense(10)(nn.relu(nn.Dense(512)(x)))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--sync", action="store_true", help="float(loss) every step")
    a = p.parse_args()
    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (a.batch, 32, 32, 3))
    y = jax.random.randint(key, (a.batch,), 0, 10)
    model = CNN()
    params = model.init(key, x)
    tx = optax.adam(1e-3)
    opt = tx.init(params)

    @jax.jit
    def step(params, opt, x, y):
        def loss_fn(p):
            return optax.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y).mean()

        loss, g = jax.value_and_grad(loss_fn)(params)
        upd, opt = tx.update(g, opt, params)
        return optax.apply_updates(params, upd), opt, loss

    for _ in range(a.warmup):
        params, opt, loss = step(params, opt, x, y)
    loss.block_until_ready()
    t = Timer()
    t.mark()
    for _ in range(a.steps):
        params, opt, loss = step(params, opt, x, y)
        if a.sync:
            float(loss)
    loss.block_until_ready()
    t.done(a.steps, loss=float(loss))
