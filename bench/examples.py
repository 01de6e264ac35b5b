"""Seconds per training step of tinygrad 0.14's example programs, run as written with tinygrad and with
tinygrad_core: beautiful_mnist, gradaccum_mnist, the transformer (the adder), the MNIST tutorial and the quickstart.

    python bench/examples.py [--steps 3] [--only beautiful_mnist,quickstart]
    python bench/examples.py --full [--steps 70] [--only beautiful_mnist,gradaccum_mnist] [--seed 0]
                             [--frameworks tinygrad,tinygrad_core]

The models are written here as tinygrad's examples define them, once, over whichever module is passed in (that the
same code runs on both is the point). Each (workload, framework) runs in a process of its own (tinygrad on DEV=CPU,
which needs clang); the data is random, of the datasets' shapes and dtypes, so nothing is downloaded. The first
steps (compiling, and TinyJit's capture) are warm-up; the figure is the median of the timed steps, each ending in
a read of the loss, as the examples print it. Training mode is entered with Context(TRAINING=1), as tinygrad 0.14
needs (it has no Tensor.train, which the examples' newer copies use).

--full runs the MNIST examples to their end (STEPS, 70 by default, as the examples' own) on MNIST itself (the same
arrays for both, read by tinygrad_core.nn.datasets from the data folder), and prints each one's test accuracy on the
10,000 test images, as the example's get_test_acc computes it after the last step."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

WORKLOADS = ("beautiful_mnist", "gradaccum_mnist", "transformer", "mnist_tutorial", "quickstart")
WARMUP = {"beautiful_mnist": 3, "gradaccum_mnist": 2, "transformer": 2, "mnist_tutorial": 3, "quickstart": 2}
FULL_STEPS = 70         # the MNIST examples' STEPS


def mnist_arrays():
    """Random training images and labels of MNIST's shapes and dtypes."""
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (60000, 1, 28, 28), dtype=np.uint8), rng.integers(0, 10, 60000, dtype=np.uint8)


class BeautifulModel:                   # examples/beautiful_mnist.py
    def __init__(self, tg):
        nn, T = tg.nn, tg.Tensor
        self.layers = [nn.Conv2d(1, 32, 5), T.relu, nn.Conv2d(32, 32, 5), T.relu, nn.BatchNorm2d(32), T.max_pool2d,
                       nn.Conv2d(32, 64, 3), T.relu, nn.Conv2d(64, 64, 3), T.relu, nn.BatchNorm2d(64), T.max_pool2d,
                       lambda x: x.flatten(1), nn.Linear(576, 10)]

    def __call__(self, x):
        return x.sequential(self.layers)


def beautiful_mnist(tg):
    _, train_step = beautiful_mnist_model_and_step(tg)
    return lambda: train_step().item()


def beautiful_mnist_model_and_step(tg, arrays=None, devices=None):
    """The example's model and its jitted training step (bench/memory.py adds the example's test accuracy), on the
    training (images, labels) given, else on random ones. With devices (tinygrad's beautiful_mnist_multigpu.py), the
    model is replicated on each of them and every batch sharded over them on axis 0."""
    Tensor, (images, labels) = tg.Tensor, arrays or mnist_arrays()
    X_train, Y_train = Tensor(images), Tensor(labels)
    model = BeautifulModel(tg)
    for x in tg.nn.state.get_state_dict(model).values() if devices else ():
        x.to_(devices)
    opt = tg.nn.optim.Adam(tg.nn.state.get_parameters(model))
    spread = (lambda t: t.shard_(devices, axis=0)) if devices else (lambda t: t)

    @tg.TinyJit
    def train_step():
        with tg.Context(TRAINING=1):
            opt.zero_grad()
            samples = Tensor.randint(512, high=X_train.shape[0])
            X, Y = spread(X_train[samples]), spread(Y_train[samples])
            loss = model(X).sparse_categorical_crossentropy(Y).backward()
            opt.step()
            return loss
    return model, train_step


def gradaccum_mnist(tg):
    return gradaccum_mnist_model_and_step(tg)[1]


def gradaccum_mnist_model_and_step(tg, arrays=None, batch=512, acc_steps=4):        # examples/gradaccum_mnist.py
    import itertools
    Tensor, dtypes, (images, labels) = tg.Tensor, tg.dtypes, arrays or mnist_arrays()
    X_train, Y_train = Tensor(images), Tensor(labels)
    model = BeautifulModel(tg)
    # (split by name, not by requires_grad as the example does: tinygrad 0.14's tensors have no such attribute)
    state = tg.nn.state.get_state_dict(model)
    buffers = [t for name, t in state.items() if "running" in name or "num_batches" in name]
    params = [t for t in state.values() if not any(t is b for b in buffers)]
    pos = list(itertools.accumulate(params, lambda x, y: x + y.numel(), initial=0))
    adam_m, adam_v = Tensor.zeros(pos[-1]).contiguous(), Tensor.zeros(pos[-1]).contiguous()
    b1_t, b2_t = (Tensor.ones((1,), dtype=dtypes.float32) for _ in range(2))    # (0.14 takes no requires_grad=)

    def functional_adam(g, m, v, lr=0.001, b1=0.9, b2=0.999, eps=1e-6):
        b1_t.assign(b1_t * b1)
        b2_t.assign(b2_t * b2)
        m.assign(b1 * m + (1.0 - b1) * g)
        v.assign(b2 * v + (1.0 - b2) * (g * g))
        return lr * ((m / (1.0 - b1_t)) / ((v / (1.0 - b2_t)).sqrt() + eps))

    def microbatch(loss, grads):
        samples = Tensor.randint(batch // acc_steps, high=X_train.shape[0])
        for t in params:
            t.grad = None
        with tg.Context(TRAINING=1):
            uloss = (model(X_train[samples]).sparse_categorical_crossentropy(Y_train[samples]) / acc_steps).backward()
        loss.assign(loss + uloss)
        grads.assign(grads + Tensor.cat(*[t.grad.contiguous().flatten() for t in params], dim=0))
        Tensor.realize(loss, grads)

    def step():
        loss, grads = Tensor.zeros(tuple()).contiguous(), Tensor.zeros(pos[-1]).contiguous()
        for _ in range(acc_steps):
            microbatch(loss, grads)
        delta = functional_adam(grads, adam_m, adam_v)
        for j, t in enumerate(params):
            t.assign(t.detach() - delta[pos[j]:pos[j + 1]].reshape(t.shape))
        Tensor.realize(*params, *buffers, adam_m, adam_v, b1_t, b2_t)
        return loss.item()
    return model, step


class TransformerBlock:                 # extra/models/transformer.py
    def __init__(self, Tensor, embed_dim, num_heads, ff_dim, dropout=0.1):
        self.num_heads, self.head_size, self.dropout = num_heads, embed_dim // num_heads, dropout
        pair = lambda n_in, n_out: (Tensor.scaled_uniform(n_in, n_out), Tensor.zeros(n_out))     # noqa: E731
        self.query, self.key, self.value, self.out = (pair(embed_dim, embed_dim) for _ in range(4))
        self.ff1, self.ff2 = pair(embed_dim, ff_dim), pair(ff_dim, embed_dim)
        self.ln1, self.ln2 = ((Tensor.ones(embed_dim), Tensor.zeros(embed_dim)) for _ in range(2))

    def attn(self, x):
        q, k, v = [x.linear(*y).reshape(shape=(x.shape[0], -1, self.num_heads, self.head_size)).transpose(1, 2)
                   for y in (self.query, self.key, self.value)]
        attention = q.scaled_dot_product_attention(k, v).transpose(1, 2)
        return attention.reshape(shape=(x.shape[0], -1, self.num_heads * self.head_size)).linear(*self.out)

    def __call__(self, x):
        x = (x + self.attn(x).dropout(self.dropout)).layernorm().linear(*self.ln1)
        x = x + x.linear(*self.ff1).relu().linear(*self.ff2).dropout(self.dropout)
        return x.layernorm().linear(*self.ln2)


class Transformer:
    def __init__(self, Tensor, syms, maxlen, layers, embed_dim, num_heads, ff_dim):
        self.Tensor, self.maxlen, self.syms = Tensor, maxlen, syms
        self.embed = Tensor.scaled_uniform(maxlen + syms, embed_dim)
        self.tbs = [TransformerBlock(Tensor, embed_dim, num_heads, ff_dim) for _ in range(layers)]
        self.final = Tensor.scaled_uniform(embed_dim, syms)

    def forward(self, x):
        bs, xnp = x.shape[0], x.numpy().astype(np.int32)
        onehot = np.zeros((bs, x.shape[1], self.maxlen + self.syms), dtype=np.float32)
        for i in range(x.shape[1]):
            onehot[range(bs), i, i] = 1
            onehot[range(bs), i, self.maxlen + xnp[:, i]] = 1
        x = self.Tensor(onehot.reshape(bs * x.shape[1], -1)).dot(self.embed).reshape(shape=(bs, x.shape[1], -1))
        x = x.sequential(self.tbs).reshape(shape=(-1, x.shape[-1])).dot(self.final).log_softmax()
        return x.reshape(shape=(bs, -1, x.shape[-1]))


def transformer(tg):                    # examples/transformer.py through extra/training.py's train()
    Tensor, rng = tg.Tensor, np.random.default_rng(0)
    pairs = np.array([[i // 10, i % 10, j // 10, j % 10, (i + j) // 100, (i + j) // 10 % 10, (i + j) % 10]
                      for i in range(100) for j in range(100)], np.float32)
    # (the targets as ints: tinygrad 0.14's sparse_categorical_crossentropy refuses the example's float32 ones)
    X_train, Y_train = pairs[:8000, 0:6], pairs[:8000, 1:].astype(np.int32)
    model = Transformer(Tensor, 10, 6, 2, 128, 4, 32)
    optim = tg.nn.optim.Adam(tg.nn.state.get_parameters(model), lr=0.003)

    def step():
        with tg.Context(TRAINING=1):
            samp = rng.integers(0, X_train.shape[0], size=64)
            x, y = Tensor(X_train[samp]), Tensor(Y_train[samp])
            out = model.forward(x)
            loss = out.sparse_categorical_crossentropy(y)
            optim.zero_grad()
            loss.backward()
            optim.step()
            (out.argmax(axis=-1) == y).mean().numpy()
            return loss.detach().numpy()
    return step


def mnist_tutorial(tg):                 # docs/mnist.md: the jitted step
    Tensor, nn, images, labels = tg.Tensor, tg.nn, *mnist_arrays()
    X_train, Y_train = Tensor(images), Tensor(labels)

    class Model:
        def __init__(self):
            self.l1, self.l2 = nn.Conv2d(1, 32, kernel_size=(3, 3)), nn.Conv2d(32, 64, kernel_size=(3, 3))
            self.l3 = nn.Linear(1600, 10)

        def __call__(self, x):
            x = self.l2(self.l1(x).relu().max_pool2d((2, 2))).relu().max_pool2d((2, 2))
            return self.l3(x.flatten(1).dropout(0.5))
    model = Model()
    optim = nn.optim.Adam(nn.state.get_parameters(model))

    @tg.TinyJit
    def jit_step():
        with tg.Context(TRAINING=1):
            samples = Tensor.randint(128, high=X_train.shape[0])
            X, Y = X_train[samples], Y_train[samples]
            optim.zero_grad()
            loss = model(X).sparse_categorical_crossentropy(Y).backward()
            optim.step()
            return loss
    return lambda: jit_step().item()


def quickstart(tg):                     # docs/quickstart.md: a hand-written MLP, loss and SGD, no jit
    Tensor, dtypes, rng = tg.Tensor, tg.dtypes, np.random.default_rng(0)
    images, labels = mnist_arrays()
    X_train = images.reshape(-1, 784).astype(np.float32)
    w1, w2 = Tensor.kaiming_uniform(128, 784), Tensor.kaiming_uniform(10, 128)
    opt = tg.nn.optim.SGD([w1, w2], lr=3e-4)

    def sparse_categorical_crossentropy(out, Y, ignore_index=-1):
        loss_mask = Y != ignore_index
        y_counter = Tensor.arange(out.shape[-1], dtype=dtypes.int32).unsqueeze(0).expand(Y.numel(), out.shape[-1])
        y = ((y_counter == Y.flatten().reshape(-1, 1)).where(-1.0, 0) * loss_mask.reshape(-1, 1))
        return out.log_softmax().mul(y.reshape(*Y.shape, out.shape[-1])).sum() / loss_mask.sum()

    def step():
        with tg.Context(TRAINING=1):
            samp = rng.integers(0, X_train.shape[0], size=64)
            batch, y = Tensor(X_train[samp]), Tensor(labels[samp])
            out = batch.linear(w1.transpose()).leaky_relu().linear(w2.transpose())
            loss = sparse_categorical_crossentropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            (out.argmax(axis=-1) == y).mean().numpy()
            return loss.numpy()
    return step


def worker(framework: str, workload: str, steps: int):
    """Runs in the child process: prints {"first": s, "median": s} for the workload's step."""
    import importlib
    tg = importlib.import_module(framework)
    for sub in ("nn", "nn.optim", "nn.state"):      # (submodules, imported as the examples' `from ... import nn`)
        importlib.import_module(f"{framework}.{sub}")
    tg.Tensor.manual_seed(0)
    step = globals()[workload](tg)
    times = []
    for _ in range(WARMUP[workload] + steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(json.dumps({"first": times[0], "median": statistics.median(times[WARMUP[workload]:])}))


def full_worker(framework: str, workload: str, steps: int):
    """Runs in the child process (--full): prints {"accuracy": %, "loss": the last step's, "seconds": the training's}."""
    import importlib
    tg = importlib.import_module(framework)
    for sub in ("nn", "nn.optim", "nn.state"):
        importlib.import_module(f"{framework}.{sub}")
    from tinygrad_core.nn.datasets import load_mnist
    X_train, Y_train, X_test, Y_test = load_mnist()
    tg.Tensor.manual_seed(int(os.environ.get("BENCH_SEED", "0")))
    model, step = FULL[workload](tg, (X_train, Y_train))
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    seconds = time.perf_counter() - start
    # the example's get_test_acc, outside training mode (BatchNorm on its running statistics)
    X, Y, devices = tg.Tensor(X_test), tg.Tensor(Y_test), tg.nn.state.get_parameters(model)[0].device
    if isinstance(devices, tuple):          # (a replicated model: the test images are sharded too, as the example does)
        X, Y = X.shard_(devices, axis=0), Y.shard_(devices, axis=0)
    accuracy = ((model(X).argmax(axis=1) == Y).mean() * 100).item()
    print(json.dumps({"accuracy": accuracy, "loss": loss, "seconds": seconds}))


def beautiful_mnist_to_the_end(tg, arrays):
    model, train_step = beautiful_mnist_model_and_step(tg, arrays)
    return model, lambda: train_step().item()


def beautiful_mnist_on_two_devices(tg, arrays):
    model, train_step = beautiful_mnist_model_and_step(tg, arrays, devices=("CPU:0", "CPU:1"))
    return model, lambda: train_step().item()


FULL = {"beautiful_mnist": beautiful_mnist_to_the_end, "gradaccum_mnist": gradaccum_mnist_model_and_step,
        "beautiful_mnist_multigpu": beautiful_mnist_on_two_devices}


def run(framework: str, workload: str, steps: int, full: bool = False):
    env = {**os.environ, **({"DEV": "CPU"} if framework == "tinygrad" else {})}
    done = subprocess.run([sys.executable, __file__, "--worker", framework, workload, "--steps", str(steps)] +
                          (["--full"] if full else []), capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return f"failed: {(done.stderr.strip().splitlines() or ['?'])[-1][:100]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, help=f"timed steps per workload (after the warm-up; default 3), or "
                        f"with --full the training steps (default {FULL_STEPS})")
    parser.add_argument("--only", help="comma-separated workloads (default: all; with --full, " + ",".join(FULL) + ")")
    parser.add_argument("--full", action="store_true", help="train the MNIST examples to the end on MNIST and print "
                        "their test accuracy")
    parser.add_argument("--seed", type=int, default=0, help="with --full: Tensor.manual_seed in each run")
    parser.add_argument("--frameworks", default="tinygrad,tinygrad_core", help="with --full: which to run")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.worker:
        os.environ["BENCH_SEED"] = str(args.seed)     # (the workers, in processes of their own, read it)
    steps = args.steps or (FULL_STEPS if args.full else 3)
    if args.worker:
        return (full_worker if args.full else worker)(*args.worker, steps)
    if args.full:
        return full_table((args.only or ",".join(FULL)).split(","), steps, args.frameworks.split(","))
    print("| workload | tinygrad 0.14 s/step | tinygrad_core s/step | ratio (ours / tinygrad) | first step "
          "tinygrad / ours (s) |\n|---|---|---|---|---|")
    for workload in (args.only or ",".join(WORKLOADS)).split(","):
        theirs, ours = (run(framework, workload, steps) for framework in ("tinygrad", "tinygrad_core"))
        cells = [r["median"] if isinstance(r, dict) else r for r in (theirs, ours)]
        ratio = f"{cells[1] / cells[0]:.2f}" if all(isinstance(c, float) for c in cells) else "-"
        first = " / ".join(f"{r['first']:.1f}" if isinstance(r, dict) else "-" for r in (theirs, ours))
        print(f"| {workload} | " + " | ".join(f"{c:.3f}" if isinstance(c, float) else c for c in cells) +
              f" | {ratio} | {first} |", flush=True)


def full_table(workloads: list[str], steps: int, frameworks: list[str]):
    print(f"| workload ({steps} steps) | tinygrad 0.14 test accuracy (%) | tinygrad_core test accuracy (%) | last loss "
          f"tinygrad / ours | training s tinygrad / ours |\n|---|---|---|---|---|")
    for workload in workloads:
        results = [run(framework, workload, steps, full=True) if framework in frameworks else "-"
                   for framework in ("tinygrad", "tinygrad_core")]
        accuracy = [f"{r['accuracy']:.2f}" if isinstance(r, dict) else r for r in results]
        loss, seconds = (" / ".join(format(r[key], fmt) if isinstance(r, dict) else "-" for r in results)
                         for key, fmt in (("loss", ".3f"), ("seconds", ".0f")))
        print(f"| {workload} | {accuracy[0]} | {accuracy[1]} | {loss} | {seconds} |", flush=True)


if __name__ == "__main__":
    main()
